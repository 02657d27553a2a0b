//! A quorum queue's policy decisions are its leader's and every replica
//! agrees, on an embedded 3-node cluster: only the leader has the policies
//! (the followers' sets are empty), yet
//!
//! - drop-head leaves the same 3 newest messages on every replica, and a
//!   consumer served by a new leader (the old one stopped) gets exactly
//!   those;
//! - messages expired under the leader's `message_ttl_ms` leave every
//!   replica (depth 0 everywhere), through the log;
//! - a publish the leader refuses (reject-publish) enters no replica.

use crate::common;

use std::time::Duration;

use common::*;
use ramqpd_broker::config::{Overflow, PolicyConfig};
use ramqpd_broker::{BrokerConfig, Cluster};

/// The depth (ready + unsettled) of `/quorum/<name>` on each running node.
fn depths(cluster: &Cluster, name: &str) -> Vec<usize> {
    cluster
        .running()
        .into_iter()
        .map(|id| replica_stats(cluster, id, name).map_or(usize::MAX, |s| s.ready + s.unsettled))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_follow_the_leaders_decisions() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    let mut cluster = Cluster::start(3, base).await.expect("cluster starts");
    // The queues exist (on all three nodes) before any policy.
    for name in ["drop", "ttl", "capped"] {
        let sent = publish(cluster.addr(1).unwrap(), name, &texts(0..1)).await;
        assert_eq!(sent.len(), 1, "{name}");
        let drained = consume(cluster.addr(1).unwrap(), name, 1).await;
        assert_eq!(drained.len(), 1, "{name}");
    }
    let leader = wait_for_leader(&cluster, "drop", None, Duration::from_secs(10)).await;
    for name in ["ttl", "capped"] {
        // One leader for all three keeps the test simple: move them there.
        let queue_leader = wait_for_leader(&cluster, name, None, Duration::from_secs(10)).await;
        if queue_leader != leader {
            let node = cluster.node(queue_leader).unwrap();
            node.quorum()
                .move_leadership(Some(name), Some(leader))
                .await
                .expect("leadership moves");
        }
        eventually(Duration::from_secs(10), "one leader for all", || {
            cluster.leader_of(name) == Some(leader)
        })
        .await;
    }
    let policies = vec![
        PolicyConfig {
            pattern: "/quorum/drop".into(),
            max_length: Some(3),
            overflow: Overflow::DropHead,
            ..PolicyConfig::default()
        },
        PolicyConfig {
            pattern: "/quorum/ttl".into(),
            message_ttl_ms: Some(300),
            ..PolicyConfig::default()
        },
        PolicyConfig {
            pattern: "/quorum/capped".into(),
            max_length: Some(2),
            ..PolicyConfig::default()
        },
    ];
    cluster
        .node(leader)
        .unwrap()
        .set_policies(&policies)
        .unwrap();
    for id in cluster.running() {
        if id != leader {
            assert_eq!(cluster.node(id).unwrap().set_policies(&[]), Ok(0));
        }
    }
    let at_leader = cluster.addr(leader).unwrap();

    assert_eq!(publish(at_leader, "drop", &texts(0..6)).await.len(), 6);
    assert_eq!(publish(at_leader, "ttl", &texts(0..2)).await.len(), 2);
    // The leader takes 2, refuses the third: no replica holds it.
    assert_eq!(publish(at_leader, "capped", &texts(0..3)).await.len(), 2);

    eventually(
        Duration::from_secs(10),
        "every replica dropped the head",
        || depths(&cluster, "drop") == [3, 3, 3],
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "every replica expired them",
        || depths(&cluster, "ttl") == [0, 0, 0],
    )
    .await;
    // (Followers apply the two accepted ones a little after the commit.)
    eventually(Duration::from_secs(10), "two on every replica", || {
        depths(&cluster, "capped") == [2, 2, 2]
    })
    .await;

    // A new leader serves exactly the newest three.
    cluster.stop(leader).await;
    let other = cluster.running()[0];
    let survivors = consume_at_least(
        cluster.addr(other).unwrap(),
        "drop",
        3,
        Duration::from_secs(15),
    )
    .await;
    assert_eq!(survivors, texts(3..6));
    cluster.shutdown().await;
}
