//! A leader's node found not running (`PeerLiveness::gone`, from the
//! transport: nothing listens for it) is succeeded at once
//! (`follower_tick.rs`, `Visit::succeed`): the group's successor takes
//! over as if handed the leadership, without waiting out the dead
//! leader's lease, which a follower that heard its leader just before the
//! crash would otherwise wait (`election_timeout_max`, then an election
//! time-out). On a 3-node in-process cluster with the default Raft
//! timings: a queue's leader crashes right after a publish; a survivor
//! leads, counted as a succession, and every message accepted before
//! the crash is there. And a leader that goes silent right after a
//! publish (cut off: its node is lost, not found not running) is
//! succeeded the moment its lease runs out (`follower_tick.rs`,
//! `lease_ran_out`), counted as such.

use crate::common;

use std::time::Duration;

use common::*;
use ramqpd_broker::{BrokerConfig, Cluster};
use tokio::time::Instant;

const QUEUE: &str = "succession";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leaders_group_is_taken_over_without_waiting_out_its_lease() {
    trace_from_env();
    // `[quorum] lost_when_not_listening` is on by default.
    let config = BrokerConfig::default();
    let mut cluster = Cluster::start_lossy(3, config).await.unwrap();
    publish(cluster.addr(1).expect("runs"), QUEUE, &[]).await;
    let victim = wait_for_leader(&cluster, QUEUE, None, Duration::from_secs(20)).await;
    let survivors: Vec<u64> = (1..=3).filter(|id| *id != victim).collect();
    // Quiet: its leader idles without heartbeats, which it does only once
    // node-level liveness has heard every voter's node.
    let address = ramqpd_broker::queue::QueueAddress::parse(&format!("/quorum/{QUEUE}")).unwrap();
    eventually(
        Duration::from_secs(30),
        "the queue's leader goes quiet",
        || {
            cluster
                .node(victim)
                .and_then(|node| node.quorum().get(&address))
                .is_some_and(|queue| queue.is_quiet())
        },
    )
    .await;
    let successions = |cluster: &Cluster| -> u64 {
        survivors
            .iter()
            .filter_map(|id| cluster.node(*id))
            .map(|node| node.quorum().successions())
            .sum()
    };
    assert_eq!(successions(&cluster), 0);

    // Published through a survivor: the followers heard their leader a
    // moment before the crash, so its lease is fresh.
    let texts: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    let got = publish(cluster.addr(survivors[0]).expect("runs"), QUEUE, &texts).await;
    assert_eq!(got, texts, "accepted before the crash");
    cluster.crash(victim).await.unwrap();
    let crashed = Instant::now();
    eventually(
        Duration::from_secs(30),
        "a survivor leads the queue",
        || cluster.leader_of(QUEUE).is_some_and(|l| l != victim),
    )
    .await;
    eprintln!(
        "led again {:?} after the crash returned (lease {} ms)",
        crashed.elapsed(),
        BrokerConfig::default().quorum.election_timeout_max_ms
    );
    assert!(
        successions(&cluster) >= 1,
        "the successor took over as a succession"
    );
    let got = consume_at_least(
        cluster.addr(survivors[1]).expect("runs"),
        QUEUE,
        texts.len(),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(got, texts, "nothing accepted is lost");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_leaders_group_is_taken_over_when_its_lease_runs_out() {
    trace_from_env();
    let queue = "silent";
    let cluster = Cluster::start_lossy(3, BrokerConfig::default())
        .await
        .unwrap();
    publish(cluster.addr(1).expect("runs"), queue, &[]).await;
    let victim = wait_for_leader(&cluster, queue, None, Duration::from_secs(20)).await;
    let survivors: Vec<u64> = (1..=3).filter(|id| *id != victim).collect();
    let seen_by = |cluster: &Cluster, id: u64| leader_seen_by(cluster, id, queue);
    let campaigns = |cluster: &Cluster| -> u64 {
        survivors
            .iter()
            .filter_map(|id| cluster.node(*id))
            .map(|node| node.quorum().lease_campaigns())
            .sum()
    };
    eventually(Duration::from_secs(20), "every replica knows it", || {
        survivors
            .iter()
            .all(|s| seen_by(&cluster, *s) == Some(victim))
    })
    .await;
    assert_eq!(campaigns(&cluster), 0);

    // Traffic just before the cut: the followers' leases are fresh.
    let texts: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    let got = publish(cluster.addr(survivors[0]).expect("runs"), queue, &texts).await;
    assert_eq!(got, texts, "accepted before the cut");
    for s in &survivors {
        cluster.set_partitioned(victim, *s, true);
    }
    let cut = Instant::now();
    eventually(
        Duration::from_secs(30),
        "a survivor leads the queue",
        || {
            survivors
                .iter()
                .any(|s| seen_by(&cluster, *s).is_some_and(|l| l != victim))
        },
    )
    .await;
    eprintln!(
        "led again {:?} after the cut (lease {} ms)",
        cut.elapsed(),
        BrokerConfig::default().quorum.election_timeout_max_ms
    );
    assert!(
        campaigns(&cluster) >= 1,
        "the successor campaigned as the lease ran out"
    );
    assert_eq!(
        cluster.node(survivors[0]).unwrap().quorum().successions(),
        0
    );
    let got = consume_at_least(
        cluster.addr(survivors[1]).expect("runs"),
        queue,
        texts.len(),
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(got, texts, "nothing accepted is lost");
    for s in &survivors {
        cluster.set_partitioned(victim, *s, false);
    }
    cluster.shutdown().await;
}
