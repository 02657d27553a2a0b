//! Paged quorum queues through a third-party client (fe2o3-amqp), on real
//! files: past the resident budget bodies go to segment files and every
//! message comes back in order after a restart; a flipped byte in a
//! segment is never served; a follower whose data dir was wiped catches up
//! from a streamed snapshot and can then serve the whole queue itself.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::Receiver;
use ramqpd_broker::queue::{Queue, QueueAddress};
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

/// A config that pages nearly everything and snapshots often.
fn paging_config(config: &mut BrokerConfig) {
    config.quorum.resident_budget_bytes = 2 * 1024;
    config.quorum.queue_resident_budget_bytes = 1024;
    config.quorum.segment_max_bytes = 16 * 1024;
    config.quorum.snapshot_every_entries = 1_000_000;
    config.quorum.snapshot_min_log_bytes = 4 * 1024;
    config.quorum.log_entries_kept_after_snapshot = 5;
}

/// [`paging_config`] on a node whose data lives in `dir`.
fn paged_config_in(dir: &std::path::Path) -> BrokerConfig {
    let mut config = BrokerConfig {
        data_dir: Some(dir.to_path_buf()),
        ..BrokerConfig::default()
    };
    paging_config(&mut config);
    config
}

/// [`paged_config_in`] with every body paged and no snapshot on the way
/// (every entry stays in the log's tail), its segments large enough that
/// the store keeps an active segment emptied by a drain (under a quarter
/// full), as it does for a shallow queue.
fn shallow_paged_config_in(dir: &std::path::Path) -> BrokerConfig {
    let mut config = paged_config_in(dir);
    config.quorum.resident_budget_bytes = 0;
    config.quorum.snapshot_min_log_bytes = 64 * 1024 * 1024;
    config.quorum.segment_max_bytes = 1024 * 1024;
    config
}

fn padded(range: std::ops::Range<usize>) -> Vec<String> {
    range
        .map(|i| format!("message {i:05} {}", "x".repeat(60)))
        .collect()
}

