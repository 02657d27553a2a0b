//! The vote guard (`quorum/vote_guard.rs`) on a 3-node in-process
//! cluster with the default Raft timings. A quiet queue sends no
//! heartbeats, so its followers hold no leader lease: when one node is
//! cut from the leader alone, it campaigns, and the follower that still
//! hears the leader (node liveness) must refuse it. Leader and term stay
//! on the leader's side, which serves a publish through a real client
//! (fe2o3-amqp); once the cut heals, all three agree on one leader, which
//! serves both messages.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::quorum::QuorumQueue;
use ramqpd_broker::{BrokerConfig, Cluster};

const QUEUE: &str = "guarded";

fn replica(cluster: &Cluster, id: u64) -> Option<Arc<QuorumQueue>> {
    let address = QueueAddress::parse(&format!("/quorum/{QUEUE}")).unwrap();
    cluster.node(id)?.quorum().get(&address)
}

/// (leader, term) as node `id`'s replica sees them.
fn seen_by(cluster: &Cluster, id: u64) -> Option<(Option<u64>, u64)> {
    replica(cluster, id).map(|q| {
        let status = q.raft_status();
        (status.leader, status.term)
    })
}

/// The leader and term, if all three replicas agree on them.
fn agreed(cluster: &Cluster) -> Option<(u64, u64)> {
    let first = seen_by(cluster, 1)?;
    let leader = first.0?;
    (2..=3)
        .all(|id| seen_by(cluster, id) == Some(first))
        .then_some((leader, first.1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_hears_its_quiet_leader_refuses_a_cut_off_candidate() {
    trace_from_env();
    let config = BrokerConfig::default();
    let election_max = Duration::from_millis(config.quorum.election_timeout_max_ms);
    let cluster = Cluster::start_lossy(3, config).await.unwrap();
    let addr = |c: &Cluster, id: u64| c.addr(id).expect("node runs");
    let first = publish(addr(&cluster, 1), QUEUE, &["first".to_string()]).await;
    assert_eq!(first, ["first"]);
    eventually(Duration::from_secs(30), "the queue quiet", || {
        agreed(&cluster)
            .and_then(|(leader, _)| replica(&cluster, leader))
            .is_some_and(|q| q.is_quiet())
    })
    .await;
    let (leader, term) = agreed(&cluster).unwrap();
    let mut others = (1..=3).filter(|id| *id != leader);
    let (cut, follower) = (others.next().unwrap(), others.next().unwrap());

    cluster.set_partitioned(leader, cut, true);
    // The cut node loses the leader and campaigns: its term rises.
    eventually(election_max * 4, "the cut-off node campaigns", || {
        seen_by(&cluster, cut).is_some_and(|(_, t)| t > term)
    })
    .await;
    // The follower refuses it: for three election time-outs more, the
    // leader and the follower keep the leader and the term.
    holds_for(
        election_max * 3,
        "leader and follower keep their leader and term",
        || {
            seen_by(&cluster, leader) == Some((Some(leader), term))
                && seen_by(&cluster, follower) == Some((Some(leader), term))
        },
    )
    .await;
    let during = publish(addr(&cluster, leader), QUEUE, &["during".to_string()]).await;
    assert_eq!(during, ["during"], "the leader serves during the cut");

    cluster.set_partitioned(leader, cut, false);
    eventually(election_max * 6, "all three agree on a leader", || {
        agreed(&cluster).is_some()
    })
    .await;
    let (now, _) = agreed(&cluster).unwrap();
    let out = consume_at_least(addr(&cluster, now), QUEUE, 2, Duration::from_secs(20)).await;
    assert_eq!(out, ["first", "during"]);
    cluster.shutdown().await;
}
