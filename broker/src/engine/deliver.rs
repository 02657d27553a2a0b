//! The delivery path: queue deliveries become transfers on consumer links
//! (header rewritten only when delivery-count or first-acquirer changed),
//! the peer's flow sets credit and drain, and its dispositions settle
//! messages in the queue.

use bytes::{Bytes, BytesMut};

use super::error::ConnectionError;
use super::link::Link;
use super::outbox::Outbox;
use super::session::{OutgoingTransfer, Session};
use super::state::{LinkRef, State};
use super::unsettled::Unsettled;
use crate::codec::definitions::condition;
use crate::codec::{
    DeliveryState, Disposition, Flow, Header, Performative, Role, SenderSettleMode,
};
use crate::queue::{Delivery, Outcome};

/// The message bytes to send: as published, or with a new header section.
fn delivery_parts(delivery: &Delivery) -> [Bytes; 2] {
    let message = &delivery.message;
    let published = message.header.clone().unwrap_or_default();
    let first_acquirer = published.first_acquirer && !delivery.redelivered;
    if delivery.delivery_count == published.delivery_count
        && first_acquirer == published.first_acquirer
    {
        return [Bytes::new(), message.bytes.clone()];
    }
    let header = Header {
        delivery_count: delivery.delivery_count,
        first_acquirer,
        ..published
    };
    let mut encoded = BytesMut::with_capacity(32);
    header.encode(&mut encoded);
    let rest = message.bytes.slice(message.header_len as usize..);
    [encoded.freeze(), rest]
}

impl State {
    pub(crate) fn deliver(&mut self, link: LinkRef, delivery: Delivery, out: &mut Outbox) {
        let max_frame = self.remote_max_frame_size;
        let Some(session) = self.sessions.get_mut(&link.channel) else {
            return;
        };
        let Some(Link::Consumer(consumer)) = session.links.get_mut(&link.handle) else {
            return;
        };
        // Behind any delivery still held: the link's order is the queue's.
        consumer.held.push_back(delivery);
        send_held(session, link, max_frame, out);
    }

    /// The queue finished a drain: report the used-up credit to the peer.
    pub(crate) fn drained(&mut self, link: LinkRef, credit_limit: u32, out: &mut Outbox) {
        let max_frame = self.remote_max_frame_size;
        let Some(session) = self.sessions.get_mut(&link.channel) else {
            return;
        };
        // Transfers before the drain answer go first.
        session.pump(out, max_frame);
        let session_flow = session.flow();
        let Some(Link::Consumer(consumer)) = session.links.get_mut(&link.handle) else {
            return;
        };
        if (credit_limit.wrapping_sub(consumer.delivery_count) as i32) > 0 {
            consumer.delivery_count = credit_limit;
        }
        let flow = Flow {
            handle: Some(link.handle),
            delivery_count: Some(consumer.delivery_count),
            link_credit: Some(consumer.credit()),
            drain: consumer.drain,
            ..session_flow
        };
        out.frame(link.channel, &Performative::Flow(flow));
    }

    pub(crate) fn on_flow(
        &mut self,
        channel: u16,
        flow: Flow,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        let credit_max = self.context.limits.consumer_credit_max;
        let max_frame = self.remote_max_frame_size;
        let Some(session) = self.sessions.get_mut(&channel) else {
            return Ok(());
        };
        session.on_remote_flow(&flow);
        let session_flow = session.flow();
        let Some(handle) = flow.handle else {
            if flow.echo {
                out.frame(channel, &Performative::Flow(session_flow));
            }
            session.pump(out, max_frame);
            return Ok(());
        };
        let reply = match session.links.get_mut(&handle) {
            None if session.detaching.contains(&handle) => None,
            None => {
                return Err(ConnectionError::protocol(
                    condition::UNATTACHED_HANDLE,
                    format!("flow on handle {handle}, which is not attached"),
                ))
            }
            Some(Link::Consumer(consumer)) => {
                // Our initial delivery-count is 0; a peer that has not seen
                // our attach yet counts from there.
                let peer_count = flow.delivery_count.unwrap_or(0);
                let credit = flow.link_credit.unwrap_or(0).min(credit_max);
                consumer.credit_limit = peer_count.wrapping_add(credit);
                consumer.drain = flow.drain;
                // What the queue pushes for this flow comes through the
                // connection's event channel, after the held ones are out.
                send_held(session, LinkRef { channel, handle }, max_frame, out);
                let Some(Link::Consumer(consumer)) = session.links.get_mut(&handle) else {
                    return Ok(());
                };
                consumer
                    .queue
                    .flow(consumer.consumer, consumer.credit_limit, flow.drain);
                flow.echo.then(|| Flow {
                    handle: Some(handle),
                    delivery_count: Some(consumer.delivery_count),
                    link_credit: Some(consumer.credit()),
                    drain: consumer.drain,
                    ..session_flow
                })
            }
            Some(Link::Publisher(publisher)) => flow.echo.then(|| Flow {
                handle: Some(handle),
                delivery_count: Some(publisher.delivery_count),
                link_credit: Some(publisher.credit),
                ..session_flow
            }),
        };
        if let Some(reply) = reply {
            out.frame(channel, &Performative::Flow(reply));
        }
        session.pump(out, max_frame);
        Ok(())
    }

