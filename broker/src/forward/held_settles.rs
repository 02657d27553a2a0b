//! Settlements a routed queue holds for the queue's leader, so an accepted
//! (or rejected) message is not delivered again because its settlement was
//! dropped on the way:
//!
//! - per consumer: made while no leader was known, while the local replica
//!   had stepped down, or whose forwarding send failed (the target is then
//!   lost); sent on the consumer's next link, after its `Subscribe`;
//! - orphans: those of consumers that left (detached, or closed by the
//!   broker) before a leader was found; the follower task hands them to the
//!   leader by message id (ids are replicated) once it knows one, the
//!   local replica directly, another node through `Request::Settle`.
//!
//! The leader's side of `Request::Settle` is here too
//! (`Forwarder::take_settles`).
//!
//! And settlements in doubt: those a consumer sent to a remote leader
//! lately (the last `IN_DOUBT_MAX`). A send that succeeded may still be
//! lost with a leader that dies: queued to a connection not yet known
//! broken, or taken and not yet replicated. When the consumer's link
//! moves to another leader they are sent again, before its credit: the
//! new leader settles by id what it still has (a no-op for the rest), so
//! a message the client accepted is not delivered to it again. (With a
//! fail-over within half a second the client saw 100-199 such
//! redeliveries after a `kill -9` of the leader, in 2 runs of 3.)
//!
//! Bounded: a consumer holds at most one settlement per delivery it got,
//! and both it and the orphans at most `HELD_MAX` (past that the oldest
//! go: a duplicate later, never a loss). Orphans a leader keeps refusing
//! are dropped after `ORPHAN_TRIES` attempts.
//!
//! Owns holding and handing over settlements; must not know how the leader
//! is found (`follow.rs`) nor what the leader does with a settlement.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use super::protocol::{Reply, Request, ToServer};
use super::routed::{RConsumer, RoutedQueue, State, Target};
use super::Forwarder;
use crate::net::NodeId;
use crate::queue::{ConsumerId, MessageId, Outcome, QueueAddress};

/// Most settlements held per consumer, and most orphans per routed queue.
pub(super) const HELD_MAX: usize = 65_536;
/// Most settlements in doubt per consumer: those sent in the last moments
/// before a leader died (199 were lost at about 10,000 settles a second).
/// 16 bytes each: at most 16 KiB per consumer on a remote leader.
const IN_DOUBT_MAX: usize = 1024;
/// Attempts to hand orphans to a leader before they are dropped.
const ORPHAN_TRIES: u32 = 20;
/// Bound on one `Request::Settle` call.
const SETTLE_CALL_TIMEOUT: Duration = Duration::from_secs(1);

/// Settlements in the order they were made.
pub(super) type Settles = VecDeque<(MessageId, Outcome)>;

/// Add `settles` to `held`, dropping the oldest past `HELD_MAX`.
fn push_bounded(held: &mut Settles, settles: impl IntoIterator<Item = (MessageId, Outcome)>) {
    for settle in settles {
        if !matches!(settle.1, Outcome::Accepted | Outcome::Rejected) {
            // The message comes back anyway: nothing to tell the leader.
            continue;
        }
        if held.len() >= HELD_MAX {
            tracing::warn!(
                message = held.front().map(|s| s.0),
                "too many settlements held for a leader; dropping the oldest"
            );
            held.pop_front();
        }
        held.push_back(settle);
    }
}

/// Keep an accepted/rejected settlement for the next leader; the others
/// need nothing (the message comes back anyway).
pub(super) fn hold_settle(consumer: &mut RConsumer, message: MessageId, outcome: Outcome) {
    push_bounded(&mut consumer.held_settles, [(message, outcome)]);
}

/// The consumer's link to a remote leader is given up: what it sent
/// there lately goes to the next leader again, before what it held.
pub(super) fn doubt_sent(consumer: &mut RConsumer) {
    if consumer.in_doubt.is_empty() {
        return;
    }
    let mut settles = std::mem::take(&mut consumer.in_doubt);
    push_bounded(&mut settles, consumer.held_settles.drain(..));
    consumer.held_settles = settles;
}

/// The orphans of a routed queue and how often handing them over failed.
#[derive(Default)]
pub(super) struct Orphans {
    settles: Settles,
    tries: u32,
}

impl Orphans {
    pub(super) fn is_empty(&self) -> bool {
        self.settles.is_empty()
    }
}

