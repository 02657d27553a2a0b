//! The connection task: reads bytes and splits them into frames, feeds the
//! protocol [`State`], drains queue events, ticks the idle time-out and
//! heartbeats ([`Keepalive`]), and writes the [`Outbox`] after each
//! batch. It owns the socket and all of the connection's state; nothing
//! else touches them.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;
use tokio::time::Instant;

use super::connections::Registration;
use super::error::ConnectionError;
use super::handshake;
use super::keepalive::{Keepalive, TickAction};
use super::outbox::Outbox;
use super::sasl::SaslPeer;
use super::state::State;
use super::transport::{ByteStream, Transport};
use super::wake_gate::WakeGates;
use super::ConnectionContext;
use crate::codec::definitions::condition;
use crate::codec::frame::{decode_frame, MIN_MAX_FRAME_SIZE};
use crate::codec::{Close, CodecError, Error, FrameBody, Open, Performative, Symbol};
use crate::queue::{QueueEvent, Sink};

/// Queue events handled before output is flushed again.
const EVENT_BATCH_MAX: usize = 256;
/// The connection capability of anonymous relay (a sender with a null
/// target address; the address of each message is its `to`).
const ANONYMOUS_RELAY: &str = "ANONYMOUS-RELAY";
/// Free space kept in the read buffer before each read.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// How long we keep reading after sending `close`, so the peer gets our
/// close frame instead of a reset.
const CLOSE_LINGER: Duration = Duration::from_secs(2);

/// What ended a wait of the connection loop.
enum Woke {
    Stop(ConnectionError),
    Read(std::io::Result<usize>),
    Event(QueueEvent),
    Tick,
}

/// The sources the connection loop waits on, in order of priority: their
/// indices in its [`WakeGates`].
const STOP: usize = 0;
const READ: usize = 1;
const EVENTS: usize = 2;
const TICK: usize = 3;

pub(super) struct Connection {
    stream: Box<dyn ByteStream>,
    peer: SocketAddr,
    secure: bool,
    client_name: Option<String>,
    accepted_at: Instant,
    context: Arc<ConnectionContext>,
    admitted: bool,
    shutdown: watch::Receiver<bool>,
    buf: BytesMut,
    out: Outbox,
    sent_open: bool,
    /// Its place in the node's table of connections, until it ends.
    registration: Registration,
}

impl Connection {
    pub(super) fn new(
        transport: Transport,
        context: Arc<ConnectionContext>,
        admitted: bool,
        shutdown: watch::Receiver<bool>,
        registration: Registration,
    ) -> Connection {
        let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
        buf.extend_from_slice(&transport.prefix);
        Connection {
            stream: transport.stream,
            peer: transport.peer,
            secure: transport.secure,
            client_name: transport.client_name,
            accepted_at: transport.accepted_at,
            context,
            admitted,
            shutdown,
            buf,
            out: Outbox::default(),
            sent_open: false,
            registration,
        }
    }

    pub(super) async fn run(mut self) {
        let limits = &self.context.limits;
        let deadline = self.accepted_at + Duration::from_millis(limits.handshake_timeout_ms);
        let peer = SaslPeer {
            addr: self.peer,
            client_name: self.client_name.as_deref(),
            frame_max: limits.frame_max_before_open(),
        };
        let login = match tokio::time::timeout_at(
            deadline,
            handshake::run(
                &mut *self.stream,
                &mut self.buf,
                &mut self.out,
                &self.context.auth,
                &peer,
            ),
        )
        .await
        {
            Ok(Ok(login)) => login,
            Ok(Err(error)) => {
                tracing::debug!(peer = %self.peer, %error, "handshake failed");
                self.linger_close().await;
                return;
            }
            Err(_) => {
                tracing::debug!(peer = %self.peer, "handshake timed out");
                self.linger_close().await;
                return;
            }
        };
        let open = match tokio::time::timeout_at(deadline, self.read_open()).await {
            Ok(Ok(open)) => open,
            Ok(Err(error)) => return self.fail(error).await,
            Err(_) => {
                tracing::debug!(peer = %self.peer, "no open before the handshake time-out");
                return self
                    .fail(ConnectionError::protocol(
                        condition::RESOURCE_LIMIT_EXCEEDED,
                        "no open within the handshake time-out",
                    ))
                    .await;
            }
        };
        tracing::debug!(peer = %self.peer, user = login.user.as_deref(), tls = self.secure, container = %open.container_id, "connection open");
        self.registration
            .opened(login.user.as_deref(), &open.container_id);
        let result = self.serve_open(*open, login.permissions).await;
        match result {
            Err(ConnectionError::ClosedByPeer) => {
                self.out.frame(0, &Performative::Close(Close::default()));
                self.linger_close().await;
            }
            Err(error) => self.fail(error).await,
            Ok(()) => {}
        }
    }

