//! The protocol state of one open connection, without any IO: sessions by
//! channel, the map from queue-event tags to links, and the dispatch of
//! incoming frames and queue events. The connection task (connection.rs)
//! owns one `State` and feeds it; handlers write their answers into the
//! [`Outbox`].

// Keyed by channels, handles and tags, looked up for every frame and
// queue event: a fast hasher (no flooding resistance needed for these
// small keys, bounded by channel-max and handle-max).
use foldhash::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use super::error::ConnectionError;
use super::outbox::Outbox;
use super::session::Session;
use super::ConnectionContext;
use crate::codec::definitions::condition;
use crate::codec::{Begin, End, Error, Performative};
use crate::queue::{QueueEvent, QueueEventKind, Sink};

/// Where a queue-event tag leads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkRef {
    pub(crate) channel: u16,
    pub(crate) handle: u32,
}

/// Protocol state of an open connection.
pub(crate) struct State {
    pub(crate) context: Arc<ConnectionContext>,
    pub(crate) sink: Sink,
    pub(crate) sessions: HashMap<u16, Session>,
    pub(crate) tags: HashMap<u64, LinkRef>,
    pub(crate) next_tag: u64,
    /// Largest frame the peer accepts.
    pub(crate) remote_max_frame_size: usize,
    /// Highest channel the peer may use (the smaller of both sides').
    pub(crate) channel_max: u16,
    /// Channels whose session we ended with a session error; the peer's
    /// frames there are dropped until its `end` arrives.
    pub(crate) ending: HashSet<u16>,
    /// A relayed message whose address the connection task must prepare
    /// before the next frame (`relay.rs`).
    pub(crate) relay_wait: Option<super::relay::RelayWait>,
    /// What the logged-in user may do (see `authorize.rs`).
    pub(crate) permissions: crate::auth::Permissions,
    /// Local transactions declared on this connection (`transaction.rs`).
    pub(crate) transactions: super::transaction::Transactions,
    /// This connection's count of open sessions, as the operator sees it
    /// (`connections.rs`); kept by each session's guard.
    pub(crate) open_sessions: Arc<std::sync::atomic::AtomicU64>,
}

impl State {
    pub(crate) fn new(
        context: Arc<ConnectionContext>,
        sink: Sink,
        remote_max_frame_size: u32,
        channel_max: u16,
        permissions: crate::auth::Permissions,
        open_sessions: Arc<std::sync::atomic::AtomicU64>,
    ) -> State {
        State {
            context,
            sink,
            sessions: HashMap::default(),
            tags: HashMap::default(),
            next_tag: 0,
            remote_max_frame_size: remote_max_frame_size as usize,
            channel_max,
            ending: HashSet::default(),
            relay_wait: None,
            permissions,
            transactions: Default::default(),
            open_sessions,
        }
    }

    pub(crate) fn allocate_tag(&mut self, channel: u16, handle: u32) -> u64 {
        // Tags stay below 2^32 so a publish token can pack tag and delivery-id.
        let tag = self.next_tag;
        self.next_tag = (self.next_tag + 1) & u64::from(u32::MAX);
        self.tags.insert(tag, LinkRef { channel, handle });
        tag
    }

    /// Handle one performative from the peer.
    pub(crate) fn on_frame(
        &mut self,
        channel: u16,
        performative: Performative,
        payload: Bytes,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        match performative {
            Performative::Begin(begin) => self.on_begin(channel, *begin, out),
            Performative::Open(_) => Err(ConnectionError::illegal_state(
                "open received on an open connection",
            )),
            Performative::Close(_) => Err(ConnectionError::ClosedByPeer),
            other => {
                if self.ending.contains(&channel) {
                    // Sent before the peer saw our `end`.
                    if matches!(other, Performative::End(_)) {
                        self.ending.remove(&channel);
                    }
                    return Ok(());
                }
                if !self.sessions.contains_key(&channel) {
                    return Err(ConnectionError::illegal_state(format!(
                        "frame on channel {channel}, where no session was begun"
                    )));
                }
                let result = match other {
                    Performative::Attach(attach) => self.on_attach(channel, *attach, out),
                    Performative::Flow(flow) => self.on_flow(channel, flow, out),
                    Performative::Transfer(transfer) => {
                        self.on_transfer(channel, transfer, payload, out)
                    }
                    Performative::Disposition(disposition) => {
                        self.on_disposition(channel, disposition, out)
                    }
                    Performative::Detach(detach) => self.on_detach(channel, detach, out),
                    Performative::End(end) => self.on_end(channel, end, out),
                    Performative::Begin(_) | Performative::Open(_) | Performative::Close(_) => {
                        Ok(())
                    }
                };
                match result {
                    // A session error ends that session only; the
                    // connection and its other sessions go on.
                    Err(ConnectionError::Protocol(error)) if is_session_error(&error) => {
                        self.end_with_error(channel, error, out);
                        Ok(())
                    }
                    other => other,
                }
            }
        }
    }

