//! [`QuorumNode`]: this node's side of every quorum queue. It owns the
//! node-wide Raft log store (one redb file, group commit), opens a group per
//! queue (creating it on first use, re-opening it from disk at start-up),
//! and answers Raft RPCs from other nodes (`rpc.rs`), creating a replica
//! when a group first reaches it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use openraft::{BasicNode, Raft, SnapshotPolicy, StepDownPolicy};
use store_redb::LogStore;
use tokio::sync::OnceCell;

use super::budget::NodeBudget;
use super::cluster_view::{PeerRequests, ReplicaSets};
use super::node_faults::CoreFaults;
use super::peer_liveness::{down_after, PeerLiveness};
use super::queue::QuorumQueue;
use super::quiet::Quiet;
use super::state_machine::{BodyLimits, QueueStateMachine, Shared};
use super::sweep_list::SweepList;
use super::types::{QueueRaft, QueueRaftHandle};
use crate::config::QuorumConfig;
use crate::latency::{LatencyHistogram, LatencySnapshot};
use crate::net::NodeId;
use crate::net::NodeTransport;
use crate::paging::StoreOptions;
use crate::queue::{self as queues, dead_letter::SharedRouter, Policies, Queue, QueueAddress};
use crate::queue::{QueueKind, ResourceAlarm, ResourceLimits};
use crate::raft::append_feed::{AppendFeedStats, AppendFeeds, FEED_IDLE};
use crate::raft::network::GroupNetwork;
use crate::raft::{group_id, open_log_store, GroupId, PurgeGatedLog};

/// Errors opening or creating quorum queues.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// The Raft log store could not be opened or used.
    #[error("raft log store: {0}")]
    Store(#[from] store_redb::Error),
    /// A file of the node's data directory.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// openraft refused to start or initialize the group.
    #[error("raft: {0}")]
    Raft(String),
    /// No leader was elected in time.
    #[error("{0}: no leader elected within {1:?}")]
    NoLeader(String, Duration),
    /// This node holds no replica of the queue (replication factor below
    /// the cluster size); clients reach it through forwarding.
    #[error("{0} has no replica on node {1}")]
    NotReplica(String, NodeId),
    /// Two queue names hash to the same group id.
    #[error("queue {0} collides with {1} (same group id)")]
    Collision(String, String),
    /// The cluster metadata could not record or tell the placement.
    #[error("cluster metadata: {0}")]
    Placement(String),
    /// This node does not lead the queue (so cannot hand it off).
    #[error("{0}: this node does not lead it (leader {1:?})")]
    NotLeader(String, Option<NodeId>),
    /// No open quorum queue of that name here.
    #[error("no quorum queue {0} on this node")]
    NoSuchQueue(String),
    /// A leadership hand-off did not complete.
    #[error("hand-off of {queue}: {reason}")]
    HandOff {
        /// The queue.
        queue: String,
        /// What went wrong.
        reason: String,
    },
}

type GroupCell = Arc<OnceCell<Arc<QuorumQueue>>>;