    /// Read frames until the peer's `open`. Until it is in, frames are
    /// bounded by the small pre-open limit (transport 2.4.1 lets a peer
    /// assume only 512 bytes before the open exchange), so a peer that
    /// never opens cannot make us buffer a large frame.
    async fn read_open(&mut self) -> Result<Box<Open>, ConnectionError> {
        let max = self.context.limits.frame_max_before_open();
        loop {
            let decoded = decode_frame(&mut self.buf, max).map_err(|error| match error {
                CodecError::FrameTooLarge { size, max } => ConnectionError::protocol(
                    condition::FRAMING_ERROR,
                    format!("a frame of {size} bytes before open (at most {max} until open)"),
                ),
                other => other.into(),
            });
            match decoded? {
                Some(frame) => match frame.body {
                    FrameBody::Amqp {
                        performative: Performative::Open(open),
                        ..
                    } if frame.channel == 0 => return Ok(open),
                    FrameBody::Empty => continue,
                    _ => {
                        return Err(ConnectionError::illegal_state(
                            "the first frame must be open on channel 0",
                        ))
                    }
                },
                None => {
                    self.buf.reserve(READ_CHUNK_BYTES);
                    if self.stream.read_buf(&mut self.buf).await? == 0 {
                        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                    }
                }
            }
        }
    }

    fn our_open(&self) -> Open {
        let limits = &self.context.limits;
        Open {
            container_id: self.context.container_id.clone(),
            hostname: None,
            max_frame_size: limits.max_frame_size_bytes,
            channel_max: limits.channel_max,
            // Half the real threshold, as transport 2.4.5 advises, so a
            // peer that heartbeats at the announced period is never late.
            idle_time_out: (limits.idle_timeout_ms > 0)
                .then_some((limits.idle_timeout_ms / 2).max(1)),
            outgoing_locales: Vec::new(),
            incoming_locales: Vec::new(),
            // A sender with a null target address is routed by each
            // message's `to` (engine/relay.rs).
            offered_capabilities: vec![Symbol::from(ANONYMOUS_RELAY)],
            desired_capabilities: Vec::new(),
            properties: None,
        }
    }

    fn send_open(&mut self) {
        if !self.sent_open {
            let open = self.our_open();
            self.out.frame(0, &Performative::Open(Box::new(open)));
            self.sent_open = true;
        }
    }

    /// Serve an opened connection until it ends.
    async fn serve_open(
        &mut self,
        open: Open,
        permissions: crate::auth::Permissions,
    ) -> Result<(), ConnectionError> {
        self.send_open();
        if !self.admitted {
            return Err(ConnectionError::protocol(
                condition::RESOURCE_LIMIT_EXCEEDED,
                "too many connections",
            ));
        }
        if open.max_frame_size < MIN_MAX_FRAME_SIZE {
            return Err(ConnectionError::protocol(
                condition::FRAME_SIZE_TOO_SMALL,
                format!(
                    "max-frame-size {} is below the minimum {MIN_MAX_FRAME_SIZE}",
                    open.max_frame_size
                ),
            ));
        }
        let limits = self.context.limits.clone();
        let (sink, mut events) = Sink::channel();
        let mut state = State::new(
            self.context.clone(),
            sink,
            open.max_frame_size,
            limits.channel_max.min(open.channel_max),
            permissions,
            self.registration.sessions(),
        );
        let result = self
            .event_loop(&mut state, &mut events, &limits, open.idle_time_out)
            .await;
        state.release_all();
        result
    }

