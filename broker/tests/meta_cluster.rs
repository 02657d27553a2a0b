//! The cluster-metadata Raft group on in-process clusters (real redb log
//! files and snapshot files in temporary directories, RPCs serialized
//! through `LocalTransport`): bootstrap, declaring through a follower,
//! placement spread, restart recovery, leader loss, no quorum, adding a
//! 4th node and removing one. Every wait is bounded.

use crate::common;

/// A node that only runs the metadata group: its RPCs go straight to it.
struct MetaNode(Arc<Metadata>);

impl NodeHandler for MetaNode {
    fn handle(self: Arc<Self>, _from: NodeId, envelope: Envelope) -> CallFuture {
        let meta = self.0.clone();
        Box::pin(async move { meta.handle_rpc(envelope).await })
    }

    fn message(&self, _from: NodeId, _envelope: Envelope) {}
}

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use common::*;
use ramqpd_broker::meta::{MetaError, MetaOptions, Metadata, NodeInfo, QueueInfo};
use ramqpd_broker::net::{
    CallFuture, Envelope, LocalTransport, NodeHandler, NodeId, NodeTransport,
};
use store_redb::{LogStore, LogStoreOptions};

/// Bound for one cluster-level step (elections, catch-up) on a loaded
/// 2-core machine.
const SLOW: Duration = Duration::from_secs(30);

/// Metadata request time-out in these tests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

fn raft_config() -> Arc<openraft::Config> {
    let config = openraft::Config {
        cluster_name: "ramqp-meta-test".into(),
        heartbeat_interval: 100,
        election_timeout_min: 700,
        election_timeout_max: 1400,
        // Snapshots (and purges) happen during the tests, so restarts
        // and the 4th node go through the snapshot path.
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(20),
        max_in_snapshot_log_to_keep: 0,
        ..openraft::Config::default()
    };
    Arc::new(config.validate().expect("valid raft config"))
}

fn info(id: NodeId) -> NodeInfo {
    NodeInfo {
        fabric: format!("127.0.0.1:{}", 7000 + id),
        amqp: Some(format!("127.0.0.1:{}", 5600 + id)),
    }
}

struct Running {
    _handler: Arc<dyn NodeHandler>,
    meta: Arc<Metadata>,
}

/// N metadata replicas in this process, each with its own data directory
/// that survives its restarts.
struct Harness {
    transport: Arc<LocalTransport>,
    root: tempfile::TempDir,
    options: MetaOptions,
    running: BTreeMap<NodeId, Running>,
}

impl Harness {
    async fn start(n: u64, replication_factor: usize) -> Harness {
        let mut options = MetaOptions::new(replication_factor);
        // Long enough for an election or two on an overloaded 2-core
        // machine (tests run in parallel); the no-quorum tests wait it out.
        options.request_timeout = REQUEST_TIMEOUT;
        options.membership_timeout = SLOW;
        let mut harness = Harness {
            transport: LocalTransport::new(),
            root: tempfile::tempdir().expect("temp dir"),
            options,
            running: BTreeMap::new(),
        };
        let initial: BTreeMap<NodeId, NodeInfo> = (1..=n).map(|id| (id, info(id))).collect();
        for id in 1..=n {
            harness.open(id, initial.clone()).await;
        }
        harness
    }

    fn dir(&self, id: NodeId) -> PathBuf {
        self.root.path().join(format!("node{id}"))
    }

    fn snapshot_file(&self, id: NodeId) -> PathBuf {
        self.dir(id).join("meta").join("snapshot.bin")
    }

    async fn open(&mut self, id: NodeId, initial: BTreeMap<NodeId, NodeInfo>) {
        let dir = self.dir(id);
        std::fs::create_dir_all(&dir).expect("node dir");
        let store = open_store(&dir.join("raft-log.redb")).await;
        let meta = within(
            SLOW,
            "metadata open",
            Metadata::open(
                id,
                &dir.join("meta"),
                &store,
                self.transport.clone(),
                raft_config(),
                initial,
                self.options.clone(),
            ),
        )
        .await
        .expect("metadata opens");
        let handler: Arc<dyn NodeHandler> = Arc::new(MetaNode(meta.clone()));
        let weak: Weak<dyn NodeHandler> = Arc::downgrade(&handler);
        self.transport.register(id, weak);
        self.running.insert(
            id,
            Running {
                meta,
                _handler: handler,
            },
        );
    }

    /// Restart a node that was part of the cluster (its log decides; the
    /// initial set is ignored once initialized).
    async fn restart(&mut self, id: NodeId) {
        self.open(id, BTreeMap::new()).await;
    }

    async fn stop(&mut self, id: NodeId) {
        self.transport.unregister(id);
        if let Some(node) = self.running.remove(&id) {
            within(SLOW, "metadata shutdown", node.meta.shutdown()).await;
        }
    }