/// This node's quorum queues.
pub struct QuorumNode {
    pub(super) node_id: NodeId,
    dir: PathBuf,
    store: LogStore,
    pub(super) transport: Arc<dyn NodeTransport>,
    pub(super) config: QuorumConfig,
    pub(super) raft_config: Arc<openraft::Config>,
    pub(super) groups: Mutex<HashMap<GroupId, GroupCell>>,
    /// The cluster's record of replica sets, once the node is wired.
    pub(super) replica_sets: std::sync::OnceLock<Arc<dyn ReplicaSets>>,
    /// Requests to other nodes, once the node is wired.
    pub(super) peers: Arc<OnceLock<Arc<dyn PeerRequests>>>,
    /// What this node knows of its peers' liveness (`peer_liveness.rs`),
    /// and the replicas its driver visits (`visits.rs`).
    pub(super) liveness: Arc<PeerLiveness>,
    pub(super) visits: Arc<super::visits::Visits>,
    /// Groups opened from disk at start-up whose start-up hold has not
    /// ended: elections off and no tick (`reopen.rs`).
    pub(super) held: Mutex<std::collections::HashSet<GroupId>>,
    /// Set by [`QuorumNode::shutdown`]: the metadata follower stops.
    pub(super) stopping: std::sync::atomic::AtomicBool,
    /// Groups the metadata no longer places here, since when (see
    /// `placement.rs`).
    pub(super) retiring: Mutex<HashMap<GroupId, tokio::time::Instant>>,
    /// Groups seen declared in the metadata: one no longer declared was
    /// deleted (`removal.rs`), never merely not applied here yet.
    pub(super) seen_declared: Mutex<std::collections::HashSet<GroupId>>,
    /// Memory for message bodies, shared by every queue of the node.
    resident_budget: Arc<NodeBudget>,
    /// Raised while disk or memory is short: publishers are held back.
    alarm: Arc<ResourceAlarm>,
    /// Proposal-to-commit time of publishes, across the node's queues.
    commit_latency: Arc<LatencyHistogram>,
    /// The node's queue policies: resolved when a group opens here, set
    /// again on every open group by [`QuorumNode::apply_policies`].
    pub(super) policies: Arc<Policies>,
    /// The groups the node's expiry sweep visits (`sweep_list.rs`).
    pub(super) sweep_list: Arc<SweepList>,
    /// The first group whose Raft core quit on an error (`node_faults.rs`).
    pub(super) core_faults: Arc<CoreFaults>,
    /// Every group's dead-letter router (`dead_letter_outbox.rs`).
    pub(super) dead_letter_router: Arc<OnceLock<SharedRouter>>,
    /// The groups' pipelined appends from their leaders (`rpc.rs`).
    pub(super) append_feeds: Arc<AppendFeeds<QueueRaft>>,
    /// Leaderships handed back to their preferred node (`rebalance.rs`).
    pub(super) rebalance: super::rebalance::RebalanceCounts,
    /// Take-overs from a leader lost or not running (`follower_tick.rs`).
    pub(super) successions: super::follower_tick::Successions,
    /// The groups' open peer connections (`raft/open_clients.rs`).
    pub(super) raft_clients: crate::raft::OpenClients,
}

/// The node-wide Raft log file under the data directory.
pub(crate) fn log_path(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("quorum").join("raft-log.redb")
}

/// File in a group's directory naming its queue.
pub(super) const NAME_FILE: &str = "queue-name";

