//! The model of `quorum_model.rs`: what one quorum queue should hold, in
//! which order it delivers, and what each delivery's header should say.
//! Plain data, no IO: the driver tells it what the client did and checks
//! every delivery against it.
//!
//! Order (`queue/dispatch.rs`, docs/architecture.md "The path of a
//! delivery"): messages that came back (released, modified, or unsettled
//! at a detach) are served first in publish order, then never-delivered
//! ones in publish order; a restart rebuilds the queue from the index in
//! publish order.
//!
//! delivery-count (AMQP 1.0 3.2.1, 3.4.4, 3.4.5): one more per modified
//! with delivery-failed; released and a detach leave it. The leader counts
//! at once and replicates in batches, which a graceful stop flushes; after
//! an abrupt stop the count is anywhere from the last one known replicated
//! to the leader's.
//!
//! first-acquirer (3.2.1): false on any redelivery. On a first delivery
//! the broker keeps the publisher's `true`, except that after a restart it
//! may say false for everything that was in the queue (allowed: "MAY have
//! been acquired").

use std::collections::{BTreeMap, VecDeque};

use fe2o3_amqp::link::delivery::Delivery;

use super::common::{body_text, header_delivery_count, AnyBody};

/// What a consumer does with a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    Accept,
    Release,
    /// modified with delivery-failed.
    Fail,
    /// Keep it unsettled (for a later `SettleHeld`, a detach or a restart).
    Hold,
}

/// One message as the model expects it.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    pub(crate) seq: u64,
    pub(crate) body: String,
    /// The delivery-count the leader has counted.
    count: u32,
    /// The count known to be replicated: after an abrupt stop the
    /// redelivery may carry anything from this to `count`.
    count_replicated: u32,
    /// An abrupt stop came while `count_replicated < count`.
    count_uncertain: bool,
    delivered: bool,
    /// A restart came since it was published.
    restarted: bool,
}

/// The queue as it should be.
#[derive(Debug, Default)]
pub(crate) struct Model {
    next_seq: u64,
    /// Came back from a consumer, by publish order: served first.
    returned: BTreeMap<u64, Expected>,
    /// Never delivered (since the last restart), in publish order.
    fresh: VecDeque<Expected>,
    /// Out with the receiver, unsettled, in delivery order.
    pub(crate) held: Vec<Expected>,
}

impl Model {
    pub(crate) fn publish(&mut self, size: usize) -> Expected {
        let seq = self.next_seq;
        self.next_seq += 1;
        let expected = Expected {
            seq,
            body: format!("{seq:06}:{}", "x".repeat(size)),
            count: 0,
            count_replicated: 0,
            count_uncertain: false,
            delivered: false,
            restarted: false,
        };
        self.fresh.push_back(expected.clone());
        expected
    }

    pub(crate) fn n_ready(&self) -> usize {
        self.returned.len() + self.fresh.len()
    }

    /// The next `n` deliveries (fewer if the queue has fewer), taken out.
    pub(crate) fn take(&mut self, n: usize) -> Vec<Expected> {
        let mut taken = Vec::new();
        while taken.len() < n {
            let next = match self.returned.pop_first() {
                Some((_, e)) => e,
                None => match self.fresh.pop_front() {
                    Some(e) => e,
                    None => break,
                },
            };
            taken.push(next);
        }
        taken
    }

    pub(crate) fn settle(&mut self, mut expected: Expected, how: Settle) {
        expected.delivered = true;
        match how {
            Settle::Accept => {}
            Settle::Release => {
                self.returned.insert(expected.seq, expected);
            }
            Settle::Fail => {
                expected.count += 1;
                self.returned.insert(expected.seq, expected);
            }
            Settle::Hold => self.held.push(expected),
        }
    }

    pub(crate) fn detach(&mut self) {
        for expected in self.held.drain(..) {
            self.returned.insert(expected.seq, expected);
        }
    }

    /// The node stopped: everything is rebuilt from the index in publish
    /// order. A graceful stop flushes settlements (`flush_settlements`);
    /// an abrupt one may lose the last failed attempts.
    pub(crate) fn restart(&mut self, abrupt: bool) {
        let mut all: Vec<Expected> = self.held.drain(..).collect();
        all.extend(std::mem::take(&mut self.returned).into_values());
        all.extend(self.fresh.drain(..));
        all.sort_by_key(|e| e.seq);
        for e in &mut all {
            e.restarted = true;
            if abrupt {
                e.count_uncertain |= e.count_replicated < e.count;
            } else if !e.count_uncertain {
                e.count_replicated = e.count;
            }
        }
        self.fresh = all.into();
    }
}

/// Check one delivery against what the model expects next, and learn the
/// count an abrupt stop left.
pub(crate) fn check_delivery(
    expected: &mut Expected,
    delivery: &Delivery<AnyBody>,
) -> Result<(), String> {
    let message = delivery.message();
    let body = body_text(message);
    if body.as_deref() != Some(expected.body.as_str()) {
        let short = |s: &str| s.chars().take(12).collect::<String>();
        return Err(format!(
            "expected message {} next, got {:?}",
            expected.seq,
            body.as_deref().map(short)
        ));
    }
    let count = header_delivery_count(message);
    let allowed = if expected.count_uncertain {
        expected.count_replicated..=expected.count
    } else {
        expected.count..=expected.count
    };
    if !allowed.contains(&count) {
        return Err(format!(
            "message {}: delivery-count {count}, expected {allowed:?}",
            expected.seq
        ));
    }
    if expected.count_uncertain {
        // Redelivered after an abrupt stop: the count is what the log had.
        expected.count = count;
        expected.count_replicated = count;
        expected.count_uncertain = false;
    }
    let first_acquirer = message.header.as_ref().is_some_and(|h| h.first_acquirer);
    if expected.delivered && first_acquirer {
        return Err(format!(
            "message {}: first-acquirer true on a redelivery",
            expected.seq
        ));
    }
    if !expected.delivered && !expected.restarted && !first_acquirer {
        return Err(format!(
            "message {}: first delivery lost the publisher's first-acquirer",
            expected.seq
        ));
    }
    Ok(())
}
