//! Forwarding of client traffic between nodes: a client attached to any
//! node publishes to and consumes from any queue of the cluster. The
//! engine never learns about nodes; it sees one [`crate::queue::Queue`]:
//!
//! - `routed.rs`: [`RoutedQueue`], the queue on the client's node; local
//!   fast path when this node leads, else proxies over the transport;
//! - `follow.rs`: finding the leader and moving links when it changes;
//! - `held_settles.rs`: settlements held for the leader until one is known;
//! - `release.rs`: when a routed queue may be let go, and what goes with it;
//! - `server.rs`: the serving side, running forwarded links against the
//!   local queue and shipping their events back;
//! - `protocol.rs`: the postcard messages in the envelopes;
//! - `fuzz_checks.rs`: the fuzz target's check of their decoder.
//!
//! Where a queue lives: a quorum queue on its replicas (led by its Raft
//! leader); a transient queue on one *owner* node chosen from its name
//! over the cluster members ([`Forwarder::owner_of`]).

mod cut_off;
mod follow;
pub(crate) mod fuzz_checks;
mod held_settles;
mod links;
mod protocol;
mod release;
mod retarget;
mod routed;
mod routed_txn;
mod server;
mod server_txn;
mod streams;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;

pub(crate) use routed::{RoutedQueue, Target};

use crate::config::QuorumConfig;
use crate::net::{kind, CallFuture, Envelope, NodeId, NodeTransport, TransportError};
use crate::queue::{Queue, QueueAddress};
use crate::quorum::{BoxFuture, PeerRequests, QuorumNode};
use crate::raft::group_id;
use protocol::{Reply, Request, ToServer};

