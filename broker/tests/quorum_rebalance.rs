//! Leaderships back to their preferred node (`quorum/rebalance.rs`) on a
//! 3-node in-process cluster. A node stopped gracefully hands its
//! leaderships to the others; once it is back and caught up, they hand
//! the groups it is the preferred leader of back to it, nothing published
//! meanwhile is lost, and `/metrics/node` counts the moves. An operator's
//! move of a leadership records the new leader as preferred, so the
//! rebalance does not undo it.

use crate::common;

use std::time::Duration;

use common::*;
use ramqpd_broker::{BrokerConfig, Cluster};

const QUEUES: usize = 6;

fn name(i: usize) -> String {
    format!("rebalance{i}")
}

fn config() -> BrokerConfig {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    base.quorum.leader_rebalance_interval_ms = 1000;
    base.http.listen = Some("127.0.0.1:0".parse().expect("an address"));
    base
}

/// The preferred leader of `name` in the metadata as node `at` has it.
fn preferred(cluster: &Cluster, at: u64, name: &str) -> Option<u64> {
    cluster
        .node(at)?
        .metadata()
        .queue(name)
        .and_then(|info| info.members.first().copied())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_gets_its_preferred_leaderships_back() {
    let mut cluster = Cluster::start(3, config()).await.unwrap();
    for i in 0..QUEUES {
        publish(cluster.addr(1).expect("runs"), &name(i), &[]).await;
    }
    let wanted: Vec<u64> = (0..QUEUES)
        .map(|i| preferred(&cluster, 1, &name(i)).expect("declared"))
        .collect();
    // A new group's first leader is its preferred one.
    eventually(
        Duration::from_secs(20),
        "every queue led by its preferred node",
        || (0..QUEUES).all(|i| cluster.leader_of(&name(i)) == Some(wanted[i])),
    )
    .await;
    let victim = wanted[0];
    let its: Vec<usize> = (0..QUEUES).filter(|i| wanted[*i] == victim).collect();
    let survivors: Vec<u64> = (1..=3).filter(|id| *id != victim).collect();

    cluster.stop(victim).await;
    eventually(
        Duration::from_secs(30),
        "the survivors lead every queue",
        || (0..QUEUES).all(|i| cluster.leader_of(&name(i)).is_some_and(|l| l != victim)),
    )
    .await;
    for i in 0..QUEUES {
        let text = format!("m{i}");
        let got = publish(
            cluster.addr(survivors[i % 2]).expect("runs"),
            &name(i),
            std::slice::from_ref(&text),
        )
        .await;
        assert_eq!(
            got,
            [text],
            "queue {i} takes a publish with node {victim} away"
        );
    }

    cluster.restart(victim).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the restarted node leads its preferred queues again",
        || {
            its.iter()
                .all(|i| cluster.leader_of(&name(*i)) == Some(victim))
        },
    )
    .await;
    let moved: u64 = survivors
        .iter()
        .map(|id| cluster.node(*id).unwrap().quorum().leader_rebalance().moved)
        .sum();
    assert!(
        moved >= its.len() as u64,
        "{moved} hand-backs counted for {} queues",
        its.len()
    );
    let mut shown = 0.0;
    for id in &survivors {
        let http = cluster.node(*id).unwrap().http_addr().expect("HTTP on");
        shown += node_sample(http, "ramqp_raft_leaderships_rebalanced_total").await;
    }
    assert!(
        shown >= moved as f64,
        "/metrics/node shows {shown}, counted {moved}"
    );
    // Nothing published while the node was away is lost by the moves.
    for i in 0..QUEUES {
        let got = consume(cluster.addr(victim).expect("runs"), &name(i), 1).await;
        assert_eq!(got, [format!("m{i}")], "queue {i} after the rebalance");
    }

    // An operator moves one of them away without naming a target: the
    // new leader becomes the preferred one, so the rebalance keeps it.
    let queue = name(its[0]);
    let summary = within(
        Duration::from_secs(20),
        "move_leadership",
        cluster
            .node(victim)
            .unwrap()
            .quorum()
            .move_leadership(Some(&queue), None),
    )
    .await
    .expect("leadership moves");
    eprintln!("{summary}");
    eventually(
        Duration::from_secs(10),
        "another node leads, recorded as the preferred one on every node",
        || {
            let leader = cluster.leader_of(&queue);
            leader.is_some_and(|l| l != victim)
                && (1..=3).all(|id| preferred(&cluster, id, &queue) == leader)
        },
    )
    .await;
    cluster.shutdown().await;
}