/// Wait until the queue's replica on `broker` has snapshotted and purged
/// its log past `index`.
async fn wait_for_purge(broker: &Broker, queue: &str, index: u64) {
    let address = QueueAddress::parse(&format!("/quorum/{queue}")).unwrap();
    let replica = broker.quorum().get(&address).expect("replica here");
    eventually(
        Duration::from_secs(20),
        "a snapshot and a purge",
        || matches!(replica.compaction(), (Some(_), Some(purged)) if purged > index),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_budget_bodies_are_paged_and_all_come_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = paged_config_in(dir.path());
    let broker = Broker::start(config.clone()).await.unwrap();
    let all = padded(0..600);
    assert_eq!(publish(broker.local_addr(), "deep", &all).await, all);
    assert!(
        broker.quorum().resident_bytes() <= 2 * 1024,
        "resident bodies stay within the node budget: {}",
        broker.quorum().resident_bytes()
    );
    let segments = segment_files(dir.path());
    assert!(
        segments.len() >= 2,
        "bodies went to rolled segment files: {segments:?}"
    );
    wait_for_purge(&broker, "deep", 300).await;
    let first = consume(broker.local_addr(), "deep", 150).await;
    assert_eq!(first, padded(0..150));
    broker.shutdown().await;

    // The restart reads the snapshot's index and the segments, not the
    // purged log: every unconsumed message, in order.
    let broker = Broker::start(config).await.unwrap();
    let rest = consume(broker.local_addr(), "deep", 10_000).await;
    assert_eq!(rest, padded(150..600));
    broker.shutdown().await;

    // Fully drained: segment files go once nothing in them is live.
    let broker = Broker::start(paged_config_in(dir.path())).await.unwrap();
    assert!(consume(broker.local_addr(), "deep", 10).await.is_empty());
    broker.shutdown().await;
    assert!(
        segment_files(dir.path()).is_empty(),
        "no segment left after a full drain: {:?}",
        segment_files(dir.path())
    );
}

/// Attach a receiver and take what comes within `quiet` (an attach the
/// broker refuses counts as nothing).
async fn receive_some(addr: std::net::SocketAddr, queue: &str, quiet: Duration) -> Vec<String> {
    let mut connection = open_at(addr, "reader").await;
    let mut session = begin_session(&mut connection).await;
    let attach = Receiver::attach(&mut session, "rx", format!("/quorum/{queue}"));
    let Ok(Ok(mut receiver)) = tokio::time::timeout(Duration::from_secs(10), attach).await else {
        return Vec::new();
    };
    let mut got = Vec::new();
    while let Ok(Ok(delivery)) = tokio::time::timeout(quiet, receiver.recv::<String>()).await {
        got.push(delivery.body().clone());
        let _ = receiver.accept(&delivery).await;
    }
    let _ = receiver.close().await;
    let _ = connection.close().await;
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_a_segment_is_never_served() {
    trace_from_env();
    let dir = tempfile::tempdir().unwrap();
    let mut config = paged_config_in(dir.path());
    config.quorum.resident_budget_bytes = 0;
    // A link to a queue nobody serves is refused after this.
    config.quorum.leader_wait_ms = 1_000;
    let broker = Broker::start(config.clone()).await.unwrap();
    let all = padded(0..300);
    assert_eq!(publish(broker.local_addr(), "flip", &all).await, all);
    wait_for_purge(&broker, "flip", 100).await;
    broker.shutdown().await;

    // Flip one byte in the body of the first record of the oldest segment
    // (its header is 16 bytes), which only the snapshot names now.
    let oldest = segment_files(dir.path())
        .into_iter()
        .next()
        .expect("a segment");
    let mut bytes = std::fs::read(&oldest).unwrap();
    bytes[30] ^= 0x01;
    std::fs::write(&oldest, &bytes).unwrap();
    let broker = Broker::start(config.clone()).await.unwrap();
    let served = receive_some(broker.local_addr(), "flip", Duration::from_secs(2)).await;
    assert!(
        served.is_empty(),
        "nothing is served past a corrupt body: {} served",
        served.len()
    );
    broker.shutdown().await;

    // Put the byte back: every message is still there, in order.
    bytes[30] ^= 0x01;
    std::fs::write(&oldest, &bytes).unwrap();
    let broker = Broker::start(config).await.unwrap();
    assert_eq!(consume(broker.local_addr(), "flip", 10_000).await, all);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_follower_catches_up_from_a_streamed_snapshot_and_serves() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    paging_config(&mut base);
    let mut cluster = Cluster::start(3, base).await.unwrap();
    let all = padded(0..500);
    assert_eq!(publish(cluster.addr(1).unwrap(), "wipe", &all).await, all);
    let leader = cluster.leader_of("wipe").expect("a leader");
    wait_for_purge(cluster.node(leader).unwrap(), "wipe", 200).await;
    let follower = cluster
        .running()
        .into_iter()
        .find(|n| *n != leader)
        .unwrap();

    // Wipe the follower's data dir while it is down.
    let data_dir = cluster.node(follower).unwrap().data_dir().to_path_buf();
    cluster.stop(follower).await;
    for entry in std::fs::read_dir(&data_dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    cluster.restart(follower).await.unwrap();

    // The leader's log no longer has the start: the follower needs the
    // snapshot, bodies and all, and pages them into its own segments.
    let address = QueueAddress::parse("/quorum/wipe").unwrap();
    eventually(
        Duration::from_secs(30),
        "the follower has every message",
        || {
            cluster
                .node(follower)
                .and_then(|b| b.quorum().get(&address))
                .is_some_and(|q| q.stats().ready == all.len())
        },
    )
    .await;
    assert!(
        !segment_files(&data_dir).is_empty(),
        "the follower paged the bodies it received"
    );

    // It can serve the whole queue itself.
    let summary = cluster
        .node(leader)
        .unwrap()
        .quorum()
        .move_leadership(Some("wipe"), Some(follower))
        .await
        .expect("leadership moves to the caught-up follower");
    eprintln!("{summary}");
    let new_leader = wait_for_leader(&cluster, "wipe", Some(leader), Duration::from_secs(10)).await;
    assert_eq!(new_leader, follower);
    let received = consume(cluster.addr(follower).unwrap(), "wipe", 10_000).await;
    assert_eq!(received, all);
    cluster.shutdown().await;
}

/// The log tail a restart replays (entries past the last snapshot) pages
/// its bodies again and then finds them settled. A clean stop snapshots
/// what it applied, so a drained queue restarts with no tail and keeps no
/// segment bytes; before, up to `snapshot_min_log_bytes` of bodies (64 MiB
/// by default) were paged again at every restart and their last, active
/// segment stayed on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_queue_pages_nothing_again_after_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = shallow_paged_config_in(dir.path());
    let broker = Broker::start(config.clone()).await.unwrap();
    let all = padded(0..40);
    assert_eq!(publish(broker.local_addr(), "tail", &all).await, all);
    assert!(!segment_files(dir.path()).is_empty(), "bodies were paged");
    assert_eq!(consume(broker.local_addr(), "tail", 10_000).await, all);
    broker.shutdown().await;

    let broker = Broker::start(config).await.unwrap();
    let address = QueueAddress::parse("/quorum/tail").unwrap();
    let replica = broker.quorum().get(&address).expect("replica here");
    // Everything in the log is applied (a restart's replay included).
    eventually(Duration::from_secs(20), "the log applied", || {
        let status = replica.raft_status();
        status.leading && status.applied_index == status.last_log_index
    })
    .await;
    assert_eq!(replica.stats().ready, 0);
    assert!(
        segment_files(dir.path()).is_empty(),
        "no body paged again after a clean restart: {:?}",
        segment_files(dir.path())
    );
    broker.shutdown().await;
}

/// A paged queue drained and left idle gives back its last, small active
/// segment (the store keeps it while the queue is in use, so a shallow
/// queue does not make a file per message): the node's sweep deletes it
/// once the queue has been empty for a while, and the queue pages into a
/// new one when used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_drained_queue_gives_back_its_last_segment() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(shallow_paged_config_in(dir.path()))
        .await
        .unwrap();
    let all = padded(0..40);
    assert_eq!(publish(broker.local_addr(), "idle", &all).await, all);
    assert_eq!(consume(broker.local_addr(), "idle", 10_000).await, all);
    // Emptied under a quarter full, the store keeps it (`release`); the
    // sweep takes it once the queue has stayed empty.
    eventually(Duration::from_secs(15), "the idle segment deleted", || {
        segment_files(dir.path()).is_empty()
    })
    .await;
    // Used again: a new segment, and every message comes back.
    let again = padded(40..50);
    assert_eq!(publish(broker.local_addr(), "idle", &again).await, again);
    assert_eq!(segment_files(dir.path()).len(), 1, "paged again");
    assert_eq!(consume(broker.local_addr(), "idle", 10_000).await, again);
    broker.shutdown().await;
}