/// Why forwarding could not do something.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    /// The node transport failed.
    #[error("{0}")]
    Transport(#[from] TransportError),
    /// A message could not be decoded.
    #[error("{0}")]
    Decode(#[from] protocol::DecodeError),
}

/// The queues this node itself serves, for links forwarded from other
/// nodes (the node's registry implements it; handed in at assembly).
pub(crate) trait LocalQueues: Send + Sync + 'static {
    /// The queue this node serves at `address`: the local quorum queue
    /// while this node leads it, or a transient queue it owns. Never a
    /// routed queue, so a forwarded link is never forwarded again.
    fn local_queue(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, String>;
}

/// This node's forwarding: the origin side's link table and the server.
pub(crate) struct Forwarder {
    pub(crate) node_id: NodeId,
    transport: Arc<dyn NodeTransport>,
    pub(crate) config: QuorumConfig,
    pub(crate) quorum: Arc<QuorumNode>,
    local_queues: OnceLock<Weak<dyn LocalQueues>>,
    /// Link ids: unique per incarnation (seeded from the clock).
    next_link: AtomicU64,
    /// Origin side: which routed queue owns each link id, and the links
    /// closed lately (still alive to audits, see `links.rs`).
    links: Mutex<links::OriginLinks<Weak<RoutedQueue>>>,
    /// Origin side: what each serving node's stream delivered.
    streams: streams::Streams,
    server: Arc<server::Server>,
}

impl Forwarder {
    /// Forwarding for node `config.node_id` over `transport`.
    pub(crate) fn new(
        transport: Arc<dyn NodeTransport>,
        config: QuorumConfig,
        quorum: Arc<QuorumNode>,
    ) -> Arc<Forwarder> {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Arc::new_cyclic(|weak: &Weak<Forwarder>| Forwarder {
            node_id: config.node_id,
            server: server::Server::new(config.node_id, transport.clone(), weak.clone()),
            transport,
            config,
            quorum,
            local_queues: OnceLock::new(),
            next_link: AtomicU64::new(seed),
            links: Mutex::new(links::OriginLinks::default()),
            streams: streams::Streams::default(),
        })
    }

    /// Connect the node's own queues (its registry, made after the
    /// forwarder).
    pub(crate) fn set_local_queues(&self, queues: Weak<dyn LocalQueues>) {
        let _ = self.local_queues.set(queues);
    }

    pub(crate) fn local_queues(&self) -> Option<Arc<dyn LocalQueues>> {
        self.local_queues.get().and_then(Weak::upgrade)
    }

    pub(crate) fn leader_wait(&self) -> Duration {
        Duration::from_millis(self.config.leader_wait_ms)
    }

    /// The bounds of telling a cut from a fail-over (`cut_off.rs`).
    fn cut_rules(&self) -> cut_off::Rules {
        cut_off::Rules::new(&self.config)
    }

    /// How long a new link on a queue whose search gave up for a cut
    /// waits for that search before it is answered: the network may have
    /// healed a moment ago. An election time-out and two seconds, never
    /// more than [`Forwarder::leader_wait`].
    pub(crate) fn cut_off_grace(&self) -> Duration {
        Duration::from_millis(self.config.election_timeout_max_ms + 2000).min(self.leader_wait())
    }

    /// How long a forwarded publish may wait for its outcome (a second
    /// more than the leader's own commit time-out).
    pub(crate) fn publish_timeout(&self) -> Duration {
        Duration::from_millis(self.config.publish_timeout_ms + 1000)
    }

    /// The replicas of quorum queue `name`, preferred leader first, as
    /// the cluster metadata places them (see `QuorumNode::replicas`).
    pub(crate) fn replicas(&self, name: &str) -> Vec<NodeId> {
        self.quorum.replicas(name)
    }

    /// The node that owns transient queue `name`: one of the cluster's
    /// members chosen by the name's hash, the same on every node (this
    /// node alone in a single-node setup).
    pub(crate) fn owner_of(&self, name: &str) -> NodeId {
        let members = self.config.cluster_members();
        members[(group_id(name) % members.len() as u64) as usize]
    }

    fn new_link(&self, queue: &Weak<RoutedQueue>) -> u64 {
        let link = self.next_link.fetch_add(1, Ordering::Relaxed);
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(link, queue.clone());
        link
    }

    /// `link` is closed here; the caller sends its `Close` next (or has no
    /// server to send it to).
    fn forget_link(&self, link: u64) {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .close(link, std::time::Instant::now());
    }

    /// Close `link`, held at `node`: forget it here, then send its `Close`
    /// (best effort: if it is lost, the server's audit of this node's links
    /// closes it). A `Close` the transport refused follows nothing on its
    /// way, so the link is dead to audits at once: the grace would only keep
    /// a link the server still holds taking deliveries nobody reads.
    fn close_link(&self, node: NodeId, link: u64) {
        self.forget_link(link);
        if self
            .send_to_server(node, &ToServer::Close { link }, Bytes::new())
            .is_err()
        {
            self.links
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .dead(link);
        }
    }

    fn send_to_server(
        &self,
        node: NodeId,
        message: &ToServer,
        payload: Bytes,
    ) -> Result<(), TransportError> {
        let envelope = protocol::envelope(kind::FORWARD_TO_SERVER, 0, message, payload);
        self.transport.send(self.node_id, node, envelope)
    }

    async fn call(&self, node: NodeId, request: &Request) -> Result<Reply, ForwardError> {
        let answer = self
            .transport
            .call(self.node_id, node, protocol::request(request))
            .await?;
        Ok(protocol::decode(&answer)?)
    }

    /// Make sure quorum queue `name` exists when this node holds no replica
    /// of it: ask its replicas, in turn, to create it.
    pub(crate) async fn create_remote(&self, address: &QueueAddress) -> Result<(), String> {
        let request = Request::Locate {
            address: address.to_string(),
            create: true,
        };
        let mut last = String::from("no replica answered");
        for node in self.replicas(address.name()) {
            match tokio::time::timeout(self.leader_wait(), self.call(node, &request)).await {
                Ok(Ok(Reply::Located { .. })) => return Ok(()),
                Ok(Ok(Reply::Failed(e))) => last = e,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = format!("node {node} did not answer in time"),
            }
        }
        Err(last)
    }

    /// Answer a forwarding `call`.
    async fn answer(self: Arc<Self>, from: NodeId, envelope: Envelope) -> Reply {
        let request: Request = match protocol::decode(&envelope.meta) {
            Ok(request) => request,
            Err(e) => return Reply::Failed(e.to_string()),
        };
        match request {
            Request::Locate { address, create } => {
                let Ok(address) = QueueAddress::parse(&address) else {
                    return Reply::Failed(format!("bad address {address}"));
                };
                if create {
                    if let Err(e) = self.quorum.ensure(address.name()).await {
                        return Reply::Failed(e.to_string());
                    }
                }
                let node = self.quorum.get(&address).and_then(|q| q.leader());
                Reply::Located { node }
            }
            Request::Elect { address, from } => {
                let Ok(address) = QueueAddress::parse(&address) else {
                    return Reply::Failed(format!("bad address {address}"));
                };
                match self.quorum.campaign(address.name(), from).await {
                    Ok(leader) => Reply::Elected { leader },
                    Err(e) => Reply::Failed(e.to_string()),
                }
            }
            Request::Probe { address, links } => self.server.probe(from, &address, links),
            Request::Settle { address, settles } => self.take_settles(&address, settles),
            Request::Alive { links } => Reply::Dead {
                links: self
                    .links
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .dead_among(links, std::time::Instant::now()),
            },
        }
    }

    /// Take a forwarding `send`.
    pub(crate) fn message(&self, from: NodeId, envelope: Envelope) {
        match envelope.kind {
            kind::FORWARD_TO_SERVER => match protocol::decode::<ToServer>(&envelope.meta) {
                Ok(message) => self.server.on_message(from, message, envelope.payload),
                Err(error) => tracing::warn!(from, %error, "dropped forwarding message"),
            },
            kind::FORWARD_TO_ORIGIN => self.on_shipment(from, envelope),
            other => tracing::warn!(from, kind = other, "unknown envelope kind"),
        }
    }

    /// Answer a forwarding `call` envelope (also the quorum side's
    /// requests: see [`PeerAsker`]).
    pub(crate) fn handle(self: Arc<Self>, from: NodeId, envelope: Envelope) -> CallFuture {
        Box::pin(async move { Ok(protocol::reply(&self.answer(from, envelope).await)) })
    }
}

/// The quorum side's requests to other nodes ([`PeerRequests`]), sent as
/// forwarding calls.
pub(crate) struct PeerAsker {
    /// This node.
    pub(crate) node_id: NodeId,
    /// The node transport.
    pub(crate) transport: Arc<dyn NodeTransport>,
}

impl PeerRequests for PeerAsker {
    fn ask_to_create(
        &self,
        to: NodeId,
        address: String,
        limit: Duration,
    ) -> BoxFuture<'static, Result<(), String>> {
        let (transport, from) = (self.transport.clone(), self.node_id);
        Box::pin(async move { ask_to_create(transport.as_ref(), from, to, &address, limit).await })
    }

    fn ask_to_elect(
        &self,
        to: NodeId,
        address: String,
        limit: Duration,
    ) -> BoxFuture<'static, Result<NodeId, String>> {
        let (transport, from) = (self.transport.clone(), self.node_id);
        Box::pin(async move { ask_to_elect(transport.as_ref(), from, to, &address, limit).await })
    }

    fn ask_to_settle(
        &self,
        to: NodeId,
        address: String,
        settles: Vec<(u64, crate::queue::Outcome)>,
        limit: Duration,
    ) -> BoxFuture<'static, Result<(bool, Option<NodeId>), String>> {
        let (transport, from) = (self.transport.clone(), self.node_id);
        Box::pin(async move {
            let request = Request::Settle { address, settles };
            match ask(transport.as_ref(), from, to, &request, limit).await? {
                Reply::Settled { taken, leader } => Ok((taken, leader)),
                Reply::Failed(e) => Err(e),
                other => Err(format!("unexpected answer {other:?}")),
            }
        })
    }
}