    /// End the session on `channel` from our side with `error`: release
    /// what it held, send `end`, and drop its frames until the peer's
    /// `end`.
    fn end_with_error(&mut self, channel: u16, error: Error, out: &mut Outbox) {
        tracing::debug!(channel, condition = error.condition.as_str(), description = ?error.description, "ending session");
        if let Some(session) = self.sessions.remove(&channel) {
            self.release_session(session);
        }
        out.frame(channel, &Performative::End(End { error: Some(error) }));
        self.ending.insert(channel);
    }

    fn on_begin(
        &mut self,
        channel: u16,
        begin: Begin,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        if begin.remote_channel.is_some() {
            return Err(ConnectionError::illegal_state(
                "begin with remote-channel: this broker never begins sessions itself",
            ));
        }
        if channel > self.channel_max {
            return Err(ConnectionError::protocol(
                condition::FRAMING_ERROR,
                format!("channel {channel} exceeds channel-max {}", self.channel_max),
            ));
        }
        if self.sessions.contains_key(&channel) || self.ending.contains(&channel) {
            return Err(ConnectionError::illegal_state(format!(
                "channel {channel} already has a session"
            )));
        }
        let limits = &self.context.limits;
        let handle_max = limits.handle_max.min(begin.handle_max);
        let mut session = Session::new(
            channel,
            handle_max,
            limits.session_window,
            begin.incoming_window,
        );
        session.next_incoming_id = begin.next_outgoing_id;
        session.counted = Some(self.context.counters.session(&self.open_sessions));
        let reply = Begin {
            remote_channel: Some(channel),
            next_outgoing_id: session.next_outgoing_id,
            incoming_window: session.incoming_window,
            outgoing_window: u32::MAX,
            handle_max,
            offered_capabilities: Vec::new(),
            desired_capabilities: Vec::new(),
            properties: None,
        };
        out.frame(channel, &Performative::Begin(Box::new(reply)));
        self.sessions.insert(channel, session);
        Ok(())
    }

    fn on_end(&mut self, channel: u16, _end: End, out: &mut Outbox) -> Result<(), ConnectionError> {
        if let Some(session) = self.sessions.remove(&channel) {
            self.release_session(session);
        }
        out.frame(channel, &Performative::End(End::default()));
        Ok(())
    }

    /// Give back everything a session held: consumers leave their queues
    /// (which makes their unsettled messages available again).
    fn release_session(&mut self, mut session: Session) {
        for (_, link) in session.links.drain() {
            self.release_link(link);
        }
    }

    /// Tear down every session; the connection is going away.
    pub(crate) fn release_all(&mut self) {
        // A transaction dies with its connection: rolled back.
        self.transactions.roll_back_all(None);
        let sessions: Vec<Session> = self.sessions.drain().map(|(_, s)| s).collect();
        for session in sessions {
            self.release_session(session);
        }
    }

    /// Handle one event from a queue.
    pub(crate) fn on_queue_event(
        &mut self,
        event: QueueEvent,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        let Some(link) = self.tags.get(&event.tag).copied() else {
            // The link is gone; its deliveries were returned when it left.
            return Ok(());
        };
        match event.kind {
            QueueEventKind::Deliver(delivery) => self.deliver(link, delivery, out),
            QueueEventKind::Drained { credit_limit } => self.drained(link, credit_limit, out),
            QueueEventKind::Published { token, outcome } => {
                self.published(link, token as u32, outcome, out)
            }
            QueueEventKind::Capacity => self.capacity(link, out),
            QueueEventKind::Registered { .. } => {}
            QueueEventKind::Closed {
                condition,
                description,
            } => self.detach_link(
                link.channel,
                link.handle,
                Error::new(condition, description),
                out,
            ),
        }
        Ok(())
    }

    /// Write what handlers collected (ranged dispositions) and push out
    /// transfers the windows allow. Called before each flush.
    pub(crate) fn finish_batch(&mut self, out: &mut Outbox) {
        let max_frame = self.remote_max_frame_size;
        for session in self.sessions.values_mut() {
            super::transfer::write_dispositions(session, out);
            session.pump(out, max_frame);
        }
    }
}

/// Whether `error` is a session error (`amqp:session:*`: window-violation,
/// errant-link, handle-in-use, unattached-handle), which ends the session
/// rather than the connection.
fn is_session_error(error: &Error) -> bool {
    error.condition.as_str().starts_with("amqp:session:")
}
