//! One outbound link: the dialled HTTP/2 connection to one peer, its single
//! long-lived `Exchange` stream, the bounded queue feeding it, and the
//! correlation of calls with answers. A background task keeps the link up,
//! redialling with capped exponential backoff.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::time::{timeout, timeout_at, Instant};
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataValue;
use tonic::transport::Endpoint;

use crate::config::LinkSettings;
use crate::proto::fabric_client::FabricClient;
use crate::proto::{
    wire_version_value, Batch, Frame, Op, CLUSTER_KEY, NODE_ID_KEY, WIRE_VERSION_KEY,
};
use crate::stats::Counters;
use crate::{lock, CallError, Envelope, NodeId};

/// The state of an outbound link, as seen from the dialling side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected yet, or reconnecting after a failure (the text says why).
    Down(String),
    /// The stream is open: calls and sends go through.
    Connected,
    /// The peer refused the stream (e.g. wrong cluster name); the link keeps
    /// retrying with backoff.
    Refused(String),
    /// The link was stopped (peer removed or fabric shut down).
    Stopped,
}

type Pending = HashMap<u64, oneshot::Sender<Result<Bytes, CallError>>>;

/// The open stream's queue sender and its generation.
struct Live {
    tx: mpsc::Sender<Frame>,
    epoch: u64,
    cancel: CancellationToken,
}

/// An outbound link to one peer.
pub(crate) struct Peer {
    id: NodeId,
    addr: SocketAddr,
    settings: Arc<LinkSettings>,
    counters: Arc<Counters>,
    /// Shared with the inbound side: set while the peer is partitioned off.
    blocked: Arc<AtomicBool>,
    live: Mutex<Option<Live>>,
    /// Bumped whenever a stream closes; a call registered against an older
    /// epoch fails instead of waiting for an answer that cannot come.
    epoch: AtomicU64,
    pending: Mutex<Pending>,
    next_id: AtomicU64,
    /// Wakes the reconnect loop early (unblocked).
    wake: Notify,
    /// Stops this link for good.
    stop: CancellationToken,
    state: watch::Sender<LinkState>,
    /// When the last dial found nothing listening at the peer's address
    /// (the connection was refused); `None` once a dial did anything else.
    refused_at: Mutex<Option<Instant>>,
}

impl Peer {
    /// A link to `id` at `addr`; nothing happens until [`Peer::run`] is spawned.
    pub(crate) fn new(
        id: NodeId,
        addr: SocketAddr,
        settings: Arc<LinkSettings>,
        counters: Arc<Counters>,
        blocked: Arc<AtomicBool>,
        stop: CancellationToken,
    ) -> Arc<Peer> {
        Arc::new(Peer {
            id,
            addr,
            settings,
            counters,
            blocked,
            live: Mutex::new(None),
            epoch: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            wake: Notify::new(),
            stop,
            state: watch::Sender::new(LinkState::Down("not connected yet".into())),
            refused_at: Mutex::new(None),
        })
    }

    /// When the last dial was refused, if no stream is open and it was:
    /// nothing listens at the peer's address. On a host that answers, that
    /// is a process that is not running (or not yet listening), not a slow
    /// or cut-off one, which time out instead.
    pub(crate) fn not_listening_since(&self) -> Option<Instant> {
        if lock(&self.live).is_some() {
            return None;
        }
        *lock(&self.refused_at)
    }

    /// The peer's address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The current link state.
    pub(crate) fn state(&self) -> LinkState {
        self.state.borrow().clone()
    }

