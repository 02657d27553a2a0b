//! [`Client`]: a client-only connection (node id 0), e.g. for an admin CLI.
//! It dials one node, opens one stream and makes calls on it; it accepts no
//! traffic of its own.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::peer::{LinkState, Peer};
use crate::stats::Counters;
use crate::{CallError, ClientConfig, Envelope, FabricError, FabricStats, NodeId};

/// A client-only connection to one node. It reconnects in the background if
/// the stream breaks. Dropping it closes the connection.
pub struct Client {
    peer: Arc<Peer>,
    counters: Arc<Counters>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.peer.addr())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the node at `addr` of cluster `cluster_name` with the
    /// default [`ClientConfig`].
    pub async fn connect(
        addr: SocketAddr,
        cluster_name: impl Into<String>,
    ) -> Result<Client, FabricError> {
        Self::connect_with(ClientConfig::new(addr, cluster_name)).await
    }

    /// Connects with an explicit configuration; fails with
    /// [`FabricError::Refused`] on a wrong cluster name and
    /// [`FabricError::Connect`] if no stream opened within the connect timeout.
    pub async fn connect_with(config: ClientConfig) -> Result<Client, FabricError> {
        let settings = Arc::new(config.link());
        let counters = Arc::new(Counters::default());
        let stop = CancellationToken::new();
        // The node id of the far side is not known to a client; label it 0.
        let target: NodeId = crate::CLIENT_NODE_ID;
        let peer = Peer::new(
            target,
            config.addr,
            settings,
            counters.clone(),
            Arc::new(AtomicBool::new(false)),
            stop.clone(),
        );
        let mut state = peer.subscribe();
        let task = tokio::spawn(peer.clone().run());
        let client = Client {
            peer,
            counters,
            stop,
            task: Some(task),
        };
        let _ = tokio::time::timeout(
            config.connect_timeout,
            state.wait_for(|s| {
                matches!(
                    s,
                    LinkState::Connected | LinkState::Refused(_) | LinkState::Stopped
                )
            }),
        )
        .await
        .map(|r| r.map(|_| ()));
        let last = state.borrow().clone();
        match last {
            LinkState::Connected => Ok(client),
            LinkState::Refused(reason) => Err(FabricError::Refused(reason)),
            LinkState::Down(reason) => Err(FabricError::Connect(reason)),
            LinkState::Stopped => Err(FabricError::Connect("client stopped".into())),
        }
    }

    /// Calls the node and waits for its answer (at most the call timeout).
    pub fn call(
        &self,
        envelope: Envelope,
    ) -> impl Future<Output = Result<Bytes, CallError>> + Send + 'static {
        self.peer.clone().call(envelope)
    }

    /// Queues a one-way message to the node; never waits.
    pub fn send(&self, envelope: Envelope) -> Result<(), CallError> {
        self.peer.send(envelope)
    }

    /// Whether the stream is open right now.
    pub fn is_connected(&self) -> bool {
        self.peer.state() == LinkState::Connected
    }

    /// The client's traffic counters.
    pub fn stats(&self) -> FabricStats {
        self.counters.snapshot()
    }

    /// Closes the connection and waits for the background task.
    pub async fn close(mut self) {
        self.peer.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
