//! The publish path: transfer frames from a publisher link are gathered
//! into a message, handed to the queue, answered with (ranged) `accepted`
//! dispositions, and the link's credit is topped up while the queue has
//! room.

use bytes::Bytes;

use super::error::ConnectionError;
use super::link::{Destination, Link, PartialDelivery, PublisherLink};
use super::outbox::Outbox;
use super::relay::{self, RelayWait, Relayed};
use super::session::Session;
use super::state::{LinkRef, State};
use crate::codec::definitions::condition;
use crate::codec::CodecError;
use crate::codec::{
    DeliveryState, Disposition, Error, Flow, MessageView, Performative, ReceiverSettleMode, Role,
    Transfer,
};
use crate::queue::{Message, Outcome, PublishConfirm, PublishStatus};

impl State {
    /// One transfer frame from the peer, along the publish path: session
    /// window, link and credit, gathering the delivery's frames, then for a
    /// complete message: scan, hand to the queue, top up credit, answer.
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
        take_incoming_window(session, channel, out)?;
        let handle = transfer.handle;
        let session_flow = session.flow();
        let Some(link) = publisher_link(session, handle)? else {
            return Ok(());
        };
        let partial = match gather(link, &transfer, payload)? {
            Gathered::Incomplete => return Ok(()),
            Gathered::TooLarge(error) => {
                self.detach_link(channel, handle, error, out);
                return Ok(());
            }
            Gathered::Complete(partial) => partial,
        };
        if partial.txn_id.is_some() || matches!(link.destination, Destination::Coordinator) {
            top_up_credit(link, handle, session_flow, &self.sink, out, channel);
            let posted = Posted {
                channel,
                handle,
                tag: link.tag,
                queue: match &link.destination {
                    Destination::Queue(queue) => Some(queue.clone()),
                    _ => None,
                },
                coordinator: matches!(link.destination, Destination::Coordinator),
                relay: matches!(link.destination, Destination::Relay(_)),
            };
            self.on_transactional(posted, partial, out);
            return Ok(());
        }
        let mode = link.rcv_settle_mode;
        let answer = match publish(link, partial, &self.sink) {
            Some(Answer::Prepare(wait)) => {
                // Resumed by the connection task once the address is
                // prepared (relay.rs), before the next frame is read.
                self.relay_wait = Some(RelayWait {
                    channel,
                    handle,
                    ..*wait
                });
                return Ok(());
            }
            answer => answer,
        };
        top_up_credit(link, handle, session_flow, &self.sink, out, channel);
        if let Some(error) = answer_publisher(session, channel, mode, answer, out) {
            self.detach_link(channel, handle, error, out);
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
            Some(Link::Publisher(l)) if matches!(l.destination, Destination::Coordinator) => {
                let tag = l.tag;
                return self.commit_part_done(tag, link.channel, delivery_id, outcome, out);
            }
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

/// Count one incoming frame against the session's incoming-window, and
/// re-open the window (a session flow) once it is half used.
fn take_incoming_window(
    session: &mut Session,
    channel: u16,
    out: &mut Outbox,
) -> Result<(), ConnectionError> {
    if !session.take_incoming_frame() {
        return Err(ConnectionError::protocol(
            condition::WINDOW_VIOLATION,
            "transfer beyond the session's incoming-window",
        ));
    }
    if session.replenish_incoming_window() {
        out.frame(channel, &Performative::Flow(session.flow()));
    }
    Ok(())
}

/// The publisher link a transfer is on; `None` for a link we are
/// detaching (the frame was in flight before the peer saw our detach).
fn publisher_link(
    session: &mut Session,
    handle: u32,
) -> Result<Option<&mut PublisherLink>, ConnectionError> {
    match session.links.get_mut(&handle) {
        Some(Link::Publisher(link)) => Ok(Some(link)),
        None if session.detaching.contains(&handle) => Ok(None),
        Some(Link::Consumer(_)) => Err(ConnectionError::protocol(
            condition::NOT_ALLOWED,
            format!("transfer on handle {handle}, where the peer is the receiver"),
        )),
        None => Err(ConnectionError::protocol(
            condition::UNATTACHED_HANDLE,
            format!("transfer on handle {handle}, which is not attached"),
        )),
    }
}

/// Where a transfer frame leaves the delivery it belongs to.
enum Gathered {
    /// More frames to come, or the delivery was aborted (and forgotten).
    Incomplete,
    /// The delivery outgrew the link's max-message-size: detach the link.
    TooLarge(Error),
    /// The last frame arrived: the whole delivery.
    Complete(PartialDelivery),
}

/// Add a transfer frame to the link's delivery in progress, starting one
/// (and spending a credit) on its first frame.
fn gather(
    link: &mut PublisherLink,
    transfer: &Transfer,
    payload: Bytes,
) -> Result<Gathered, ConnectionError> {
    if link.partial.is_none() {
        start_delivery(link, transfer)?;
    }
    let Some(partial) = link.partial.as_mut() else {
        return Ok(Gathered::Incomplete);
    };
    partial.settled |= transfer.settled.unwrap_or(false);
    if let Some(DeliveryState::Transactional { txn_id, .. }) = transfer.state.as_deref() {
        partial.txn_id = Some(txn_id.clone());
    }
    if transfer.aborted {
        // An aborted delivery is forgotten; it used its credit.
        link.partial = None;
        return Ok(Gathered::Incomplete);
    }
    partial.len += payload.len();
    if partial.len as u64 > link.max_message_size {
        return Ok(Gathered::TooLarge(Error::new(
            condition::MESSAGE_SIZE_EXCEEDED,
            format!("message exceeds max-message-size {}", link.max_message_size),
        )));
    }
    if !payload.is_empty() {
        partial.push(payload);
    }
    if transfer.more {
        return Ok(Gathered::Incomplete);
    }
    Ok(link
        .partial
        .take()
        .map_or(Gathered::Incomplete, Gathered::Complete))
}

/// The first frame of a delivery: it needs link credit and a delivery-id;
/// it spends one credit and advances the delivery-count.
fn start_delivery(link: &mut PublisherLink, transfer: &Transfer) -> Result<(), ConnectionError> {
    if link.credit == 0 {
        return Err(ConnectionError::protocol(
            condition::TRANSFER_LIMIT_EXCEEDED,
            format!("transfer on handle {} without link credit", transfer.handle),
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
    link.partial = Some(PartialDelivery::new(delivery_id));
    Ok(())
}

/// A complete delivery on a coordinator link, or posted in a transaction.
pub(super) struct Posted {
    pub(super) channel: u16,
    pub(super) handle: u32,
    pub(super) tag: u64,
    /// The link's queue (none for the relay or the coordinator).
    pub(super) queue: Option<std::sync::Arc<dyn crate::queue::Queue>>,
    pub(super) coordinator: bool,
    /// An anonymous-relay link: the message's `to` names its queue.
    pub(super) relay: bool,
}

/// What to tell the publisher about one delivery right away.
pub(super) enum Answer {
    Accepted(u32),
    Rejected(u32, DeliveryState),
    /// Detach the link; release the delivery if it was unsettled.
    Detach(Option<u32>, Error),
    /// A relayed message whose address must be prepared first (its
    /// channel and handle are filled in by the caller).
    Prepare(Box<RelayWait>),
}

/// Scan a complete message and hand it to the queue; the answer the
/// publisher gets now (`None`: nothing now, or a pending quorum outcome).
fn publish(
    link: &mut PublisherLink,
    partial: PartialDelivery,
    sink: &crate::queue::Sink,
) -> Option<Answer> {
    let delivery_id = partial.delivery_id;
    let settled = partial.settled;
    match scan(partial.into_bytes()) {
        Ok(message) => match &mut link.destination {
            Destination::Queue(_) => hand_to_queue(link, message, delivery_id, settled, sink),
            // Taken by `on_transactional` before publishing.
            Destination::Coordinator => None,
            Destination::Relay(relay) => {
                let confirm = (!settled).then(|| PublishConfirm {
                    sink: sink.clone(),
                    tag: link.tag,
                    token: u64::from(delivery_id),
                });
                relay_answer(
                    relay::relay(relay, link.tag, message, confirm, sink),
                    delivery_id,
                    settled,
                )
            }
        },
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
    }
}

/// Check the message's sections and keep its header for the queue.
pub(super) fn scan(bytes: Bytes) -> Result<Message, CodecError> {
    let view = MessageView::scan(&bytes)?;
    Ok(Message {
        bytes,
        header: view.header,
        header_len: view.header_len as u32,
    })
}

/// Publish to the queue, asking for a confirmation (the outcome) only for
/// an unsettled delivery.
fn hand_to_queue(
    link: &mut PublisherLink,
    message: Message,
    delivery_id: u32,
    settled: bool,
    sink: &crate::queue::Sink,
) -> Option<Answer> {
    let confirm = (!settled).then(|| PublishConfirm {
        sink: sink.clone(),
        tag: link.tag,
        token: u64::from(delivery_id),
    });
    let Destination::Queue(queue) = &link.destination else {
        return None;
    };
    match queue.publish(message, confirm) {
        Ok(PublishStatus::Accepted) if !settled => Some(Answer::Accepted(delivery_id)),
        Ok(_) => None,
        Err(e) => Some(Answer::Detach(
            (!settled).then_some(delivery_id),
            super::attach::queue_error(&e),
        )),
    }
}

/// The answer for a relayed message: accepted now, later, or rejected on
/// its own (the link goes on).
pub(super) fn relay_answer(relayed: Relayed, delivery_id: u32, settled: bool) -> Option<Answer> {
    match relayed {
        Relayed::Published(true) if !settled => Some(Answer::Accepted(delivery_id)),
        Relayed::Published(_) => None,
        Relayed::Refused(error) if !settled => {
            Some(Answer::Rejected(delivery_id, relay::rejected(error)))
        }
        Relayed::Refused(error) => {
            tracing::debug!(error = ?error.description, "pre-settled relayed message dropped");
            None
        }
        Relayed::Prepare(address, message) => Some(Answer::Prepare(Box::new(RelayWait {
            channel: 0,
            handle: 0,
            address,
            message,
            delivery_id,
            settled,
            txn_id: None,
        }))),
    }
}

/// Grant the publisher its window again once half its credit is used,
/// unless we already wait for the queue to report room.
pub(super) fn top_up_credit(
    link: &mut PublisherLink,
    handle: u32,
    session_flow: Flow,
    sink: &crate::queue::Sink,
    out: &mut Outbox,
    channel: u16,
) {
    if link.credit <= link.credit_window / 2 && !link.waiting_capacity {
        grant_credit(link, handle, session_flow, sink, out, channel);
    }
}

/// Tell the publisher the answer: an `accepted` joins the next ranged
/// disposition, a rejection goes out now. Returns the error to detach the
/// link with when the queue cannot take messages here (e.g. its leader
/// moved): the delivery is released, so the publisher sends again where
/// the queue is served.
pub(super) fn answer_publisher(
    session: &mut Session,
    channel: u16,
    mode: ReceiverSettleMode,
    answer: Option<Answer>,
    out: &mut Outbox,
) -> Option<Error> {
    match answer? {
        Answer::Accepted(id) => record_outcome(session, mode, id, Outcome::Accepted, out),
        Answer::Rejected(id, state) => reject(channel, id, state, out),
        Answer::Detach(id, error) => {
            if let Some(id) = id {
                reject(channel, id, DeliveryState::Released, out);
            }
            return Some(error);
        }
        // Taken care of by the caller before answering.
        Answer::Prepare(_) => {}
    }
    None
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
        // A queue refuses a publish only when it is full (its policy's
        // max_length or max_length_bytes with overflow reject-publish).
        (Outcome::Rejected, _) => reject(
            session.channel,
            delivery_id,
            DeliveryState::Rejected {
                error: Some(Error::new(
                    condition::RESOURCE_LIMIT_EXCEEDED,
                    "the queue is full: its policy's max_length or max_length_bytes, \
                     overflow reject-publish",
                )),
            },
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
    if !link.has_capacity(sink) {
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