    async fn event_loop(
        &mut self,
        state: &mut State,
        events: &mut UnboundedReceiver<QueueEvent>,
        limits: &crate::config::Limits,
        remote_idle_ms: Option<u32>,
    ) -> Result<(), ConnectionError> {
        let mut keepalive = Keepalive::new(limits.idle_timeout_ms, remote_idle_ms);
        let mut ticker = keepalive.ticker();
        let max_frame = limits.max_frame_size_bytes;
        // Created once, not per pass of the loop: a fresh `changed()` or
        // `notified()` future each pass would register with (and on drop
        // unregister from) its notifier, a lock each way, on every wake.
        let close_requested = self.registration.close_requested();
        let mut shutdown = self.shutdown.clone();
        let stop = async move {
            tokio::select! {
                biased;
                _ = shutdown.changed() => ConnectionError::Shutdown,
                () = close_requested.notified() => ConnectionError::ClosedByOperator,
            }
        };
        tokio::pin!(stop);
        let gates = WakeGates::<4>::new();
        loop {
            // Frames may already be buffered: pipelined behind `open`, or
            // several in one read.
            while let Some(frame) = decode_frame(&mut self.buf, max_frame)? {
                match frame.body {
                    FrameBody::Amqp {
                        performative,
                        payload,
                    } => {
                        tracing::trace!(peer = %self.peer, channel = frame.channel, ?performative, "received");
                        if let Performative::Attach(attach) = &performative {
                            // A refused attach must not create its queue.
                            if state.authorize_attach(attach).is_ok() {
                                let prepare = prepare_queue(self.context.clone(), attach);
                                self.heartbeating(prepare, &mut keepalive, &mut ticker, &gates)
                                    .await?;
                            }
                        }
                        state.on_frame(frame.channel, performative, payload, &mut self.out)?;
                        if let Some(wait) = &state.relay_wait {
                            // A relayed message to an address not resolved
                            // yet on its link: prepare it as an attach would.
                            // Not for a user who may not publish there.
                            if state.authorize_relay(&wait.address).is_ok() {
                                let prepare = prepare_address(
                                    self.context.clone(),
                                    Some(wait.address.clone()),
                                );
                                self.heartbeating(prepare, &mut keepalive, &mut ticker, &gates)
                                    .await?;
                            }
                            state.resume_relay(&mut self.out);
                        }
                    }
                    FrameBody::Empty => {}
                    FrameBody::Sasl(_) => {
                        return Err(ConnectionError::illegal_state(
                            "SASL frame after the SASL layer",
                        ));
                    }
                }
            }
            state.finish_batch(&mut self.out);
            if !self.out.is_empty() {
                self.out.flush(&mut *self.stream).await?;
                keepalive.wrote();
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK_BYTES / 4 {
                self.buf.reserve(READ_CHUNK_BYTES);
            }
            match self
                .wait(
                    &gates,
                    stop.as_mut(),
                    events,
                    &mut ticker,
                    keepalive.ticking(),
                )
                .await
            {
                Woke::Stop(error) => return Err(error),
                Woke::Read(read) => {
                    if read? == 0 {
                        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                    }
                    keepalive.read();
                }
                Woke::Event(event) => {
                    state.on_queue_event(event, &mut self.out)?;
                    for _ in 1..EVENT_BATCH_MAX {
                        match events.try_recv() {
                            Ok(event) => state.on_queue_event(event, &mut self.out)?,
                            Err(_) => break,
                        }
                    }
                }
                Woke::Tick => match keepalive.on_tick() {
                    TickAction::Nothing => {}
                    TickAction::Heartbeat => self.out.heartbeat(),
                    TickAction::IdleTimeOut(idle) => {
                        return Err(ConnectionError::protocol(
                            condition::RESOURCE_LIMIT_EXCEEDED,
                            format!(
                                "idle time-out: nothing received for {} ms",
                                idle.as_millis()
                            ),
                        ));
                    }
                },
            }
        }
    }

    /// Wait for the first of: a stop signal, bytes from the peer, a queue
    /// event, a tick (if `ticking`); in that order of priority when
    /// several are ready. Each source is polled only when it woke
    /// (`wake_gate.rs`), so a pass for one message does not poll the rest.
    async fn wait(
        &mut self,
        gates: &WakeGates<4>,
        mut stop: std::pin::Pin<&mut impl Future<Output = ConnectionError>>,
        events: &mut UnboundedReceiver<QueueEvent>,
        ticker: &mut tokio::time::Interval,
        ticking: bool,
    ) -> Woke {
        let stream = &mut *self.stream;
        let buf = &mut self.buf;
        std::future::poll_fn(|cx| {
            let mut pass = gates.begin(cx);
            let woke = 'woke: {
                if let Poll::Ready(error) = gates.poll(&mut pass, STOP, |cx| stop.as_mut().poll(cx))
                {
                    break 'woke Some(Woke::Stop(error));
                }
                let read = gates.poll(&mut pass, READ, |cx| {
                    std::pin::pin!(stream.read_buf(buf)).poll(cx)
                });
                if let Poll::Ready(read) = read {
                    break 'woke Some(Woke::Read(read));
                }
                // The channel cannot close while the loop runs: `State`
                // holds its sender.
                let event = gates.poll(&mut pass, EVENTS, |cx| events.poll_recv(cx));
                if let Poll::Ready(Some(event)) = event {
                    break 'woke Some(Woke::Event(event));
                }
                if ticking
                    && gates
                        .poll(&mut pass, TICK, |cx| ticker.poll_tick(cx))
                        .is_ready()
                {
                    break 'woke Some(Woke::Tick);
                }
                None
            };
            gates.end(pass);
            woke.map_or(Poll::Pending, Poll::Ready)
        })
        .await
    }