    fn meta(&self, id: NodeId) -> &Arc<Metadata> {
        &self.running[&id].meta
    }

    /// Wait until the running nodes agree on a leader among them.
    async fn leader(&self) -> NodeId {
        let deadline = tokio::time::Instant::now() + SLOW;
        loop {
            let seen: BTreeSet<Option<NodeId>> =
                self.running.values().map(|r| r.meta.leader()).collect();
            if let [Some(leader)] = seen.iter().copied().collect::<Vec<_>>()[..] {
                if self.running.contains_key(&leader) {
                    return leader;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no agreed metadata leader within {SLOW:?}: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn follower(&self, leader: NodeId) -> NodeId {
        *self
            .running
            .keys()
            .find(|id| **id != leader)
            .expect("a follower")
    }

    /// Wait until every running node has applied the same state as `of`.
    async fn converged(&self, of: NodeId) {
        let deadline = tokio::time::Instant::now() + SLOW;
        loop {
            let want = self.meta(of).state();
            if self.running.values().all(|r| r.meta.state() == want) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "nodes did not converge on node {of}'s state within {SLOW:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn shutdown(mut self) {
        let ids: Vec<NodeId> = self.running.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
    }
}

/// Open the log store, waiting (bounded) for a previous incarnation of the
/// node in this process to let go of the file.
async fn open_store(path: &Path) -> LogStore {
    let deadline = tokio::time::Instant::now() + SLOW;
    loop {
        match LogStore::open(path, LogStoreOptions::default()) {
            Err(e) if e.is_already_open() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other.expect("log store opens"),
        }
    }
}

async fn declare(meta: &Metadata, name: &str) -> QueueInfo {
    within(SLOW, "declare", meta.declare_queue(name))
        .await
        .unwrap_or_else(|e| panic!("declare {name} on node {}: {e}", meta.node_id()))
}

/// Preferred leaderships and replicas per node.
fn loads(queues: &[QueueInfo]) -> (BTreeMap<NodeId, usize>, BTreeMap<NodeId, usize>) {
    let mut leaders = BTreeMap::new();
    let mut replicas = BTreeMap::new();
    for queue in queues {
        *leaders.entry(queue.members[0]).or_default() += 1;
        for member in &queue.members {
            *replicas.entry(*member).or_default() += 1;
        }
    }
    (leaders, replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declare_through_a_follower_is_seen_everywhere_and_spreads() {
    let h = Harness::start(3, 2).await;
    let leader = h.leader().await;
    let follower = h.follower(leader);

    let first = declare(h.meta(follower), "orders").await;
    assert_eq!(first.members.len(), 2);
    // Read-your-write on the node that declared it (a follower).
    assert_eq!(h.meta(follower).queue("orders"), Some(first.clone()));
    let version = h.meta(follower).version();
    h.converged(leader).await;
    for id in 1..=3 {
        assert_eq!(h.meta(id).queue("orders"), Some(first.clone()), "node {id}");
    }
    // Idempotent, from any node.
    assert_eq!(declare(h.meta(leader), "orders").await, first);
    assert_eq!(h.meta(follower).version(), version);

    // 29 more through every node in turn.
    for i in 1..30 {
        declare(h.meta(1 + i % 3), &format!("q{i}")).await;
    }
    h.converged(leader).await;
    let queues = h.meta(follower).queues();
    assert_eq!(queues.len(), 30);
    let (leaders, replicas) = loads(&queues);
    assert_eq!(leaders, BTreeMap::from([(1, 10), (2, 10), (3, 10)]));
    for (id, n) in &replicas {
        assert!(
            (19..=21).contains(n),
            "node {id} holds {n} replicas: {replicas:?}"
        );
    }
    assert_eq!(h.meta(1).members().len(), 3);
    // A node records where it is (seeded members have no AMQP address).
    assert_eq!(h.meta(3).members()[&3].amqp, None);
    let mut moved_node = info(3);
    moved_node.amqp = Some("127.0.0.1:15672".into());
    within(SLOW, "announce", h.meta(3).announce(moved_node.clone()))
        .await
        .expect("announce");
    h.converged(3).await;
    assert_eq!(h.meta(leader).members().get(&3), Some(&moved_node));

    // Maintenance: move a queue's preferred leader to its other replica.
    let target = first.members[1];
    let moved = within(
        SLOW,
        "move leader",
        h.meta(follower).move_leader("orders", target),
    )
    .await
    .expect("move leader");
    assert_eq!(moved.preferred_leader(), Some(target));
    assert!(matches!(
        h.meta(leader)
            .move_leader("orders", first_non_member(&moved, 3))
            .await,
        Err(MetaError::Refused { .. })
    ));
    // Delete, from another node.
    assert!(h.meta(leader).delete_queue("orders").await.expect("delete"));
    assert!(!h.meta(leader).delete_queue("orders").await.expect("delete"));
    h.converged(leader).await;
    assert_eq!(h.meta(follower).queue("orders"), None);
    h.shutdown().await;
}

fn first_non_member(queue: &QueueInfo, n: NodeId) -> NodeId {
    (1..=n)
        .find(|id| !queue.members.contains(id))
        .expect("a node without a replica")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_recover_from_log_and_snapshot() {
    let mut h = Harness::start(3, 3).await;
    let leader = h.leader().await;
    for i in 0..30 {
        declare(h.meta(leader), &format!("q{i}")).await;
    }
    let follower = h.follower(leader);
    // 30 declarations with a snapshot every 20 entries: the follower has
    // a snapshot file, and its log before it is purged.
    eventually(SLOW, "follower snapshot", || {
        h.snapshot_file(follower).exists()
    })
    .await;
    h.stop(follower).await;
    for i in 30..35 {
        declare(h.meta(leader), &format!("q{i}")).await;
    }
    // The follower comes back: snapshot + its log, then what it missed.
    h.restart(follower).await;
    h.converged(leader).await;
    assert_eq!(h.meta(follower).queues().len(), 35);

    // The whole cluster restarts on its files.
    let before = h.meta(leader).state();
    for id in 1..=3 {
        h.stop(id).await;
    }
    for id in 1..=3 {
        h.restart(id).await;
    }
    let leader = h.leader().await;
    h.converged(leader).await;
    let after = h.meta(leader).state();
    assert_eq!(after.queues, before.queues);
    assert_eq!(after.members, before.members);
    assert!(after.version >= before.version);
    // And it still takes changes.
    declare(h.meta(h.follower(leader)), "after-restart").await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_loss_then_no_quorum() {
    let mut h = Harness::start(3, 3).await;
    let old = h.leader().await;
    declare(h.meta(old), "before").await;
    h.stop(old).await;

    // Two of three: a new leader, and declaring works through both.
    let new = h.leader().await;
    assert_ne!(new, old);
    let other = h.follower(new);
    declare(h.meta(other), "after-1").await;
    declare(h.meta(new), "after-2").await;
    h.converged(new).await;

    // One of three: no quorum; a declaration fails in time, never falsely
    // succeeds.
    h.stop(new).await;
    let started = tokio::time::Instant::now();
    let result = within(
        REQUEST_TIMEOUT * 2,
        "declare without quorum",
        h.meta(other).declare_queue("lost"),
    )
    .await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(MetaError::Unavailable { .. })),
        "{result:?}"
    );
    assert!(
        took < REQUEST_TIMEOUT + Duration::from_secs(3),
        "took {took:?}"
    );
    assert_eq!(h.meta(other).queue("lost"), None);
    h.shutdown().await;
}

/// A graceful stop hands the metadata leadership to a caught-up voter:
/// while the old leader is still running (and would otherwise keep
/// leading), the other two agree on a new leader among themselves, and
/// requests through the stopping node are forwarded there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_leader_hands_the_metadata_group_off() {
    let mut h = Harness::start(3, 3).await;
    let old = h.leader().await;
    declare(h.meta(old), "before").await;
    within(
        SLOW,
        "metadata hand-off",
        h.meta(old).hand_off_before_stopping(),
    )
    .await;
    let others: Vec<NodeId> = h.running.keys().copied().filter(|id| *id != old).collect();
    let mut leader = None;
    eventually(
        Duration::from_secs(2),
        "the others follow a new leader",
        || {
            let seen: BTreeSet<Option<NodeId>> =
                others.iter().map(|id| h.meta(*id).leader()).collect();
            leader = match seen.iter().copied().collect::<Vec<_>>()[..] {
                [Some(l)] if l != old => Some(l),
                _ => None,
            };
            leader.is_some()
        },
    )
    .await;
    let new = leader.unwrap();
    // The stopping node executes nothing itself but still forwards.
    declare(h.meta(old), "through-the-stopping-node").await;
    h.stop(old).await;
    declare(h.meta(new), "after").await;
    assert_eq!(h.leader().await, new, "no further election");
    h.converged(new).await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_without_quorum_times_out_then_recovers() {
    let mut h = Harness::start(3, 3).await;
    let leader = h.leader().await;
    declare(h.meta(leader), "before").await;
    let followers: Vec<NodeId> = (1..=3).filter(|id| *id != leader).collect();
    for id in &followers {
        h.stop(*id).await;
    }
    // The leader still believes it leads: its entry is appended but
    // cannot commit, and the caller hears so in time.
    let started = tokio::time::Instant::now();
    let result = within(
        REQUEST_TIMEOUT * 2,
        "declare on a leader without quorum",
        h.meta(leader).declare_queue("pending"),
    )
    .await;
    assert!(
        matches!(result, Err(MetaError::Unavailable { .. })),
        "{result:?}"
    );
    let took = started.elapsed();
    assert!(
        took < REQUEST_TIMEOUT + Duration::from_secs(3),
        "took {took:?}"
    );
    assert_eq!(h.meta(leader).queue("pending"), None);
    // A follower is back: quorum again. The earlier attempt may now have
    // committed (a time-out is not a refusal); declaring again is safe
    // and every node agrees on the result.
    h.restart(followers[0]).await;
    let leader = h.leader().await;
    let info = declare(h.meta(followers[0]), "pending").await;
    h.converged(leader).await;
    assert_eq!(h.meta(leader).queue("pending"), Some(info));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_a_fourth_node_then_remove_one() {
    let mut h = Harness::start(3, 3).await;
    let leader = h.leader().await;
    for i in 0..30 {
        declare(h.meta(leader), &format!("q{i}")).await;
    }
    // Node 4 joins with an empty initial set and is added from a follower
    // (the request is forwarded to the leader).
    h.open(4, BTreeMap::new()).await;
    let follower = h.follower(leader);
    within(SLOW, "add node 4", h.meta(follower).add_node(4, info(4)))
        .await
        .expect("node 4 added");
    h.converged(leader).await;
    for id in 1..=4 {
        assert_eq!(
            h.meta(id).voters(),
            BTreeSet::from([1, 2, 3, 4]),
            "voters on node {id}"
        );
    }
    assert_eq!(h.meta(4).queues().len(), 30, "node 4 has the whole state");
    // The log before the leader's snapshot was purged, so node 4 got the
    // state as a snapshot (stored like its own).
    assert!(h.snapshot_file(4).exists());
    assert_eq!(h.meta(4).members().get(&4), Some(&info(4)));
    // New queues go to the node with the fewest leaderships: node 4.
    let placed = declare(h.meta(4), "on-four").await;
    assert_eq!(placed.preferred_leader(), Some(4), "{placed:?}");

    // Remove the metadata leader itself, asked from another node.
    let leader = h.leader().await;
    let asker = h.follower(leader);
    within(SLOW, "remove leader", h.meta(asker).remove_node(leader))
        .await
        .expect("node removed");
    h.stop(leader).await;
    let new = h.leader().await;
    h.converged(new).await;
    let remaining: BTreeSet<NodeId> = (1..=4).filter(|id| *id != leader).collect();
    for id in &remaining {
        let meta = h.meta(*id);
        assert_eq!(meta.voters(), remaining, "voters on node {id}");
        assert!(!meta.members().contains_key(&leader));
        for queue in meta.queues() {
            assert_eq!(queue.members.len(), 3, "{queue:?}");
            assert!(!queue.members.contains(&leader), "{queue:?}");
        }
    }
    // Removing it again is a no-op; declaring still works.
    within(SLOW, "remove again", h.meta(new).remove_node(leader))
        .await
        .expect("idempotent removal");
    let last = declare(h.meta(asker), "after-removal").await;
    assert!(!last.members.contains(&leader));

    // A node that died is removed by the two left: queues shrink to the
    // two (nothing to spare) and keep working.
    let dead = *remaining.iter().find(|id| **id != new).expect("a follower");
    h.stop(dead).await;
    within(SLOW, "remove a dead node", h.meta(new).remove_node(dead))
        .await
        .expect("dead node removed");
    let left: BTreeSet<NodeId> = remaining.iter().copied().filter(|id| *id != dead).collect();
    let leader = h.leader().await;
    h.converged(leader).await;
    for id in &left {
        assert_eq!(h.meta(*id).voters(), left, "voters on node {id}");
        for queue in h.meta(*id).queues() {
            let members: BTreeSet<NodeId> = queue.members.iter().copied().collect();
            assert_eq!(members, left, "{queue:?}");
        }
    }
    declare(h.meta(leader), "on-two").await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_never_answers_is_not_added() {
    let h = Harness::start(3, 3).await;
    let leader = h.leader().await;
    declare(h.meta(leader), "before").await;
    // Node 4 is never opened: nothing answers for it. openraft alone would
    // call it caught up (its lag is under the threshold) and make it a
    // voter; the add must be refused and leave the membership as it was.
    let refused = within(SLOW, "add node 4", h.meta(leader).add_node(4, info(4))).await;
    assert!(refused.is_err(), "node 4 was added: {refused:?}");
    for id in 1..=3 {
        assert_eq!(
            h.meta(id).voters(),
            BTreeSet::from([1, 2, 3]),
            "voters on node {id}"
        );
        assert!(
            !h.meta(id).members().contains_key(&4),
            "node {id} lists node 4"
        );
    }
    // The group still commits with its three voters.
    let leader = h.leader().await;
    declare(h.meta(leader), "after").await;
    h.converged(leader).await;
}
