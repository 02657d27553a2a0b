//! The publish path: transfer frames from a publisher link are gathered
//! into a message, handed to the queue, answered with (ranged) `accepted`
//! dispositions, and the link's credit is topped up while the queue has
//! room.

use bytes::Bytes;

use super::error::ConnectionError;
use super::link::{Link, PartialDelivery, PublisherLink};
use super::outbox::Outbox;
use super::session::Session;
use super::state::{LinkRef, State};
use crate::codec::definitions::condition;
use crate::codec::{
    DeliveryState, Disposition, Error, Flow, MessageView, Performative, ReceiverSettleMode, Role,
    Transfer,
};
use crate::queue::{Message, Outcome, PublishConfirm, PublishStatus};

impl State {
    pub(crate) fn on_transfer(
        &mut self,
        channel: u16,
        transfer: Transfer,
        payload: Bytes,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        let Some(session) = self.sessions.get_mut(&channel) else {
            return Ok(());
        };
        if !session.take_incoming_frame() {
            return Err(ConnectionError::protocol(
                condition::WINDOW_VIOLATION,
                "transfer beyond the session's incoming-window",
            ));
        }
        if session.replenish_incoming_window() {
            out.frame(channel, &Performative::Flow(session.flow()));
        }
        let handle = transfer.handle;
        let session_flow = session.flow();
        let link = match session.links.get_mut(&handle) {
            // In flight before the peer saw our detach.
            None if session.detaching.contains(&handle) => return Ok(()),
            Some(Link::Publisher(link)) => link,
            Some(Link::Consumer(_)) => {
                return Err(ConnectionError::protocol(
                    condition::NOT_ALLOWED,
                    format!("transfer on handle {handle}, where the peer is the receiver"),
                ))
            }
            None => {
                return Err(ConnectionError::protocol(
                    condition::UNATTACHED_HANDLE,
                    format!("transfer on handle {handle}, which is not attached"),
                ))
            }
        };
        if link.partial.is_none() {
            if link.credit == 0 {
                return Err(ConnectionError::protocol(
                    condition::TRANSFER_LIMIT_EXCEEDED,
                    format!("transfer on handle {handle} without link credit"),
                ));
            }
            let Some(delivery_id) = transfer.delivery_id else {
                return Err(ConnectionError::protocol(
                    condition::INVALID_FIELD,
                    "first transfer of a delivery without delivery-id",
                ));
            };
            link.credit -= 1;
            link.delivery_count = link.delivery_count.wrapping_add(1);
            link.partial = Some(PartialDelivery {
                delivery_id,
                settled: false,
                chunks: Vec::new(),
                len: 0,
            });
        }
        let Some(partial) = link.partial.as_mut() else {
            return Ok(());
        };
        partial.settled |= transfer.settled.unwrap_or(false);
        if transfer.aborted {
            // An aborted delivery is forgotten; it used its credit.
            link.partial = None;
            return Ok(());
        }
        partial.len += payload.len();
        if partial.len as u64 > link.max_message_size {
            let error = Error::new(
                condition::MESSAGE_SIZE_EXCEEDED,
                format!("message exceeds max-message-size {}", link.max_message_size),
            );
            self.detach_link(channel, handle, error, out);
            return Ok(());
        }
        if !payload.is_empty() {
            partial.chunks.push(payload);
        }
        if transfer.more {
            return Ok(());
        }
        let Some(partial) = link.partial.take() else {
            return Ok(());
        };
        let mode = link.rcv_settle_mode;
        match publish(
            link,
            handle,
            partial,
            &self.sink,
            session_flow,
            channel,
            out,
        ) {
            Some(Answer::Accepted(id)) => record_outcome(session, mode, id, Outcome::Accepted, out),
            Some(Answer::Rejected(id, state)) => reject(channel, id, state, out),
            Some(Answer::Detach(id, error)) => {
                // The queue cannot take messages here (e.g. its leader
                // moved): the delivery is released and the link detached,
                // so the publisher sends again where the queue is served.
                if let Some(id) = id {
                    reject(channel, id, DeliveryState::Released, out);
                }
                self.detach_link(channel, handle, error, out);
            }
            None => {}
        }
        Ok(())
    }

    /// A pending publish (quorum queues) reached its outcome.
    pub(crate) fn published(
        &mut self,
        link: LinkRef,
        delivery_id: u32,
        outcome: Outcome,
        out: &mut Outbox,
    ) {
        let Some(session) = self.sessions.get_mut(&link.channel) else {
            return;
        };
        let mode = match session.links.get(&link.handle) {
            Some(Link::Publisher(l)) => l.rcv_settle_mode,
            _ => return,
        };
        record_outcome(session, mode, delivery_id, outcome, out);
    }

    /// The queue has room again: grant the publisher its credit back.
    pub(crate) fn capacity(&mut self, link: LinkRef, out: &mut Outbox) {
        let Some(session) = self.sessions.get_mut(&link.channel) else {
            return;
        };
        let flow = session.flow();
        if let Some(Link::Publisher(publisher)) = session.links.get_mut(&link.handle) {
            publisher.waiting_capacity = false;
            grant_credit(publisher, link.handle, flow, &self.sink, out, link.channel);
        }
    }
}

