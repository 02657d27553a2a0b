//! Pipelined AppendEntries (`raft/append_stream.rs`, `raft/append_feed.rs`)
//! on a 3-node in-process cluster: with concurrent publishers (real
//! clients, fe2o3-amqp) a follower has several appends of one group handed
//! to openraft and unanswered at once, every accepted message is delivered
//! once, and the followers' feed tasks end once the queue is idle; with
//! `append_pipeline_depth = 1` (off; the default is 4) no append is pipelined at
//! all.

use crate::common;

use std::time::Duration;

use common::*;
use ramqpd_broker::raft::append_feed::AppendFeedStats;
use ramqpd_broker::{BrokerConfig, Cluster};

const PUBLISHERS: usize = 8;
const EACH: usize = 40;

/// Every running node's feed counters.
fn stats(cluster: &Cluster) -> Vec<(u64, AppendFeedStats)> {
    cluster
        .running()
        .into_iter()
        .filter_map(|id| Some((id, cluster.node(id)?.quorum().append_feed_stats())))
        .collect()
}

/// Publishes PUBLISHERS x EACH messages to `queue` through its leader,
/// concurrently, then consumes them; returns (accepted, lost, duplicates).
async fn publish_and_consume(cluster: &Cluster, queue: &'static str) -> (usize, usize, usize) {
    let first = publish(cluster.addr(1).expect("node 1"), queue, &["first".into()]).await;
    assert_eq!(first, ["first"], "the queue takes its first publish");
    let leader = wait_for_leader(cluster, queue, None, Duration::from_secs(20)).await;
    let addr = cluster.addr(leader).expect("leader runs");
    let mut tasks = Vec::new();
    for p in 0..PUBLISHERS {
        let texts: Vec<String> = (0..EACH).map(|i| format!("p{p}-{i}")).collect();
        tasks.push(tokio::spawn(
            async move { publish(addr, queue, &texts).await },
        ));
    }
    let mut accepted = first;
    for task in tasks {
        accepted.extend(task.await.expect("publisher task"));
    }
    let received = consume_at_least(addr, queue, accepted.len(), Duration::from_secs(30)).await;
    let (lost, duplicates) = check_delivered(&accepted, &received);
    (accepted.len(), lost.len(), duplicates)
}

/// A 3-node cluster sending up to `depth` appends at once, through which
/// every publish to `queue` was accepted and delivered exactly once.
async fn start_and_deliver_all(depth: usize, queue: &'static str) -> Cluster {
    trace_from_env();
    let mut config = BrokerConfig::default();
    config.quorum.append_pipeline_depth = depth;
    let cluster = Cluster::start(3, config).await.expect("cluster starts");
    let (accepted, lost, duplicates) = publish_and_consume(&cluster, queue).await;
    assert_eq!(accepted, 1 + PUBLISHERS * EACH, "every publish accepted");
    assert_eq!(
        (lost, duplicates),
        (0, 0),
        "no accepted message lost or repeated"
    );
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_takes_several_appends_of_a_group_at_once() {
    let cluster = start_and_deliver_all(16, "piped").await;

    let all = stats(&cluster);
    eprintln!("feed counters by node: {all:?}");
    let appends: u64 = all.iter().map(|(_, s)| s.appends).sum();
    let most = all
        .iter()
        .map(|(_, s)| s.max_outstanding)
        .max()
        .unwrap_or(0);
    assert!(appends > 0, "the followers took pipelined appends: {all:?}");
    assert!(
        most >= 2,
        "a follower had several appends of the group in flight at once: {all:?}"
    );

    // Idle: every feed task ends (none is left per group), one small
    // entry per group stays.
    eventually(Duration::from_secs(20), "every feed task ended", || {
        stats(&cluster).iter().all(|(_, s)| s.running == 0)
    })
    .await;
    for (id, s) in stats(&cluster) {
        assert!(
            s.feeds <= 1,
            "node {id} keeps one feed entry per group at most: {s:?}"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_one_sends_one_append_at_a_time() {
    let cluster = start_and_deliver_all(1, "unpiped").await;
    let all = stats(&cluster);
    assert!(
        all.iter().all(|(_, s)| s.appends == 0 && s.tasks == 0),
        "nothing pipelined: {all:?}"
    );
    cluster.shutdown().await;
}
