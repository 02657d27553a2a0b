//! [`Fabric`]: a node's handle on the fabric. Starts the listener, keeps one
//! outbound link per peer, and offers calls, one-way sends, peer management,
//! fault injection and stats.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::peer::{LinkState, Peer};
use crate::proto::fabric_server::FabricServer;
use crate::server::{Service, Shared};
use crate::{
    lock, CallError, Envelope, FabricConfig, FabricError, FabricStats, Handler, NodeId,
    CLIENT_NODE_ID,
};

/// How long [`Fabric::shutdown`] waits for the server and links to wind down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// An outbound link and the task that keeps it up.
type Link = (Arc<Peer>, JoinHandle<()>);

/// A running fabric node. Dropping it stops everything in the background;
/// [`Fabric::shutdown`] also waits for it.
pub struct Fabric {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    peers: Mutex<BTreeMap<NodeId, Link>>,
    server: Mutex<Option<JoinHandle<()>>>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("node_id", &self.shared.settings.node_id)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl Fabric {
    /// Binds `config.listen` (port 0 is fine), starts serving and dials every
    /// configured peer in the background. Must run inside a tokio runtime.
    pub async fn start(
        config: FabricConfig,
        handler: Arc<dyn Handler>,
    ) -> Result<Fabric, FabricError> {
        if config.node_id == CLIENT_NODE_ID {
            return Err(FabricError::Config(
                "node id 0 is reserved for clients".into(),
            ));
        }
        if config.max_message_bytes == 0 {
            return Err(FabricError::Config(
                "max_message_bytes must be positive".into(),
            ));
        }
        let settings = Arc::new(config.link());
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| FabricError::Bind {
                addr: config.listen,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| FabricError::Bind {
            addr: config.listen,
            source,
        })?;
        let shared = Shared::new(settings.clone(), handler);
        let limit = settings.codec_limit();
        let service = FabricServer::new(Service {
            shared: shared.clone(),
        })
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit);
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let shutdown = shared.shutdown.clone();
        let mut builder = Server::builder();
        if let Some(tls) = &settings.tls {
            builder = builder
                .tls_config(tls.server(settings.connect_timeout))
                .map_err(|e| FabricError::Config(format!("fabric TLS: {e}")))?;
        }
        let router = builder
            .tcp_nodelay(true)
            .initial_stream_window_size(settings.stream_window)
            .initial_connection_window_size(settings.connection_window)
            .http2_keepalive_interval(Some(settings.keepalive_interval))
            .http2_keepalive_timeout(Some(settings.keepalive_timeout))
            .add_service(service);
        let server = tokio::spawn(async move {
            if let Err(e) = router
                .serve_with_incoming_shutdown(incoming, async move { shutdown.cancelled().await })
                .await
            {
                tracing::error!(error = %e, "fabric server failed");
            }
        });
        let fabric = Fabric {
            shared,
            local_addr,
            peers: Mutex::default(),
            server: Mutex::new(Some(server)),
            runtime: tokio::runtime::Handle::current(),
        };
        for (id, addr) in config.peers {
            fabric.add_peer(id, addr);
        }
        tracing::info!(node = config.node_id, addr = %local_addr, tls = settings.tls.is_some(), "fabric started");
        Ok(fabric)
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.shared.settings.node_id
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn peer(&self, id: NodeId) -> Option<Arc<Peer>> {
        let peers = lock(&self.peers);
        peers.get(&id).map(|(peer, _)| peer.clone())
    }

    /// Calls `target` and waits for its answer, at most the call timeout.
    /// Fails fast with [`CallError::Unreachable`] when there is no open stream
    /// to `target` (unknown, not connected, blocked); with
    /// [`CallError::TooLarge`] before sending anything over the size limit.
    /// A full outbound queue makes the call wait for room (within the same
    /// timeout) rather than fail. Calls of one peer are answered
    /// concurrently, so answers may come back in any order. The frame is
    /// queued by `call` itself, not when the future is first polled: calls
    /// made one after the other leave in that order and reach the peer's
    /// [`crate::Handler::call`] in it (its ordering guarantee), unless the
    /// outbound queue is full (a call that finds it full waits for room in
    /// its future, and may be overtaken). Dropping the future abandons the
    /// answer, not the request.
    pub fn call(
        &self,
        target: NodeId,
        envelope: Envelope,
    ) -> impl Future<Output = Result<Bytes, CallError>> + Send + 'static {
        let peer = self.peer(target);
        let closed = self.shared.shutdown.is_cancelled();
        let max = self.shared.settings.max_message_bytes;
        let counters = self.shared.counters.clone();
        // A call handed to the peer's link is queued there now (so calls
        // leave in the order `call` was invoked) and counted there if it
        // fails; the refusals before that are counted here.
        let started = if closed {
            Err(CallError::Closed)
        } else if let Err(e) = Peer::check_size(max, &envelope) {
            Err(e)
        } else {
            match peer {
                Some(peer) => Ok(peer.call(envelope)),
                None => Err(CallError::Unreachable(target)),
            }
        };
        async move {
            match started {
                Ok(call) => call.await,
                Err(refused) => {
                    crate::stats::Counters::add(&counters.calls_failed, 1);
                    Err(refused)
                }
            }
        }
    }

    /// Queues a one-way message to `target`; never waits. Messages to one
    /// peer arrive in the order they were queued. Fails with
    /// [`CallError::Backpressure`] when the peer's queue is full and with
    /// [`CallError::Unreachable`] when there is no open stream. Delivery is
    /// at most once: frames queued when a stream breaks are lost.
    pub fn send(&self, target: NodeId, envelope: Envelope) -> Result<(), CallError> {
        if self.shared.shutdown.is_cancelled() {
            return Err(CallError::Closed);
        }
        Peer::check_size(self.shared.settings.max_message_bytes, &envelope)?;
        self.peer(target)
            .ok_or(CallError::Unreachable(target))?
            .send(envelope)
    }