impl RoutedQueue {
    /// Send `settles` of consumer `id` on its `link` at `node`, in order;
    /// if a send fails (the target is lost), that one and the rest are held
    /// again for the next leader instead of dropped.
    pub(super) fn send_settles(
        &self,
        state: &mut State,
        id: ConsumerId,
        (node, link): (NodeId, u64),
        settles: Settles,
    ) {
        let mut rest = settles.into_iter();
        while let Some((message, outcome)) = rest.next() {
            let settle = ToServer::Settle {
                link,
                message,
                outcome,
            };
            self.send(state, node, &settle, Bytes::new());
            let settled = matches!(outcome, Outcome::Accepted | Outcome::Rejected);
            // (A transient queue's messages are not settled by id.)
            if settled && state.target == Target::Remote(node) && self.owner.is_none() {
                if let Some(consumer) = state.consumers.get_mut(&id) {
                    if consumer.in_doubt.len() >= IN_DOUBT_MAX {
                        consumer.in_doubt.pop_front();
                    }
                    consumer.in_doubt.push_back((message, outcome));
                }
            }
            if state.target != Target::Remote(node) {
                tracing::debug!(queue = %self.address, node, "settlement not sent; held for the leader");
                let unsent = std::iter::once((message, outcome)).chain(rest);
                match state.consumers.get_mut(&id) {
                    Some(consumer) => push_bounded(&mut consumer.held_settles, unsent),
                    None => push_bounded(&mut state.orphans.settles, unsent),
                }
                self.kick.notify_one();
                return;
            }
        }
    }

    /// A consumer left with settlements it held: they go to the leader
    /// once one is known (the follower task hands them over).
    pub(super) fn orphan_settles(&self, state: &mut State, held: Settles) {
        if held.is_empty() || self.owner.is_some() {
            // A transient queue's messages are not settled by id.
            return;
        }
        push_bounded(&mut state.orphans.settles, held);
        self.kick.notify_one();
    }

    /// Hand the orphans to the current target, if any; those it did not
    /// take stay for the next attempt (bounded by `ORPHAN_TRIES`).
    pub(super) async fn flush_orphans(&self) {
        let (target, settles) = {
            let mut state = self.lock();
            if state.orphans.is_empty() {
                return;
            }
            (state.target, std::mem::take(&mut state.orphans.settles))
        };
        let taken = match target {
            Target::Local => self.local().is_some_and(|local| {
                // Checked once: a replica that stops leading half-way
                // settles the rest as a follower, which does nothing.
                local.is_leading()
                    && settles
                        .iter()
                        .all(|&(message, outcome)| local.settle_by_id(message, outcome))
            }),
            Target::Remote(node) => {
                let request = Request::Settle {
                    address: self.address.to_string(),
                    settles: settles.iter().copied().collect(),
                };
                let reply =
                    tokio::time::timeout(SETTLE_CALL_TIMEOUT, self.fwd.call(node, &request)).await;
                matches!(reply, Ok(Ok(Reply::Settled { taken: true, .. })))
            }
            Target::Searching(_) => false,
        };
        let mut state = self.lock();
        if taken {
            tracing::debug!(queue = %self.address, n = settles.len(), "held settlements handed to the leader");
            state.orphans.tries = 0;
            return;
        }
        if !matches!(target, Target::Searching(_)) {
            state.orphans.tries += 1;
        }
        if state.orphans.tries >= ORPHAN_TRIES {
            tracing::warn!(queue = %self.address, n = settles.len(), "the leader did not take held settlements; dropped");
            state.orphans.tries = 0;
            return;
        }
        // Before any orphaned since: the order they were made in.
        let newer = std::mem::replace(&mut state.orphans.settles, settles);
        push_bounded(&mut state.orphans.settles, newer);
        if matches!(target, Target::Local) {
            // It does not lead any more: look for who does.
            self.lose_target(&mut state);
        }
    }
}

impl Forwarder {
    /// The leader's side of `Request::Settle`: settle `settles` by message
    /// id on the local replica of quorum queue `address` if it leads;
    /// otherwise say who does, as far as this node knows.
    pub(super) fn take_settles(&self, address: &str, settles: Vec<(MessageId, Outcome)>) -> Reply {
        let Ok(address) = QueueAddress::parse(address) else {
            return Reply::Failed(format!("bad address {address}"));
        };
        let Some(queue) = self.quorum.get(&address) else {
            return Reply::Settled {
                taken: false,
                leader: None,
            };
        };
        let taken = queue.sync_leadership()
            && settles
                .into_iter()
                .all(|(message, outcome)| queue.settle_by_id(message, outcome));
        Reply::Settled {
            taken,
            leader: if taken {
                Some(self.node_id)
            } else {
                queue.leader()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_accepted_and_rejected_are_held_and_the_oldest_go_first() {
        let mut held = Settles::new();
        push_bounded(
            &mut held,
            [
                (1, Outcome::Accepted),
                (2, Outcome::Released),
                (3, Outcome::Rejected),
            ],
        );
        assert_eq!(
            held.iter().copied().collect::<Vec<_>>(),
            vec![(1, Outcome::Accepted), (3, Outcome::Rejected)]
        );
        push_bounded(
            &mut held,
            (10..10 + HELD_MAX as u64).map(|m| (m, Outcome::Accepted)),
        );
        assert_eq!(held.len(), HELD_MAX);
        assert_eq!(held.front(), Some(&(10, Outcome::Accepted)));
    }
}
