//! The node's HTTP endpoint (`--http-listen`): `/healthz` (the process is
//! up and answering), `/readyz` (the node serves: see `health.rs`),
//! `/metrics` and `/metrics/node` (Prometheus text, everything or the
//! node-wide families only, `metrics.rs`), the status page at `/` and
//! the JSON management API under `/api/` (`api/`). Health and metrics are wiring of read-only
//! views: the queues' stats, the Raft groups' figures, the store's, the
//! engine's and the fabric's counters and the process's. The API changes
//! things only through what already does them: admin's service (status,
//! delete, purge, leadership), the queue directory's prepare (declare, as
//! an attach), the engine's table of live connections (close), the node's
//! policy set (`NodeView::set_policies`). No lock is
//! held across an await.
//!
//! - `server.rs`: the listener (HTTP, or HTTPS with the AMQP listener's
//!   certificate), HTTP/1.1 over hyper, the bounds (request head, body,
//!   time, connections) and the routes;
//! - `health.rs`: liveness and readiness;
//! - `metrics.rs`: one scrape, gathered and encoded (`labelled_text.rs`
//!   writes the per-queue and per-group families, `node_families.rs` the
//!   store's, the fabric's and the process's);
//! - `page.rs`: the status page at `/`, which reads the API from the
//!   browser;
//! - `api/`: the management API: who may call it (`access.rs`), its
//!   routes, and the answers for queues, the cluster and connections.
//!
//! What lives above it (the node's transient queues, its fatal fault, the
//! fabric, whether it is stopping) is handed in by `node` as a
//! [`NodeView`]; it must not know how the node is assembled, and nothing
//! below `node` imports it. It sits above `admin` and speaks no fabric.

mod api;
mod health;
mod labelled_text;
mod metrics;
mod node_families;
mod page;
mod server;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;

use crate::admin::AdminService;
use crate::auth::Authenticator;
use crate::config::PolicyConfig;
use crate::engine::{EngineCounters, LiveConnections};
use crate::meta::Metadata;
use crate::net::NodeId;
use crate::queue::{PolicyError, QueueDirectory, QueueStats};
use crate::quorum::QuorumNode;

pub(crate) use server::serve;

/// One HTTP answer.
type Answer = hyper::Response<Full<Bytes>>;

/// What the endpoint needs from the node assembly.
pub(crate) trait NodeView: Send + Sync + 'static {
    /// This node's transient queues (quorum queues are read from the
    /// [`QuorumNode`]).
    fn transient_queues(&self) -> Vec<QueueStats>;
    /// The node's first fatal storage fault, if there was one.
    fn fatal(&self) -> Option<String>;
    /// Whether the node is shutting down.
    fn stopping(&self) -> bool;
    /// Failed logins since start.
    fn login_failures(&self) -> u64;
    /// The fabric's counters and links, in cluster mode between processes.
    fn fabric(&self) -> Option<FabricView>;
    /// The node's queue policies in force, in order.
    fn policies(&self) -> Vec<PolicyConfig>;
    /// Replace the node's queue policies (on every open queue too); the
    /// number in force. A refused set changes nothing.
    fn set_policies(&self, policies: &[PolicyConfig]) -> Result<usize, PolicyError>;
}

/// The fabric as the metrics show it.
#[derive(Debug, Clone, Default)]
pub(crate) struct FabricView {
    /// Traffic counters since start.
    pub(crate) stats: fabric::FabricStats,
    /// Each peer and whether its link is up now.
    pub(crate) peers: Vec<(NodeId, bool)>,
}

/// Everything a request may read.
pub(crate) struct Sources {
    pub(crate) node_id: NodeId,
    pub(crate) quorum: Arc<QuorumNode>,
    pub(crate) metadata: Arc<Metadata>,
    pub(crate) engine: Arc<EngineCounters>,
    pub(crate) node: Arc<dyn NodeView>,
    /// Bytes of the last `/metrics` answer (to size the next one).
    pub(crate) last_scrape_bytes: std::sync::atomic::AtomicUsize,
    /// The operator's requests, answered in process.
    pub(crate) admin: Arc<AdminService>,
    /// Declaring a queue as an attach would.
    pub(crate) queues: Arc<dyn QueueDirectory>,
    /// The AMQP connections served now.
    pub(crate) connections: Arc<LiveConnections>,
    /// The users, their permissions and the login throttle.
    pub(crate) auth: Arc<Authenticator>,
    /// `[cluster] name`, shown in the overview.
    pub(crate) cluster_name: String,
    /// The limits every queue of a kind has, shown with each queue.
    pub(crate) queue_settings: QueueSettings,
}

/// The configured limits of the queues, per kind (the same for every queue
/// of that kind; there are no per-queue settings yet).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct QueueSettings {
    /// A transient queue holding this many messages stops granting credit.
    pub(crate) transient_max_messages: usize,
    /// The same in bytes.
    pub(crate) transient_max_bytes: u64,
    /// Publishes proposed and not yet committed per quorum queue before its
    /// publishers stop getting credit.
    pub(crate) quorum_max_inflight_publishes: usize,
    /// Bytes of bodies one quorum queue keeps in memory before paging.
    pub(crate) quorum_queue_resident_budget_bytes: u64,
    /// How long a quorum publish waits for its commit.
    pub(crate) quorum_publish_timeout_ms: u64,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}
