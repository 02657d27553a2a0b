//! [`Metadata`]: this node's handle on the cluster-metadata Raft group. It
//! opens (or re-opens) the group on the node's shared log store, answers
//! reads from the locally applied [`ClusterState`] without IO, and sends
//! every change to the group's leader: executed here when this node leads,
//! otherwise forwarded over the transport as a `MetaPropose` RPC (see
//! `rpc.rs`, which also serves the group's RPCs). Every change is bounded by a deadline, and a caller hears success
//! only once the change is committed (and applied here, so it reads its
//! own write).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use openraft::{BasicNode, Raft};
use store_redb::LogStore;
use tokio::sync::watch;
use tokio::time::Instant;

use super::state::{ClusterState, MetaCommand, MetaResponse, NodeInfo, QueueInfo};
use super::state_machine::{MetaStateMachine, Shared};
use super::types::{MetaRaft, MetaRequest, META_GROUP, META_GROUP_NAME};
use crate::net::NodeId;
use crate::net::NodeTransport;
use crate::raft::network::GroupNetwork;
use crate::raft::{PurgeGatedLog, SnapshotReceiver};

/// Settings of the metadata group (the Raft timings come with the
/// `openraft::Config` passed to [`Metadata::open`]).
#[derive(Debug, Clone)]
pub struct MetaOptions {
    /// Replicas of each new quorum queue, capped by the cluster size.
    pub replication_factor: usize,
    /// How long a queue declaration, deletion or member change may take
    /// before it fails (e.g. no quorum of the metadata group).
    pub request_timeout: Duration,
    /// How long adding or removing a node may take (adding waits for the
    /// new node to catch up with the log).
    pub membership_timeout: Duration,
}

impl MetaOptions {
    /// Options with `replication_factor` and default time-outs (10 s for
    /// requests, 60 s for membership changes).
    pub fn new(replication_factor: usize) -> MetaOptions {
        MetaOptions {
            replication_factor,
            request_timeout: Duration::from_secs(10),
            membership_timeout: Duration::from_secs(60),
        }
    }
}