    /// Wait for `fut` (a queue being prepared, which may wait for an
    /// election) while the peer's idle time-out stays satisfied: frames
    /// are not read meanwhile (their order matters), but heartbeats go
    /// out, so a client with an idle time-out shorter than a fail-over
    /// does not drop a connection that is only waiting for a leader.
    async fn heartbeating<T>(
        &mut self,
        fut: impl std::future::Future<Output = T>,
        keepalive: &mut Keepalive,
        ticker: &mut tokio::time::Interval,
        gates: &WakeGates<4>,
    ) -> Result<T, ConnectionError> {
        tokio::pin!(fut);
        if !keepalive.ticking() {
            return Ok(fut.await);
        }
        // The ticker is polled here with this task's own waker, which its
        // gate in the loop would not see fire.
        gates.poll_next_pass(TICK);
        loop {
            tokio::select! {
                output = &mut fut => return Ok(output),
                _ = ticker.tick() => {
                    if keepalive.on_tick_not_reading() == TickAction::Heartbeat {
                        self.out.heartbeat();
                        self.out.flush(&mut *self.stream).await?;
                        keepalive.wrote();
                    }
                }
            }
        }
    }

    /// End the connection because of `error`: tell the peer why if the
    /// protocol allows it.
    async fn fail(&mut self, error: ConnectionError) {
        let amqp_error = match &error {
            ConnectionError::Protocol(e) => Some(e.clone()),
            ConnectionError::Shutdown => Some(Error::new(
                condition::CONNECTION_FORCED,
                "the broker is shutting down",
            )),
            ConnectionError::ClosedByOperator => Some(Error::new(
                condition::CONNECTION_FORCED,
                format!(
                    "closed by an operator (connection {})",
                    self.registration.id()
                ),
            )),
            ConnectionError::Io(_) | ConnectionError::ClosedByPeer => None,
        };
        match amqp_error {
            Some(amqp_error) => {
                tracing::debug!(peer = %self.peer, %error, "closing connection");
                // An AMQP close is only valid after our open.
                self.send_open();
                self.out.frame(
                    0,
                    &Performative::Close(Close {
                        error: Some(amqp_error),
                    }),
                );
                self.linger_close().await;
            }
            None => tracing::debug!(peer = %self.peer, %error, "connection ended"),
        }
    }

    /// Write what is pending, half-close, and read until the peer closes
    /// too (bounded), so our last frames are not lost to a reset.
    async fn linger_close(&mut self) {
        let stream = &mut *self.stream;
        let out = &mut self.out;
        let _ = tokio::time::timeout(CLOSE_LINGER, async {
            if out.flush(stream).await.is_err() {
                return;
            }
            let _ = stream.shutdown().await;
            let mut sink = [0u8; 4096];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        })
        .await;
    }
}

/// Make the queue an attach names ready for lookup (a quorum queue's group
/// is opened or created here, which may wait for an election). Failures
/// are reported by the attach itself.
fn prepare_queue(
    context: Arc<ConnectionContext>,
    attach: &crate::codec::Attach,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let address = match attach.role {
        crate::codec::Role::Sender => attach.target.as_ref().and_then(|t| t.address.as_deref()),
        crate::codec::Role::Receiver => attach.source.as_ref().and_then(|s| s.address.as_deref()),
    };
    prepare_address(
        context,
        address.and_then(|a| crate::queue::QueueAddress::parse(a).ok()),
    )
}

/// Prepare `address` (an attach's, or a relayed message's). Owns what it
/// needs, so the connection can send heartbeats while it waits.
async fn prepare_address(
    context: Arc<ConnectionContext>,
    address: Option<crate::queue::QueueAddress>,
) {
    if let Some(address) = address {
        if let Err(error) = context.queues.prepare(&address).await {
            tracing::debug!(%address, %error, "queue not ready");
        }
    }
}