impl QuorumNode {
    /// Open the node's quorum state under `data_dir` and re-open every
    /// group found there, each with its policy from `policies`.
    pub async fn open(
        data_dir: &Path,
        transport: Arc<dyn NodeTransport>,
        config: QuorumConfig,
        policies: Arc<Policies>,
    ) -> Result<Arc<QuorumNode>, QuorumError> {
        let dir = data_dir.join("quorum");
        std::fs::create_dir_all(&dir).map_err(|source| QuorumError::Io {
            path: dir.clone(),
            source,
        })?;
        let store = open_log_store(
            &log_path(data_dir),
            config.log_cache_bytes,
            config.log_journal_bytes,
            config.log_journal_direct,
        )
        .await?;
        let raft_config = openraft::Config {
            cluster_name: "ramqp".into(),
            heartbeat_interval: config.heartbeat_interval_ms,
            election_timeout_min: config.election_timeout_min_ms,
            election_timeout_max: config.election_timeout_max_ms,
            // A heartbeat's answer acknowledges the leader as of its
            // sending, so it counts as long as it comes within the
            // check-quorum window (`leadership_watch.rs`): wait that long.
            // openraft's default, a heartbeat interval, lost every answer
            // of a follower busy with thousands of elections after a node
            // died, and leaders it followed stopped serving for want of
            // acknowledgements it had sent.
            heartbeat_timeout: Some(config.election_timeout_max_ms),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_every_entries),
            max_in_snapshot_log_to_keep: config.log_entries_kept_after_snapshot,
            // openraft's 200 ms applies to every chunk of a snapshot transfer,
            // the last one waiting for the follower's install (0.8 s for 1M
            // messages here): the first transfer of a deep queue timed out.
            install_snapshot_timeout: INSTALL_SNAPSHOT_TIMEOUT_MS,
            // An entry holds up to a few hundred publishes (~100 KB): 300 per
            // AppendEntries made one probe of a lagging follower ~30 MB.
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            // Each chunk of a snapshot transfer is held several times over
            // while it crosses (read, postcard, the fabric's frame, on both
            // nodes); at openraft's 3 MiB that put the leader of a 1M
            // queue past 150 MiB while it streamed to a wiped follower.
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            // A follower with a replaced disk may rejoin, its log gone back.
            allow_log_reversion: Some(true),
            // A restarted leader campaigns like any other node (not restored).
            enable_leader_restore: Some(false),
            // Log-stage timings are kept only with openraft's runtime-stats
            // feature (off); its default capacity of 1,024 reserved ~145 KiB
            // per group that nothing writes.
            log_stage_capacity: Some(1),
            // openraft's step-down watcher (a task per group, ~0.4 KiB idle)
            // steps a leader down once a committed membership leaves it out.
            // Ours never gets there: placement (`placement.rs`) hands the
            // leadership to a member of the new replica set before that set
            // is proposed, and only a leader inside the set proposes it.
            removed_leader_step_down: StepDownPolicy::Never,
            ..openraft::Config::default()
        }
        .validate()
        .map_err(|e| QuorumError::Raft(e.to_string()))?;
        let config_budget = config.resident_budget_bytes;
        let node = Arc::new(QuorumNode {
            node_id: config.node_id,
            dir,
            store,
            transport,
            config,
            liveness: Arc::new(PeerLiveness::new(down_after(&raft_config))),
            visits: Arc::default(),
            raft_config: Arc::new(raft_config),
            groups: Mutex::new(HashMap::new()),
            replica_sets: std::sync::OnceLock::new(),
            peers: Arc::default(),
            held: Mutex::default(),
            stopping: std::sync::atomic::AtomicBool::new(false),
            retiring: Mutex::new(HashMap::new()),
            seen_declared: Mutex::new(std::collections::HashSet::new()),
            resident_budget: Arc::new(NodeBudget::new(config_budget)),
            alarm: Arc::new(ResourceAlarm::default()),
            commit_latency: Arc::new(LatencyHistogram::default()),
            policies,
            sweep_list: Arc::default(),
            core_faults: Arc::default(),
            dead_letter_router: Arc::default(),
            append_feeds: AppendFeeds::new(FEED_IDLE),
            rebalance: Default::default(),
            successions: Default::default(),
            raft_clients: crate::raft::OpenClients::counted(),
        });
        super::follower_tick::spawn(Arc::downgrade(&node), &node.raft_config);
        queues::spawn_watcher(
            &node.alarm,
            data_dir.to_path_buf(),
            ResourceLimits::from_config(&node.config),
        );
        let held = super::reopen::open_all(&node).await?;
        node.start_liveness(held);
        Ok(node)
    }

    /// The node-wide Raft log store (the metadata group keeps its log
    /// there too, so one fsync covers both).
    pub fn log_store(&self) -> &LogStore {
        &self.store
    }

    /// The Raft timings every group of this node runs with.
    pub fn raft_config(&self) -> Arc<openraft::Config> {
        self.raft_config.clone()
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    fn cell(&self, group: GroupId) -> GroupCell {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(group)
            .or_default()
            .clone()
    }

    /// The directory of every group's replica (`quorum/` of the data).
    pub(super) fn quorum_dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of a group's replica.
    pub(super) fn group_dir(&self, group: GroupId) -> PathBuf {
        self.dir.join(format!("{group:016x}"))
    }

    /// Whether the cluster metadata declares quorum queue `name` (`None`
    /// before the metadata is attached).
    pub fn declaration(&self, name: &str) -> Option<bool> {
        self.replica_sets
            .get()
            .map(|sets| sets.replica_set(name).is_some())
    }

    /// Drop the group from this node's table (its replica was stopped); a
    /// later open starts it again from its directory.
    pub(super) fn forget(&self, group: GroupId) {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&group);
        self.append_feeds.forget(group);
    }

    /// Counters of the pipelined appends this node took as a follower.
    pub fn append_feed_stats(&self) -> AppendFeedStats {
        self.append_feeds.stats()
    }

    /// The queue if this node already has its group open.
    pub fn get(&self, address: &QueueAddress) -> Option<Arc<QuorumQueue>> {
        let group = group_id(address.name());
        let cell = self
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&group)
            .cloned()?;
        cell.get().filter(|q| q.address() == address).cloned()
    }

    /// Every open quorum queue.
    pub fn queues(&self) -> Vec<Arc<QuorumQueue>> {
        let cells: Vec<GroupCell> = self
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        cells.iter().filter_map(|c| c.get().cloned()).collect()
    }

    /// Open the group of `name` (re-opening it from disk, or creating it
    /// here). With `init`, a group new to this node is initialized with
    /// those members; without, it waits to be reached by its leader.
    pub(super) async fn ensure_open(
        &self,
        name: &str,
        init: Option<&[NodeId]>,
    ) -> Result<Arc<QuorumQueue>, QuorumError> {
        self.ensure_open_with(name, init, true).await
    }

    /// [`Self::ensure_open`]; a group this call opens starts with
    /// elections on only if `elect` (start-up opens them off, `reopen.rs`).
    pub(super) async fn ensure_open_with(
        &self,
        name: &str,
        init: Option<&[NodeId]>,
        elect: bool,
    ) -> Result<Arc<QuorumQueue>, QuorumError> {
        let group = group_id(name);
        let mut opened = false;
        let queue = self
            .cell(group)
            .get_or_try_init(|| {
                opened = true;
                self.open_group(name, group, init, elect)
            })
            .await?
            .clone();
        if queue.address().name() != name {
            return Err(QuorumError::Collision(
                name.into(),
                queue.address().name().into(),
            ));
        }
        if opened {
            // The set may have changed while the group opened, after
            // `apply_policies` listed the open groups without this one.
            queue.set_policy(self.policies.resolve(queue.address()));
        }
        Ok(queue)
    }

    async fn open_group(
        &self,
        name: &str,
        group: GroupId,
        init: Option<&[NodeId]>,
        elect: bool,
    ) -> Result<Arc<QuorumQueue>, QuorumError> {
        let address = QueueAddress::parse(&format!("/quorum/{name}"))
            .map_err(|e| QuorumError::Raft(e.to_string()))?;
        debug_assert_eq!(address.kind(), QueueKind::Quorum);
        let dir = self.group_dir(group);
        // A new group is created only where it has a replica.
        let creates = match init {
            Some(members) if !members.contains(&self.node_id) => None,
            _ => Some(name.to_owned()),
        };
        let limits = BodyLimits {
            node: self.resident_budget.clone(),
            queue_bytes: self.config.queue_resident_budget_bytes,
            store: StoreOptions {
                segment_max_bytes: self.config.segment_max_bytes,
                writeback_step_bytes: self.config.segment_writeback_step_bytes,
                ..StoreOptions::default()
            },
        };
        let mut shared = Shared::new(
            self.config.snapshot_min_log_bytes,
            limits,
            address.to_string(),
            self.commit_latency.clone(),
        );
        shared.dead_letter_router = self.dead_letter_router.clone();
        shared.peers = self.peers.clone();
        let quiet = Quiet::new(self.liveness.clone(), self.visits.clone(), group);
        shared.quiet = Arc::new(quiet);
        let shared = Arc::new(shared);
        shared
            .lock()
            .dispatcher
            .set_policy(self.policies.resolve(&address));
        let _ = shared.sweep_list.set((self.sweep_list.clone(), group));
        let _ = shared.core_faults.set(self.core_faults.clone());
        // The files and the log store's rows, off the async workers.
        let (state_machine, group_log) = {
            let (dir, shared, store) = (dir.clone(), shared.clone(), self.store.clone());
            let name = name.to_owned();
            let opened = tokio::task::spawn_blocking(move || {
                let Some(state_machine) = open_files(&dir, &name, creates.as_deref(), shared)?
                else {
                    return Ok(None);
                };
                Ok::<_, QuorumError>(Some((state_machine, store.group::<QueueRaft>(group)?)))
            })
            .await
            .map_err(|e| QuorumError::Raft(format!("opening {address}: {e}")))??;
            opened.ok_or_else(|| QuorumError::NotReplica(address.to_string(), self.node_id))?
        };
        let log_store = PurgeGatedLog::new(group_log, shared.snapshot_cover.subscribe());
        let network = GroupNetwork::new(
            self.transport.clone(),
            self.node_id,
            group,
            name.to_owned(),
            SNAPSHOT_CHUNK_BYTES as usize,
            self.config.append_pipeline_depth,
        )
        .with_reach(self.liveness.clone(), shared.snapshot_cover.subscribe())
        .with_clients(self.raft_clients.clone());
        let raft = Raft::build(
            self.node_id,
            self.raft_config.clone(),
            network,
            log_store,
            state_machine,
        )
        .await
        .map_err(|e| QuorumError::Raft(e.to_string()))?;
        if !elect {
            // Set before the group's tasks run: it never campaigns, and
            // does not tick (a follower's tick only times its elections)
            // until the node's driver visits it (`follower_tick.rs`): at
            // 10,000 groups the ticks of those already open starved the
            // opening of the rest.
            raft.runtime_config().elect(false);
            raft.runtime_config().tick(false);
        }
        raft.run();
        if let Some(members) = init {
            initialize(&raft, &address, members).await?;
        }
        Ok(QuorumQueue::start(
            address,
            self.node_id,
            raft,
            shared,
            self.config.max_inflight_publishes,
            Duration::from_millis(self.config.publish_timeout_ms),
            self.alarm.clone(),
        ))
    }

    /// Why publishers to this node's quorum queues are held back (disk or
    /// memory short), if they are.
    pub fn resource_alarm(&self) -> Option<String> {
        self.alarm.reason()
    }

    /// Why the disk part of the resource alarm is raised (free disk space
    /// or data size past its limit), if it is: the node takes no publishes
    /// to its quorum queues.
    pub fn disk_alarm(&self) -> Option<String> {
        self.alarm
            .is_disk_raised()
            .then(|| self.alarm.reason())
            .flatten()
    }

    /// Proposal-to-commit time of the publishes of this node's quorum
    /// queues (as their leader).
    pub fn commit_latency(&self) -> LatencySnapshot {
        self.commit_latency.snapshot()
    }

    /// The node's resource alarm, for the transient queues (its memory
    /// part holds their publishers back too).
    pub(crate) fn alarm(&self) -> Arc<ResourceAlarm> {
        self.alarm.clone()
    }

    /// Bytes of message bodies the node's quorum queues keep in memory.
    pub fn resident_bytes(&self) -> u64 {
        self.resident_budget.used()
    }

    /// Group-commit counters of the node's Raft log store.
    pub fn store_stats(&self) -> store_redb::BatchStatsSnapshot {
        self.store.stats()
    }

    /// Log the store's counters (the node is shutting down).
    pub(super) fn log_store_stats(&self) {
        let stats = self.store.stats();
        tracing::info!(
            commits = stats.commits,
            entries = stats.entries,
            requests_per_commit = stats.requests_per_commit(),
            commit_ms = stats.commit_time.as_millis() as u64,
            commit_max_ms = stats.commit_time_max.as_millis() as u64,
            "raft log store"
        );
    }
}

