//! Quorum queues placed by the cluster metadata, on in-process clusters
//! (`ramqpd_broker::Cluster`, metadata group included): leaders spread over the
//! nodes; leadership moved to a named node and handed off on a graceful
//! stop under a running publisher and consumer (nothing lost, pause
//! printed); a replica set changed through the metadata (a node removed)
//! becomes the group's voters and keeps the messages.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::{BrokerConfig, Cluster};

fn config() -> BrokerConfig {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    base.quorum.leader_wait_ms = 5000;
    base
}

fn address(name: &str) -> QueueAddress {
    QueueAddress::parse(&format!("/quorum/{name}")).unwrap()
}

/// The metadata's members of `name` as node `id` sees them.
fn members_at(cluster: &Cluster, id: u64, name: &str) -> Option<Vec<u64>> {
    cluster
        .node(id)?
        .metadata()
        .queue(name)
        .map(|info| info.members)
}

/// The voters of `name`'s group at its current leader.
fn voters_at_leader(cluster: &Cluster, name: &str) -> Option<BTreeSet<u64>> {
    let leader = cluster.leader_of(name)?;
    let queue = cluster.node(leader)?.quorum().get(&address(name))?;
    Some(queue.voters().into_iter().collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_of_thirty_queues_spread_over_three_nodes() {
    let cluster = Cluster::start(3, config()).await.unwrap();
    let names: Vec<String> = (0..30).map(|i| format!("spread-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        // Declared by attaching through a different node each time.
        let via = cluster.addr(i as u64 % 3 + 1).unwrap();
        publish(via, name, &[]).await;
    }
    let mut leads: BTreeMap<u64, usize> = BTreeMap::new();
    for name in &names {
        let leader = wait_for_leader(&cluster, name, None, Duration::from_secs(15)).await;
        *leads.entry(leader).or_default() += 1;
        let members = members_at(&cluster, 1, name).expect("declared");
        eventually(Duration::from_secs(10), "every node agrees", || {
            (1..=3).all(|n| members_at(&cluster, n, name).as_ref() == Some(&members))
        })
        .await;
        let want: BTreeSet<u64> = members.iter().copied().collect();
        assert_eq!(voters_at_leader(&cluster, name), Some(want), "{name}");
        assert_eq!(
            Some(leader),
            members.first().copied(),
            "{name}: the preferred leader leads"
        );
    }
    eprintln!("leaders per node: {leads:?}");
    for node in 1..=3 {
        assert!(
            leads.get(&node).copied().unwrap_or(0) >= 5,
            "node {node} leads too few: {leads:?}"
        );
    }
    cluster.shutdown().await;
}

/// A publisher and a consumer on `clients` for `queue`.
struct Load {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    publisher: tokio::task::JoinHandle<Result<Vec<String>, String>>,
    consumer: tokio::task::JoinHandle<Result<Vec<String>, String>>,
}

impl Load {
    async fn start(addr: SocketAddr, queue: &'static str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let publisher = tokio::spawn(keep_publishing(addr, queue, stop.clone(), counts.clone()));
        let consumer = tokio::spawn(keep_consuming(addr, queue, stop.clone(), counts.clone()));
        let load = Load {
            stop,
            counts,
            publisher,
            consumer,
        };
        load.more(50, "publishing starts").await;
        load
    }

    fn accepted(&self) -> usize {
        self.counts.accepted()
    }

    /// Watch the accepted count until `n` more are accepted: the longest
    /// time without a new accept (what the publisher saw as the pause).
    fn longest_gap(&self, n: usize) -> tokio::task::JoinHandle<Duration> {
        let counts = self.counts.clone();
        tokio::spawn(async move {
            let want = counts.accepted() + n;
            let mut last = (counts.accepted(), Instant::now());
            let mut longest = Duration::ZERO;
            let deadline = Instant::now() + Duration::from_secs(30);
            while last.0 < want && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let now = counts.accepted();
                if now > last.0 {
                    longest = longest.max(last.1.elapsed());
                    last = (now, Instant::now());
                }
            }
            longest
        })
    }

    /// Wait until `n` more publishes are accepted.
    async fn more(&self, n: usize, what: &str) {
        let want = self.accepted() + n;
        eventually(Duration::from_secs(20), what, || self.accepted() >= want).await;
    }

    /// Stop both clients; check nothing accepted was lost.
    async fn finish(self, what: &str) {
        self.stop.store(true, Ordering::Relaxed);
        let accepted = within(Duration::from_secs(30), "publisher ends", self.publisher)
            .await
            .unwrap()
            .expect("the publisher's link was never detached");
        let received = within(Duration::from_secs(60), "consumer ends", self.consumer)
            .await
            .unwrap()
            .expect("the consumer's link was never detached");
        let (lost, duplicates) = check_delivered(&accepted, &received);
        eprintln!(
            "{what}: accepted {}, received {}, duplicates {duplicates}, lost {}",
            accepted.len(),
            received.len(),
            lost.len()
        );
        assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_moves_to_a_named_node_under_load() {
    let cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "moving", &[]).await;
    let (leader, target, clients) = roles(&cluster, "moving", Duration::from_secs(15)).await;
    let load = Load::start(cluster.addr(clients).unwrap(), "moving").await;
    let gap = load.longest_gap(100);
    let before = load.accepted();
    let started = Instant::now();
    let summary = within(
        Duration::from_secs(20),
        "move_leadership",
        cluster
            .node(leader)
            .unwrap()
            .quorum()
            .move_leadership(Some("moving"), Some(target)),
    )
    .await
    .expect("leadership moves");
    let moved_in = started.elapsed();
    eventually(Duration::from_secs(20), "publishing resumes", || {
        load.accepted() > before
    })
    .await;
    load.more(50, "publishing goes on").await;
    let gap = within(Duration::from_secs(40), "gap monitor", gap)
        .await
        .unwrap();
    eprintln!(
        "move {leader} -> {target} (clients on {clients}): {summary}; call took {moved_in:?}, \
         longest publisher pause {gap:?}"
    );
    assert_eq!(
        cluster.leader_of("moving"),
        Some(target),
        "the target leads"
    );
    assert_eq!(
        members_at(&cluster, clients, "moving").and_then(|m| m.first().copied()),
        Some(target),
        "the metadata records the target as the preferred leader"
    );
    load.finish("move").await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gracefully_stopped_leader_hands_off_under_load() {
    let mut cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "handoff", &[]).await;
    let (leader, _, clients) = roles(&cluster, "handoff", Duration::from_secs(15)).await;
    let load = Load::start(cluster.addr(clients).unwrap(), "handoff").await;
    let gap = load.longest_gap(100);
    let before = load.accepted();
    let started = Instant::now();
    cluster.stop(leader).await;
    let stopped_in = started.elapsed();
    let new_leader = wait_for_leader(&cluster, "handoff", None, Duration::from_secs(10)).await;
    let leader_in = started.elapsed();
    eventually(Duration::from_secs(20), "publishing resumes", || {
        load.accepted() > before
    })
    .await;
    load.more(50, "publishing goes on").await;
    let gap = within(Duration::from_secs(40), "gap monitor", gap)
        .await
        .unwrap();
    eprintln!(
        "graceful stop of leader {leader} (clients on {clients}): stop took {stopped_in:?}, \
         new leader {new_leader:?} seen after {leader_in:?}, longest publisher pause {gap:?}"
    );
    assert!(
        leader_in < Duration::from_secs(6),
        "no leader for {leader_in:?}"
    );
    load.finish("graceful stop").await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_node_moves_its_replica_and_keeps_the_messages() {
    let mut cluster = Cluster::start(4, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "resized", &[]).await;
    let leader = wait_for_leader(&cluster, "resized", None, Duration::from_secs(15)).await;
    let members = members_at(&cluster, leader, "resized").expect("declared");
    assert_eq!(members.len(), 3, "replication factor 3 of 4 nodes");
    let accepted = publish(cluster.addr(leader).unwrap(), "resized", &texts(0..100)).await;
    assert_eq!(accepted.len(), 100);
    let victim = *members.iter().find(|n| **n != leader).unwrap();
    cluster.stop(victim).await;
    within(
        Duration::from_secs(60),
        "remove_node",
        cluster.node(leader).unwrap().metadata().remove_node(victim),
    )
    .await
    .expect("node removed");
    let mut now = Vec::new();
    eventually(Duration::from_secs(10), "a replacement replica", || {
        now = members_at(&cluster, leader, "resized").unwrap_or_default();
        !now.contains(&victim) && now.len() == 3
    })
    .await;
    let want: BTreeSet<u64> = now.iter().copied().collect();
    eventually(
        Duration::from_secs(30),
        "the group's voters follow the metadata",
        || voters_at_leader(&cluster, "resized").as_ref() == Some(&want),
    )
    .await;
    eprintln!("members {members:?} -> {now:?} after removing node {victim}");
    let added = *now.iter().find(|n| !members.contains(n)).unwrap();
    let more = publish(cluster.addr(added).unwrap(), "resized", &texts(100..120)).await;
    let mut all = accepted;
    all.extend(more);
    let received = consume(cluster.addr(added).unwrap(), "resized", 1000).await;
    let (lost, duplicates) = check_delivered(&all, &received);
    eprintln!(
        "accepted {}, received {}, duplicates {duplicates}",
        all.len(),
        received.len()
    );
    assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    cluster.shutdown().await;
}