    /// A receiver of link state changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<LinkState> {
        self.state.subscribe()
    }

    /// Refuses an envelope over the size limit.
    pub(crate) fn check_size(max: usize, envelope: &Envelope) -> Result<(), CallError> {
        let size = envelope.size();
        if size > max {
            return Err(CallError::TooLarge { size, max });
        }
        Ok(())
    }

    /// The open stream's sender, or `Unreachable`.
    fn sender(&self) -> Result<(mpsc::Sender<Frame>, u64), CallError> {
        if self.stop.is_cancelled() {
            return Err(CallError::Closed);
        }
        if self.blocked.load(Ordering::Acquire) {
            return Err(CallError::Unreachable(self.id));
        }
        match &*lock(&self.live) {
            Some(live) => Ok((live.tx.clone(), live.epoch)),
            None => Err(CallError::Unreachable(self.id)),
        }
    }

    /// Queues a one-way message without waiting.
    pub(crate) fn send(&self, envelope: Envelope) -> Result<(), CallError> {
        Self::check_size(self.settings.max_message_bytes, &envelope)?;
        let (tx, _) = self.sender()?;
        tx.try_send(Frame::from_envelope(Op::Message, 0, envelope))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => CallError::Backpressure,
                mpsc::error::TrySendError::Closed(_) => CallError::Unreachable(self.id),
            })
    }

    /// Sends a call and returns the wait for its answer (bounded by the
    /// call timeout); a failure is counted. The frame is queued here, before
    /// the future is first polled, so calls made one after the other leave
    /// in that order (unless the queue is full: a call that finds it full
    /// waits for room in its future and may be overtaken).
    pub(crate) fn call(
        self: Arc<Self>,
        envelope: Envelope,
    ) -> impl std::future::Future<Output = Result<Bytes, CallError>> + Send + 'static {
        let counters = self.counters.clone();
        let started = self.start_call(envelope);
        async move {
            let result = match started {
                Ok(started) => started.finish().await,
                Err(e) => Err(e),
            };
            if result.is_err() {
                Counters::add(&counters.calls_failed, 1);
            }
            result
        }
    }

    /// Registers the call and queues its frame if the queue has room.
    fn start_call(self: Arc<Self>, envelope: Envelope) -> Result<StartedCall, CallError> {
        Self::check_size(self.settings.max_message_bytes, &envelope)?;
        let deadline = Instant::now() + self.settings.call_timeout;
        let (tx, epoch) = self.sender()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer_tx, answer_rx) = oneshot::channel();
        lock(&self.pending).insert(id, answer_tx);
        // Removes the pending entry however the call ends (timeout, drop).
        let guard = PendingGuard {
            peer: self.clone(),
            id,
        };
        if self.epoch.load(Ordering::Acquire) != epoch {
            return Err(CallError::Unreachable(self.id));
        }
        let waiting = match tx.try_send(Frame::from_envelope(Op::Call, id, envelope)) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(frame)) => Some((tx, frame)),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Err(CallError::Unreachable(self.id))
            }
        };
        Ok(StartedCall {
            _guard: guard,
            peer: self.id,
            deadline,
            waiting,
            answer_rx,
        })
    }

    /// Closes the current stream (if any); the loop redials unless blocked or
    /// stopped.
    pub(crate) fn drop_stream(&self) {
        if let Some(live) = &*lock(&self.live) {
            live.cancel.cancel();
        }
    }

    /// Wakes the reconnect loop now (e.g. after unblocking).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Stops the link for good and fails everything outstanding.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
        self.drop_stream();
    }

    /// The reconnect loop; runs until the link is stopped.
    pub(crate) async fn run(self: Arc<Self>) {
        let mut backoff = self.settings.reconnect_min;
        loop {
            if self.stop.is_cancelled() {
                break;
            }
            if self.blocked.load(Ordering::Acquire) {
                *lock(&self.refused_at) = None;
                self.state.send_replace(LinkState::Down("blocked".into()));
                tokio::select! {
                    () = self.stop.cancelled() => break,
                    () = self.wake.notified() => continue,
                }
            }
            match self.open().await {
                Ok(stream) => {
                    backoff = self.settings.reconnect_min;
                    self.serve(stream).await;
                }
                Err(state) => {
                    tracing::debug!(peer = self.id, ?state, "fabric dial failed");
                    self.state.send_replace(state);
                }
            }
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(self.settings.reconnect_max);
        }
        self.close_stream("stopped".into());
        self.state.send_replace(LinkState::Stopped);
    }

    /// Dials the peer and opens the stream; installs its queue on success.
    async fn open(&self) -> Result<tonic::Streaming<Batch>, LinkState> {
        let s = &self.settings;
        let down = |e: &dyn std::fmt::Display| LinkState::Down(e.to_string());
        let scheme = if s.tls.is_some() { "https" } else { "http" };
        let mut endpoint =
            Endpoint::from_shared(format!("{scheme}://{}", self.addr)).map_err(|e| down(&e))?;
        if let Some(tls) = &s.tls {
            endpoint = endpoint
                .tls_config(tls.client(s.connect_timeout))
                .map_err(|e| down(&e))?;
        }
        let endpoint = endpoint
            .connect_timeout(s.connect_timeout)
            .tcp_nodelay(true)
            .initial_stream_window_size(s.stream_window)
            .initial_connection_window_size(s.connection_window)
            .http2_keep_alive_interval(s.keepalive_interval)
            .keep_alive_timeout(s.keepalive_timeout)
            .keep_alive_while_idle(true);
        let connected = timeout(s.connect_timeout, endpoint.connect()).await;
        let refused = matches!(&connected, Ok(Err(e)) if connection_refused(e));
        *lock(&self.refused_at) = refused.then(Instant::now);
        let channel = match connected {
            Err(_) => return Err(down(&"connect timed out")),
            Ok(Err(e)) => return Err(down(&e)),
            Ok(Ok(channel)) => channel,
        };
        let mut client = FabricClient::new(channel)
            .max_decoding_message_size(s.codec_limit())
            .max_encoding_message_size(s.codec_limit());
        let (tx, rx) = mpsc::channel(s.send_queue);
        let cancel = self.stop.child_token();
        let batches =
            crate::batch::batches(rx, s.codec_limit(), self.counters.clone(), cancel.clone());
        let mut request = tonic::Request::new(batches);
        let cluster = MetadataValue::try_from(s.cluster_name.as_str()).map_err(|e| down(&e))?;
        request
            .metadata_mut()
            .insert(NODE_ID_KEY, MetadataValue::from(s.node_id));
        request.metadata_mut().insert(CLUSTER_KEY, cluster);
        let version = MetadataValue::try_from(wire_version_value(s.wire_version).as_str())
            .map_err(|e| down(&e))?;
        request.metadata_mut().insert(WIRE_VERSION_KEY, version);
        let response = match timeout(s.connect_timeout, client.exchange(request)).await {
            Err(_) => return Err(down(&"stream open timed out")),
            Ok(Err(status)) if status.code() == tonic::Code::PermissionDenied => {
                tracing::warn!(peer = self.id, addr = %self.addr, msg = status.message(), "fabric stream refused");
                return Err(LinkState::Refused(status.message().to_string()));
            }
            Ok(Err(status)) => return Err(down(&status.message())),
            Ok(Ok(response)) => response,
        };
        {
            let mut live = lock(&self.live);
            let epoch = self.epoch.load(Ordering::Acquire);
            *live = Some(Live { tx, epoch, cancel });
            self.state.send_replace(LinkState::Connected);
        }
        Counters::add(&self.counters.connects, 1);
        Ok(response.into_inner())
    }

    /// Reads answers until the stream ends, then closes it.
    async fn serve(&self, mut stream: tonic::Streaming<Batch>) {
        let cancel = match &*lock(&self.live) {
            Some(live) => live.cancel.clone(),
            None => return,
        };
        let reason = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break "closed locally".to_string(),
                message = stream.message() => match message {
                    Ok(Some(batch)) => self.answers(batch),
                    Ok(None) => break "closed by peer".to_string(),
                    Err(status) => break format!("stream error: {} {}", status.code(), status.message()),
                },
            }
        };
        tracing::debug!(peer = self.id, %reason, "fabric stream closed");
        self.close_stream(reason);
    }

    /// Completes the calls answered in `batch`.
    fn answers(&self, batch: Batch) {
        self.counters.received(&batch.frames);
        if self.blocked.load(Ordering::Acquire) {
            Counters::add(&self.counters.frames_dropped, batch.frames.len() as u64);
            return;
        }
        let mut done = Vec::with_capacity(batch.frames.len());
        {
            let mut pending = lock(&self.pending);
            for frame in batch.frames {
                let answer = match Op::try_from(frame.op) {
                    Ok(Op::Reply) => Ok(frame.payload),
                    Ok(Op::Error) => Err(CallError::Remote(
                        String::from_utf8_lossy(&frame.payload).into_owned(),
                    )),
                    _ => {
                        Counters::add(&self.counters.frames_dropped, 1);
                        continue;
                    }
                };
                if let Some(waiter) = pending.remove(&frame.id) {
                    done.push((waiter, answer));
                }
            }
        }
        for (waiter, answer) in done {
            let _ = waiter.send(answer);
        }
    }

    /// Forgets the current stream, marks the link down (for `reason`) and
    /// fails every outstanding call.
    fn close_stream(&self, reason: String) {
        {
            let mut live = lock(&self.live);
            if let Some(old) = live.take() {
                old.cancel.cancel();
            }
            self.epoch.fetch_add(1, Ordering::AcqRel);
            if !self.stop.is_cancelled() {
                self.state.send_replace(LinkState::Down(reason));
            }
        }
        let failed: Vec<_> = lock(&self.pending).drain().map(|(_, w)| w).collect();
        let error = if self.stop.is_cancelled() {
            CallError::Closed
        } else {
            CallError::Unreachable(self.id)
        };
        for waiter in failed {
            let _ = waiter.send(Err(error.clone()));
        }
    }
}