/// Why a metadata operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The node's Raft log store.
    #[error("metadata log store: {0}")]
    Store(#[from] store_redb::Error),
    /// The snapshot file or its directory.
    #[error("metadata state machine in {path}: {message}")]
    StateMachine {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// openraft refused to start or initialize the group.
    #[error("metadata raft: {0}")]
    Raft(String),
    /// No committed answer in time: the metadata group has no leader with
    /// a quorum (or it is too slow). The change may still be committed
    /// later; every change is idempotent, so retrying is safe.
    #[error("metadata {what}: not committed within {after:?} (no quorum of the metadata group?); last known leader {leader:?}")]
    Unavailable {
        /// The operation.
        what: String,
        /// The time it had.
        after: Duration,
        /// Who this node last saw leading.
        leader: Option<NodeId>,
    },
    /// The change was refused; nothing changed.
    #[error("metadata {what}: {reason}")]
    Refused {
        /// The operation.
        what: String,
        /// Why.
        reason: String,
    },
    /// No such queue.
    #[error("quorum queue {0} is not declared")]
    NoSuchQueue(String),
}

/// This node's replica of the cluster metadata.
pub struct Metadata {
    pub(super) node_id: NodeId,
    pub(super) raft: Raft<MetaRaft, MetaStateMachine>,
    shared: Arc<Shared>,
    pub(super) transport: Arc<dyn NodeTransport>,
    pub(super) options: MetaOptions,
    /// Set by a graceful stop: execute no more requests (`handoff.rs`).
    pub(super) stopping: AtomicBool,
    /// A snapshot the leader is streaming here (`raft::snapshot_stream`).
    pub(super) snapshot_in: SnapshotReceiver<Vec<u8>>,
}

/// Bytes of one metadata snapshot chunk (the state is small: usually one).
const META_SNAPSHOT_CHUNK_BYTES: usize = 1024 * 1024;

impl Metadata {
    /// Open this node's replica of the metadata group: its log is group
    /// [`META_GROUP`] of `store`, its snapshot lives in `dir`. A node with
    /// a log re-opens from it. A node with none initializes the group with
    /// `initial` if it is listed there: a fresh cluster bootstraps by every
    /// initial member calling this with the SAME `initial` (openraft
    /// accepts identical initializations). A node joining an existing
    /// cluster must pass an EMPTY `initial` (a different member set would
    /// split the group) and is added from a member with
    /// [`Metadata::add_node`].
    ///
    /// The caller routes RPCs for [`META_GROUP`] to [`Metadata::handle_rpc`]
    /// (or registers the handle as an RPC handler). Returns without
    /// waiting for a leader; requests wait for one, bounded.
    pub async fn open(
        node_id: NodeId,
        dir: &Path,
        store: &LogStore,
        transport: Arc<dyn NodeTransport>,
        raft_config: Arc<openraft::Config>,
        initial: BTreeMap<NodeId, NodeInfo>,
        options: MetaOptions,
    ) -> Result<Arc<Metadata>, MetaError> {
        let shared = Arc::new(Shared::new());
        let state_machine =
            MetaStateMachine::open(dir, shared.clone()).map_err(|e| MetaError::StateMachine {
                path: dir.to_path_buf(),
                message: e.to_string(),
            })?;
        let log_store = PurgeGatedLog::new(
            store.group::<MetaRaft>(META_GROUP)?,
            shared.snapshot_cover.subscribe(),
        );
        let network = GroupNetwork::new(
            transport.clone(),
            node_id,
            META_GROUP,
            META_GROUP_NAME.to_owned(),
            META_SNAPSHOT_CHUNK_BYTES,
            // One append at a time: the metadata group's traffic is light
            // and its follower takes no pipelined appends (`meta/rpc.rs`).
            1,
        );
        // The quorum groups' configuration turns openraft's step-down of a
        // removed leader off (their placement never removes a leader), but
        // a node removed from the metadata group may be its leader.
        let raft_config = Arc::new(openraft::Config {
            removed_leader_step_down: openraft::Config::default().removed_leader_step_down,
            ..(*raft_config).clone()
        });
        let raft = Raft::new(node_id, raft_config, network, log_store, state_machine)
            .await
            .map_err(|e| MetaError::Raft(e.to_string()))?;
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| MetaError::Raft(e.to_string()))?;
        if !initialized && initial.contains_key(&node_id) {
            let members: BTreeMap<NodeId, BasicNode> = initial
                .iter()
                .map(|(id, info)| (*id, BasicNode::new(&info.fabric)))
                .collect();
            tracing::info!(node_id, ?members, "bootstrapping the metadata group");
            if let Err(e) = raft.initialize(members).await {
                // Another member's initialization reached us first: fine.
                tracing::debug!(node_id, error = %e, "metadata initialize");
            }
        }
        Ok(Arc::new(Metadata {
            node_id,
            raft,
            shared,
            transport,
            options,
            stopping: AtomicBool::new(false),
            snapshot_in: SnapshotReceiver::default(),
        }))
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The queue as applied here (no IO; may lag the leader briefly).
    pub fn queue(&self, name: &str) -> Option<QueueInfo> {
        self.shared.lock().state.queues.get(name).cloned()
    }

    /// Every queue as applied here, by name.
    pub fn queues(&self) -> Vec<QueueInfo> {
        self.shared.lock().state.queues.values().cloned().collect()
    }

    /// The cluster's members as applied here.
    pub fn members(&self) -> BTreeMap<NodeId, NodeInfo> {
        self.shared.lock().state.members.clone()
    }

    /// A copy of the whole applied state.
    pub fn state(&self) -> ClusterState {
        self.shared.lock().state.clone()
    }

    /// The applied state's version.
    pub fn version(&self) -> u64 {
        *self.shared.subscribe().borrow()
    }

    /// The applied state's version, changing whenever the state does.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.subscribe()
    }

    /// The metadata group's leader as this node last saw it (no IO).
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow_watched().current_leader
    }

    /// The metadata group's term, log and applied index and leader on
    /// this node (no IO).
    pub fn raft_status(&self) -> crate::raft::RaftStatus {
        crate::raft::RaftStatus::of(&self.raft.metrics().borrow_watched())
    }

    /// The metadata group's voters in this node's latest membership.
    pub fn voters(&self) -> BTreeSet<NodeId> {
        self.raft
            .metrics()
            .borrow_watched()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }

    /// Declare `name` from any node: its replicas are placed by the state
    /// machine (so every node agrees) and returned. Declaring an existing
    /// queue returns it as it is.
    pub async fn declare_queue(&self, name: &str) -> Result<QueueInfo, MetaError> {
        if let Some(existing) = self.queue(name) {
            return Ok(existing);
        }
        let what = format!("declare {name}");
        let command = MetaCommand::DeclareQueue {
            name: name.to_owned(),
            replication_factor: u32::try_from(self.options.replication_factor).unwrap_or(u32::MAX),
        };
        match self.write(&what, command).await? {
            MetaResponse::Queue(info) => Ok(info),
            other => Err(unexpected(what, other)),
        }
    }

    /// Delete `name`; false if it was not declared.
    pub async fn delete_queue(&self, name: &str) -> Result<bool, MetaError> {
        let what = format!("delete {name}");
        let command = MetaCommand::DeleteQueue {
            name: name.to_owned(),
        };
        match self.write(&what, command).await? {
            MetaResponse::Done => Ok(true),
            MetaResponse::NotFound => Ok(false),
            other => Err(unexpected(what, other)),
        }
    }

    /// Record a new replica set for `name` (first = preferred leader). The
    /// quorum-queue side changes the group's membership to match.
    pub async fn set_queue_members(
        &self,
        name: &str,
        members: Vec<NodeId>,
    ) -> Result<QueueInfo, MetaError> {
        let what = format!("set members of {name}");
        let command = MetaCommand::SetQueueMembers {
            name: name.to_owned(),
            members,
        };
        match self.write(&what, command).await? {
            MetaResponse::Queue(info) => Ok(info),
            MetaResponse::NotFound => Err(MetaError::NoSuchQueue(name.to_owned())),
            other => Err(unexpected(what, other)),
        }
    }

    /// Make `to` (already a replica) the preferred leader of `name`, for
    /// maintenance of its current leader. Read-modify-write on this
    /// node's view: a concurrent member change in between is overwritten.
    pub async fn move_leader(&self, name: &str, to: NodeId) -> Result<QueueInfo, MetaError> {
        let info = self
            .queue(name)
            .ok_or_else(|| MetaError::NoSuchQueue(name.to_owned()))?;
        if info.preferred_leader() == Some(to) {
            return Ok(info);
        }
        if !info.members.contains(&to) {
            return Err(MetaError::Refused {
                what: format!("move leader of {name}"),
                reason: format!("node {to} holds no replica (members {:?})", info.members),
            });
        }
        let mut members = vec![to];
        members.extend(info.members.iter().copied().filter(|m| *m != to));
        self.set_queue_members(name, members).await
    }

    /// Record where this node is (e.g. its AMQP address once listening),
    /// if the applied state says otherwise.
    pub async fn announce(&self, info: NodeInfo) -> Result<(), MetaError> {
        if self.members().get(&self.node_id) == Some(&info) {
            return Ok(());
        }
        let command = MetaCommand::AddNode {
            id: self.node_id,
            info,
        };
        self.write("announce", command).await.map(drop)
    }

    /// Add node `id` to the cluster: as a learner of the metadata group
    /// until it has caught up, then as a voter, then recorded as a member
    /// (from then on new queues may be placed on it). The node must be
    /// running [`Metadata::open`] with an empty `initial` and be reachable.
    /// Idempotent: re-adding a member only updates its info.
    pub async fn add_node(&self, id: NodeId, info: NodeInfo) -> Result<(), MetaError> {
        let deadline = Instant::now() + self.options.membership_timeout;
        let what = format!("add node {id}");
        let learner = MetaRequest::AddLearner {
            id,
            info: info.clone(),
        };
        self.request(&what, learner, deadline).await?;
        self.request(&what, MetaRequest::AddVoter { id }, deadline)
            .await?;
        let record = MetaRequest::Write(MetaCommand::AddNode { id, info });
        expect_done(what.clone(), self.request(&what, record, deadline).await?)
    }

    /// Remove node `id`: out of the metadata group's membership, then out
    /// of the member list, where every queue that had a replica on it gets
    /// another member instead (the quorum-queue side moves the replicas).
    /// Idempotent: removing a node that is gone succeeds.
    pub async fn remove_node(&self, id: NodeId) -> Result<(), MetaError> {
        let deadline = Instant::now() + self.options.membership_timeout;
        let what = format!("remove node {id}");
        self.request(&what, MetaRequest::RemoveVoter { id }, deadline)
            .await?;
        let record = MetaRequest::Write(MetaCommand::RemoveNode { id });
        match self.request(&what, record, deadline).await? {
            MetaResponse::NotFound => Ok(()),
            other => expect_done(what, other),
        }
    }

    /// Why this node's replica of the group stopped, if its core quit on
    /// an error (a storage failure): it then serves nothing until the node
    /// restarts. See `crate::raft::core_fault`.
    pub(crate) fn core_fault(&self) -> Option<String> {
        crate::raft::core_fault(&self.raft.metrics().borrow_watched())
    }

    /// Build a snapshot now (maintenance and tests; openraft also builds
    /// them by its snapshot policy).
    pub async fn trigger_snapshot(&self) -> Result<(), MetaError> {
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| MetaError::Raft(e.to_string()))
    }

    /// Stop the group on this node.
    pub async fn shutdown(&self) {
        if let Err(error) = self.raft.shutdown().await {
            tracing::warn!(node_id = self.node_id, %error, "metadata raft shutdown");
        }
    }

    async fn write(&self, what: &str, command: MetaCommand) -> Result<MetaResponse, MetaError> {
        let deadline = Instant::now() + self.options.request_timeout;
        match self
            .request(what, MetaRequest::Write(command), deadline)
            .await?
        {
            MetaResponse::Rejected(reason) => Err(MetaError::Refused {
                what: what.to_owned(),
                reason,
            }),
            other => Ok(other),
        }
    }
}

fn unexpected(what: String, response: MetaResponse) -> MetaError {
    MetaError::Refused {
        what,
        reason: format!("unexpected answer {response:?}"),
    }
}

fn expect_done(what: String, response: MetaResponse) -> Result<(), MetaError> {
    match response {
        MetaResponse::Done => Ok(()),
        MetaResponse::Rejected(reason) => Err(MetaError::Refused { what, reason }),
        other => Err(unexpected(what, other)),
    }
}