/// Ask node `to` (a replica, normally the preferred leader) to create
/// quorum queue `address` and wait for its first leader, within `limit`.
/// Used by the quorum side so the preferred leader initializes the group.
async fn ask_to_create(
    transport: &dyn NodeTransport,
    from: NodeId,
    to: NodeId,
    address: &str,
    limit: Duration,
) -> Result<(), String> {
    let request = Request::Locate {
        address: address.to_owned(),
        create: true,
    };
    match ask(transport, from, to, &request, limit).await? {
        Reply::Located { .. } => Ok(()),
        Reply::Failed(e) => Err(e),
        other => Err(format!("unexpected answer {other:?}")),
    }
}

/// Ask node `to` to campaign for the leadership of `address`, which `from`
/// is handing off; the leader after the campaign, within `limit`.
async fn ask_to_elect(
    transport: &dyn NodeTransport,
    from: NodeId,
    to: NodeId,
    address: &str,
    limit: Duration,
) -> Result<NodeId, String> {
    let request = Request::Elect {
        address: address.to_owned(),
        from,
    };
    match ask(transport, from, to, &request, limit).await? {
        Reply::Elected { leader } => Ok(leader),
        Reply::Failed(e) => Err(e),
        other => Err(format!("unexpected answer {other:?}")),
    }
}

async fn ask(
    transport: &dyn NodeTransport,
    from: NodeId,
    to: NodeId,
    request: &Request,
    limit: Duration,
) -> Result<Reply, String> {
    let answer = tokio::time::timeout(limit, transport.call(from, to, protocol::request(request)))
        .await
        .map_err(|_| format!("node {to} did not answer within {limit:?}"))?
        .map_err(|e| e.to_string())?;
    protocol::decode(&answer).map_err(|e| e.to_string())
}