/// What to tell the publisher about one delivery right away.
enum Answer {
    Accepted(u32),
    Rejected(u32, DeliveryState),
    /// Detach the link; release the delivery if it was unsettled.
    Detach(Option<u32>, Error),
}

/// Hand a complete message to the queue, decide the publisher's answer, and
/// top up the link's credit.
fn publish(
    link: &mut PublisherLink,
    handle: u32,
    partial: PartialDelivery,
    sink: &crate::queue::Sink,
    session_flow: Flow,
    channel: u16,
    out: &mut Outbox,
) -> Option<Answer> {
    let delivery_id = partial.delivery_id;
    let settled = partial.settled;
    let bytes = partial.into_bytes();
    let answer = match MessageView::scan(&bytes) {
        Ok(view) => {
            let message = Message {
                bytes,
                header: view.header,
                header_len: view.header_len as u32,
            };
            let confirm = (!settled).then(|| PublishConfirm {
                sink: sink.clone(),
                tag: link.tag,
                token: u64::from(delivery_id),
            });
            match link.queue.publish(message, confirm) {
                Ok(PublishStatus::Accepted) if !settled => Some(Answer::Accepted(delivery_id)),
                Ok(_) => None,
                Err(e) => Some(Answer::Detach(
                    (!settled).then_some(delivery_id),
                    super::attach::queue_error(&e),
                )),
            }
        }
        Err(e) if !settled => Some(Answer::Rejected(
            delivery_id,
            DeliveryState::Rejected {
                error: Some(Error::new(
                    condition::DECODE_ERROR,
                    format!("malformed message: {e}"),
                )),
            },
        )),
        Err(e) => {
            tracing::debug!(error = %e, "malformed pre-settled message dropped");
            None
        }
    };
    if link.credit <= link.credit_window / 2 && !link.waiting_capacity {
        grant_credit(link, handle, session_flow, sink, out, channel);
    }
    answer
}

fn reject(channel: u16, delivery_id: u32, state: DeliveryState, out: &mut Outbox) {
    out.frame(
        channel,
        &Performative::Disposition(Disposition {
            role: Role::Receiver,
            first: delivery_id,
            last: None,
            settled: true,
            state: Some(state),
            batchable: false,
        }),
    );
}

fn record_outcome(
    session: &mut Session,
    mode: ReceiverSettleMode,
    delivery_id: u32,
    outcome: Outcome,
    out: &mut Outbox,
) {
    match (outcome, mode) {
        (Outcome::Accepted, ReceiverSettleMode::First) => session.accepted.push(delivery_id),
        (Outcome::Accepted, ReceiverSettleMode::Second) => {
            session.accepted_unsettled.push(delivery_id)
        }
        (Outcome::Released, _) => {
            reject(session.channel, delivery_id, DeliveryState::Released, out)
        }
        (
            Outcome::Modified {
                delivery_failed,
                undeliverable_here,
            },
            _,
        ) => reject(
            session.channel,
            delivery_id,
            DeliveryState::Modified {
                delivery_failed,
                undeliverable_here,
                message_annotations: None,
            },
            out,
        ),
        (Outcome::Rejected, _) => reject(
            session.channel,
            delivery_id,
            DeliveryState::Rejected { error: None },
            out,
        ),
    }
}

/// Top the link's credit up to its window if the queue has room, else
/// wait for the queue's capacity event.
fn grant_credit(
    link: &mut PublisherLink,
    handle: u32,
    session_flow: Flow,
    sink: &crate::queue::Sink,
    out: &mut Outbox,
    channel: u16,
) {
    if !link.queue.has_capacity(sink, link.tag) {
        link.waiting_capacity = true;
        return;
    }
    link.credit = link.credit_window;
    let flow = Flow {
        handle: Some(handle),
        delivery_count: Some(link.delivery_count),
        link_credit: Some(link.credit),
        ..session_flow
    };
    out.frame(channel, &Performative::Flow(flow));
}

/// Answer collected publishes with as few dispositions as possible: runs of
/// consecutive delivery-ids become one `first..last` range.
pub(crate) fn write_dispositions(session: &mut Session, out: &mut Outbox) {
    for settled in [true, false] {
        let ids = if settled {
            &mut session.accepted
        } else {
            &mut session.accepted_unsettled
        };
        if ids.is_empty() {
            continue;
        }
        let mut i = 0;
        while i < ids.len() {
            let first = ids[i];
            let mut last = first;
            while i + 1 < ids.len() && ids[i + 1] == last.wrapping_add(1) {
                i += 1;
                last = ids[i];
            }
            i += 1;
            out.frame(
                session.channel,
                &Performative::Disposition(Disposition {
                    role: Role::Receiver,
                    first,
                    last: (last != first).then_some(last),
                    settled,
                    state: Some(DeliveryState::Accepted),
                    batchable: false,
                }),
            );
        }
        ids.clear();
    }
}