    pub(crate) fn on_disposition(
        &mut self,
        channel: u16,
        disposition: Disposition,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        if disposition.role == Role::Sender {
            // The peer settles deliveries it sent us (rcv-settle-mode
            // second): we keep nothing for those once answered.
            return Ok(());
        }
        let first = disposition.first;
        let last = disposition.last.unwrap_or(first);
        if let Some(DeliveryState::Transactional { txn_id, outcome }) = disposition.state {
            // Settled in a transaction: staged until its discharge.
            if let Some(outcome) = outcome.as_deref().and_then(outcome_of) {
                self.stage_settlements(channel, first, last, txn_id, outcome);
            }
            return Ok(());
        }
        let Some(session) = self.sessions.get_mut(&channel) else {
            return Ok(());
        };
        let outcome = match disposition.state.as_ref().and_then(outcome_of) {
            Some(outcome) => outcome,
            // Settled without an outcome: nothing says it was processed, so
            // it goes back to the queue (no message is lost this way).
            None if disposition.settled => Outcome::Released,
            None => return Ok(()),
        };
        let links = &session.links;
        session
            .unsettled
            .remove_range_each(first, last, |_, unsettled| {
                if let Some(Link::Consumer(consumer)) = links.get(&unsettled.handle) {
                    consumer
                        .queue
                        .settle(unsettled.consumer, unsettled.message, outcome);
                }
            });
        if !disposition.settled {
            // rcv-settle-mode second: the peer waits for us to settle.
            out.frame(
                channel,
                &Performative::Disposition(Disposition {
                    role: Role::Sender,
                    first,
                    last: disposition.last,
                    settled: true,
                    state: disposition.state,
                    batchable: false,
                }),
            );
        }
        Ok(())
    }
}

/// The queue outcome a delivery state names, if it is an outcome.
pub(super) fn outcome_of(state: &DeliveryState) -> Option<Outcome> {
    Some(match state {
        DeliveryState::Accepted => Outcome::Accepted,
        DeliveryState::Rejected { .. } => Outcome::Rejected,
        DeliveryState::Released => Outcome::Released,
        DeliveryState::Modified {
            delivery_failed,
            undeliverable_here,
            ..
        } => Outcome::Modified {
            delivery_failed: *delivery_failed,
            undeliverable_here: *undeliverable_here,
        },
        _ => return None,
    })
}

/// Send the link's held deliveries, oldest first, while it has credit.
fn send_held(session: &mut Session, link: LinkRef, max_frame: usize, out: &mut Outbox) {
    let Some(Link::Consumer(consumer)) = session.links.get_mut(&link.handle) else {
        return;
    };
    let mut any = false;
    while consumer.credit() > 0 {
        let Some(delivery) = consumer.held.pop_front() else {
            break;
        };
        any = true;
        consumer.delivery_count = consumer.delivery_count.wrapping_add(1);
        let settled = consumer.snd_settle_mode == SenderSettleMode::Settled;
        let delivery_id = session.next_delivery_id;
        session.next_delivery_id = delivery_id.wrapping_add(1);
        if settled {
            // At-most-once: the message is gone once it is on its way.
            consumer
                .queue
                .settle(consumer.consumer, delivery.id, Outcome::Accepted);
        } else {
            session.unsettled.insert(
                delivery_id,
                Unsettled {
                    handle: link.handle,
                    consumer: consumer.consumer,
                    message: delivery.id,
                },
            );
        }
        session.pending.push_back(OutgoingTransfer {
            handle: link.handle,
            delivery_id,
            delivery_tag: delivery.id.to_be_bytes(),
            settled,
            parts: delivery_parts(&delivery),
            sent: 0,
        });
    }
    if any {
        session.pump(out, max_frame);
    }
}