/// Removes a call's pending entry when the call future ends.
struct PendingGuard {
    peer: Arc<Peer>,
    id: u64,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        lock(&self.peer.pending).remove(&self.id);
    }
}

/// A call registered with its peer, its frame queued or waiting for room.
struct StartedCall {
    _guard: PendingGuard,
    peer: NodeId,
    deadline: Instant,
    /// The frame, when the queue was full at the start.
    waiting: Option<(mpsc::Sender<Frame>, Frame)>,
    answer_rx: oneshot::Receiver<Result<Bytes, CallError>>,
}

impl StartedCall {
    /// Queues the frame if it still waits, then waits for the answer.
    async fn finish(self) -> Result<Bytes, CallError> {
        if let Some((tx, frame)) = self.waiting {
            match timeout_at(self.deadline, tx.send(frame)).await {
                Err(_) => return Err(CallError::Timeout),
                Ok(Err(_)) => return Err(CallError::Unreachable(self.peer)),
                Ok(Ok(())) => {}
            }
        }
        match timeout_at(self.deadline, self.answer_rx).await {
            Err(_) => Err(CallError::Timeout),
            Ok(Err(_)) => Err(CallError::Unreachable(self.peer)),
            Ok(Ok(answer)) => answer,
        }
    }
}

/// Whether `error` (or one of its sources) is the OS refusing a TCP
/// connection: no socket listens at that address.
fn connection_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        next = e.source();
    }
    false
}