/// A group's directory and state machine (blocking: run off the async
/// workers). The directory names its queue in [`NAME_FILE`]: one naming
/// another queue is a collision. A directory without it is a group new
/// here, created (durably) only if `creates` names the queue, else `None`
/// (not a replica here).
fn open_files(
    dir: &Path,
    name: &str,
    creates: Option<&str>,
    shared: Arc<Shared>,
) -> Result<Option<QueueStateMachine>, QuorumError> {
    let io = |source| QuorumError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let name_file = dir.join(NAME_FILE);
    match std::fs::read_to_string(&name_file) {
        Ok(existing) if existing != name => {
            return Err(QuorumError::Collision(name.into(), existing))
        }
        Ok(_) => {}
        Err(_) => {
            let Some(name) = creates else {
                return Ok(None);
            };
            std::fs::create_dir_all(dir).map_err(io)?;
            std::fs::write(&name_file, name).map_err(io)?;
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
    }
    QueueStateMachine::open(dir, shared)
        .map(Some)
        .map_err(|e| QuorumError::Raft(e.to_string()))
}

/// Deadline of each snapshot chunk's RPC, the install included (see `open`).
const INSTALL_SNAPSHOT_TIMEOUT_MS: u64 = 30_000;
/// Log entries per AppendEntries at most (see `open`).
const MAX_PAYLOAD_ENTRIES: u64 = 64;
/// Bytes of one snapshot transfer chunk (see `open`).
const SNAPSHOT_CHUNK_BYTES: u64 = 1024 * 1024;

/// Initialize a group new to this node with `members` (if it is not yet):
/// used by the node that creates the queue (its preferred leader, which
/// then wins the first election, so leaders spread as the metadata placed
/// them). Identical initializations by two nodes are allowed by openraft.
pub(super) async fn initialize(
    raft: &QueueRaftHandle,
    address: &QueueAddress,
    members: &[NodeId],
) -> Result<(), QuorumError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| QuorumError::Raft(e.to_string()))?;
    if !initialized {
        let members: BTreeMap<NodeId, BasicNode> = members
            .iter()
            .map(|id| (*id, super::types::member()))
            .collect();
        tracing::info!(queue = %address, ?members, "creating quorum queue");
        if let Err(e) = raft.initialize(members).await {
            // Another node initialized it first: that is fine.
            tracing::debug!(queue = %address, error = %e, "initialize");
        }
    }
    Ok(())
}
