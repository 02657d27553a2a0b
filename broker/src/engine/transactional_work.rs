//! Work arriving for a transaction: a complete delivery on a coordinator
//! link (handed to `transaction.rs`), a transfer posted with a
//! `transactional-state` (staged for its queue, also through the anonymous
//! relay) and a disposition with one (the deliveries staged for the
//! discharge). Each is answered with its presumptive outcome.
//!
//! It must not know what a discharge does with the staged work
//! (`transaction.rs`) nor how a queue applies it.

use std::sync::Arc;

use bytes::Bytes;

use super::link::{Destination, Link, PartialDelivery, PublisherLink};
use super::outbox::Outbox;
use super::relay::RelayWait;
use super::state::State;
use super::transaction::{answer, StagedSettle};
use super::transfer::Posted;
use crate::codec::definitions::condition;
use crate::codec::{DeliveryState, Error};
use crate::queue::{Message, Outcome, Queue, QueueAddress};

impl State {
    /// A complete delivery on a coordinator link (a declare or a
    /// discharge), or posted in a transaction on a publisher link: staged
    /// for its queue, answered with its presumptive outcome.
    pub(crate) fn on_transactional(
        &mut self,
        posted: Posted,
        partial: PartialDelivery,
        out: &mut Outbox,
    ) {
        let delivery_id = partial.delivery_id;
        let settled = partial.settled;
        let txn_id = partial.txn_id.clone();
        let bytes = partial.into_bytes();
        if posted.coordinator {
            if let Some(state) = self.on_control(posted.tag, delivery_id, settled, &bytes, out) {
                answer(posted.channel, delivery_id, state, out);
            }
            return;
        }
        let Some(txn_id) = txn_id else {
            return;
        };
        let staged = match super::transfer::scan(bytes) {
            Err(e) => Err(Error::new(
                condition::DECODE_ERROR,
                format!("malformed message: {e}"),
            )),
            Ok(message) => match posted.queue {
                Some(queue) => {
                    self.transactions
                        .post(&txn_id, queue, message, &self.context.limits)
                }
                None if posted.relay => {
                    match self.relay_target(&posted, &message) {
                        Err(error) => Err(error),
                        Ok((_, Some(queue))) => {
                            self.transactions
                                .post(&txn_id, queue, message, &self.context.limits)
                        }
                        Ok((address, None)) => {
                            // Prepared by the connection task first, as
                            // any relayed message (`relay.rs`).
                            self.relay_wait = Some(RelayWait {
                                channel: posted.channel,
                                handle: posted.handle,
                                address,
                                message,
                                delivery_id,
                                settled,
                                txn_id: Some(txn_id),
                            });
                            return;
                        }
                    }
                }
                None => return,
            },
        };
        if let Err(error) = &staged {
            tracing::debug!(handle = posted.handle, error = ?error.description, "transactional post refused");
        }
        if !settled {
            answer(
                posted.channel,
                delivery_id,
                transactional(txn_id, staged),
                out,
            );
        }
    }

    /// Where a relayed message in a transaction goes: its address (checked
    /// for `write`, and `configure` if it would create the queue) and the
    /// queue if the link has it resolved already.
    fn relay_target(
        &mut self,
        posted: &Posted,
        message: &Message,
    ) -> Result<(QueueAddress, Option<Arc<dyn Queue>>), Error> {
        let address = super::relay::destination(&message.bytes)?;
        self.authorize_relay(&address)?;
        let cached = match self
            .sessions
            .get_mut(&posted.channel)
            .and_then(|s| s.links.get_mut(&posted.handle))
        {
            Some(Link::Publisher(PublisherLink {
                destination: Destination::Relay(relay),
                ..
            })) => relay.get(&address),
            _ => None,
        };
        Ok((address, cached))
    }

    /// A relayed message in a transaction whose address the connection
    /// task prepared: stage it (its link's credit was topped up when it
    /// arrived).
    pub(crate) fn resume_transactional_relay(
        &mut self,
        wait: RelayWait,
        txn_id: Bytes,
        resolved: Result<Arc<dyn Queue>, Error>,
        out: &mut Outbox,
    ) {
        let staged = resolved.and_then(|queue| {
            if let Some(Link::Publisher(PublisherLink {
                destination: Destination::Relay(relay),
                ..
            })) = self
                .sessions
                .get_mut(&wait.channel)
                .and_then(|s| s.links.get_mut(&wait.handle))
            {
                relay.insert(wait.address.clone(), queue.clone());
            }
            self.transactions
                .post(&txn_id, queue, wait.message, &self.context.limits)
        });
        if !wait.settled {
            answer(
                wait.channel,
                wait.delivery_id,
                transactional(txn_id, staged),
                out,
            );
        }
    }
}

impl State {
    /// The peer settled deliveries `first..=last` in transaction `txn_id`:
    /// staged until the discharge. A refused one (no such transaction,
    /// past the staging bound) goes back to its queue.
    pub(crate) fn stage_settlements(
        &mut self,
        channel: u16,
        first: u32,
        last: u32,
        txn_id: Bytes,
        outcome: Outcome,
    ) {
        let Some(session) = self.sessions.get_mut(&channel) else {
            return;
        };
        for (delivery_id, unsettled) in session.unsettled.remove_range(first, last) {
            let Some(super::link::Link::Consumer(consumer)) = session.links.get(&unsettled.handle)
            else {
                continue;
            };
            let staged = StagedSettle {
                channel,
                handle: unsettled.handle,
                delivery_id,
                queue: consumer.queue.clone(),
                consumer: unsettled.consumer,
                message: unsettled.message,
                outcome,
            };
            if let Err((error, staged)) =
                self.transactions
                    .settle(&txn_id, staged, &self.context.limits)
            {
                tracing::debug!(error = ?error.description, "transactional settlement refused: message returned");
                staged
                    .queue
                    .settle(staged.consumer, staged.message, Outcome::Released);
            }
        }
    }
}

/// The answer to a posted message: its presumptive outcome in the
/// transaction.
fn transactional(txn_id: Bytes, staged: Result<(), Error>) -> DeliveryState {
    let outcome = match staged {
        Ok(()) => DeliveryState::Accepted,
        Err(error) => DeliveryState::Rejected { error: Some(error) },
    };
    DeliveryState::Transactional {
        txn_id,
        outcome: Some(Box::new(outcome)),
    }
}