    /// Adds (or re-addresses) a peer and starts dialling it. A peer already
    /// known at the same address is left alone.
    pub fn add_peer(&self, id: NodeId, addr: SocketAddr) {
        if id == self.node_id() || id == CLIENT_NODE_ID || self.shared.shutdown.is_cancelled() {
            tracing::warn!(
                peer = id,
                "fabric: ignoring add_peer of self, 0 or after shutdown"
            );
            return;
        }
        let mut peers = lock(&self.peers);
        if let Some((old, _)) = peers.get(&id) {
            if old.addr() == addr {
                return;
            }
        }
        let peer = Peer::new(
            id,
            addr,
            self.shared.settings.clone(),
            self.shared.counters.clone(),
            self.shared.blocked_flag(id),
            self.shared.shutdown.child_token(),
        );
        let task = self.runtime.spawn(peer.clone().run());
        if let Some((old, _)) = peers.insert(id, (peer, task)) {
            old.stop();
        }
    }

    /// Stops dialling `id`; calls outstanding to it fail with
    /// [`CallError::Closed`].
    pub fn remove_peer(&self, id: NodeId) {
        let removed = lock(&self.peers).remove(&id);
        if let Some((peer, _)) = removed {
            peer.stop();
        }
    }

    /// The known peers and their addresses.
    pub fn peers(&self) -> BTreeMap<NodeId, SocketAddr> {
        let peers = lock(&self.peers);
        peers
            .iter()
            .map(|(id, (peer, _))| (*id, peer.addr()))
            .collect()
    }

    /// The state of the outbound link to `peer` (`None` for an unknown peer).
    pub fn link_state(&self, peer: NodeId) -> Option<LinkState> {
        self.peer(peer).map(|p| p.state())
    }

    /// Whether no stream to `peer` is open and its address refused the last
    /// dial: nothing listens there (its process is not running). A peer
    /// that is slow, cut off or blocked is not this (its dials time out or
    /// are not made).
    pub fn not_listening(&self, peer: NodeId) -> bool {
        self.not_listening_since(peer).is_some()
    }

    /// When `peer`'s address last refused a dial, if it is
    /// [`Fabric::not_listening`]: a peer heard from after that moment (it
    /// dialled this node, say) has been restarted since.
    pub fn not_listening_since(&self, peer: NodeId) -> Option<tokio::time::Instant> {
        self.peer(peer).and_then(|p| p.not_listening_since())
    }

    /// Whether the outbound stream to `peer` is open.
    pub fn is_connected(&self, peer: NodeId) -> bool {
        self.link_state(peer) == Some(LinkState::Connected)
    }

    /// Waits until the outbound stream to `peer` is open; `false` if that did
    /// not happen within `timeout` (or the peer is unknown).
    pub async fn wait_connected(&self, peer: NodeId, timeout: Duration) -> bool {
        let Some(peer) = self.peer(peer) else {
            return false;
        };
        let mut state = peer.subscribe();
        tokio::time::timeout(timeout, state.wait_for(|s| *s == LinkState::Connected))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Fault injection: while `blocked`, everything to and from `peer` is
    /// dropped on this node. Open streams both ways are closed (so calls fail
    /// fast as [`CallError::Unreachable`] on both sides), new ones are
    /// refused, and frames still arriving are discarded. Unblocking lets the
    /// links reconnect at once from this side, and within the peer's backoff
    /// from the other.
    pub fn set_blocked(&self, peer: NodeId, blocked: bool) {
        self.shared
            .blocked_flag(peer)
            .store(blocked, Ordering::Release);
        let link = self.peer(peer);
        if blocked {
            if let Some(link) = &link {
                link.drop_stream();
            }
            self.shared.close_inbound(peer);
        } else if let Some(link) = &link {
            link.wake();
        }
    }

    /// Whether `peer` is blocked by [`Fabric::set_blocked`].
    pub fn is_blocked(&self, peer: NodeId) -> bool {
        self.shared.blocked_flag(peer).load(Ordering::Acquire)
    }

    /// A snapshot of the traffic counters.
    pub fn stats(&self) -> FabricStats {
        self.shared.counters.snapshot()
    }

    /// Closes every stream, stops the listener and waits (briefly) for the
    /// background tasks to finish. Outstanding calls fail with
    /// [`CallError::Closed`] (outbound) or lose their answer (inbound).
    pub async fn shutdown(self) {
        self.close().await;
    }

    /// [`Fabric::shutdown`] through a shared reference (for a fabric kept in
    /// an `Arc`). Afterwards every call and send fails with
    /// [`CallError::Closed`]; calling it again does nothing.
    pub async fn close(&self) {
        self.shared.shutdown.cancel();
        let links: Vec<_> = std::mem::take(&mut *lock(&self.peers))
            .into_values()
            .collect();
        for (peer, _) in &links {
            peer.stop();
        }
        for (_, task) in links {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, task).await;
        }
        let server = lock(&self.server).take();
        if let Some(mut server) = server {
            if tokio::time::timeout(SHUTDOWN_GRACE, &mut server)
                .await
                .is_err()
            {
                tracing::warn!("fabric server did not stop in time; aborting it");
                server.abort();
            }
            tracing::info!(node = self.node_id(), "fabric shut down");
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}
