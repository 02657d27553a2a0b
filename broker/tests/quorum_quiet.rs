//! Quiet quorum groups (`quorum/quiet.rs`) on a 3-node in-process cluster
//! with the default Raft timings: once idle, every queue's leader stops
//! heartbeating (its followers take no AppendEntries for seconds) and
//! nothing is elected; a publish through a real client (fe2o3-amqp) wakes
//! a quiet queue and is accepted and delivered (a quiet leader closes its
//! replication streams and heartbeat workers and ends its proposer, and
//! makes them again when woken); when a node dies (cut off
//! from both others, then crashed), every
//! queue it led gets a new leader within the election time-out although
//! its followers had not heard from it for seconds (node-level liveness,
//! `quorum/peer_liveness.rs`), and the queues it did not lead keep their
//! leaders; with it down the survivors' groups go quiet again and their
//! streams to it wait for it instead of retrying, and once it restarts
//! they wake, bring it up to date and go quiet.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::quorum::QuorumQueue;
use ramqpd_broker::{BrokerConfig, Cluster};

const QUEUES: usize = 24;

fn name(i: usize) -> String {
    format!("quiet{i}")
}

/// Every running node's replica of queue `i`.
fn replicas(cluster: &Cluster, i: usize) -> Vec<(u64, Arc<QuorumQueue>)> {
    let address = QueueAddress::parse(&format!("/quorum/{}", name(i))).unwrap();
    cluster
        .running()
        .into_iter()
        .filter_map(|id| Some((id, cluster.node(id)?.quorum().get(&address)?)))
        .collect()
}

/// Queue `i`'s leader and term, if every running replica agrees on them.
fn agreed(cluster: &Cluster, i: usize) -> Option<(u64, u64)> {
    agreed_without(cluster, i, 0)
}

/// The same, leaving node `out`'s replica out.
fn agreed_without(cluster: &Cluster, i: usize, out: u64) -> Option<(u64, u64)> {
    let status: Vec<_> = replicas(cluster, i)
        .iter()
        .filter(|(id, _)| *id != out)
        .map(|(_, q)| q.raft_status())
        .collect();
    let first = status.first()?;
    let leader = first.leader?;
    status
        .iter()
        .all(|s| s.leader == Some(leader) && s.term == first.term)
        .then_some((leader, first.term))
}

/// Whether queue `i`'s leader is quiet and its followers heard no
/// AppendEntries for `silent` at least.
fn quiet_for(cluster: &Cluster, i: usize, silent: Duration) -> bool {
    let Some((leader, _)) = agreed(cluster, i) else {
        return false;
    };
    replicas(cluster, i).iter().all(|(id, q)| {
        if *id == leader {
            q.is_quiet()
        } else {
            q.last_append_age().is_some_and(|age| age >= silent)
        }
    })
}

/// Waits (30 s at most) until every queue is quiet with its followers
/// silent for `silent`; then each queue's agreed leader and term.
async fn await_quiet(cluster: &Cluster, silent: Duration, what: &str) -> Vec<(u64, u64)> {
    eventually(Duration::from_secs(30), what, || {
        (0..QUEUES).all(|i| quiet_for(cluster, i, silent))
    })
    .await;
    (0..QUEUES)
        .map(|i| agreed(cluster, i).expect("agreed"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_groups_go_quiet_wake_on_a_publish_and_fail_over_without_heartbeats() {
    trace_from_env();
    let config = BrokerConfig::default();
    let election_max = Duration::from_millis(config.quorum.election_timeout_max_ms);
    let heartbeat = Duration::from_millis(config.quorum.heartbeat_interval_ms);
    let mut cluster = Cluster::start_lossy(3, config).await.unwrap();
    let addr = |c: &Cluster, id: u64| c.addr(id).expect("node runs");
    for i in 0..QUEUES {
        let text = format!("first {i}");
        let got = publish(
            addr(&cluster, (i % 3) as u64 + 1),
            &name(i),
            std::slice::from_ref(&text),
        )
        .await;
        assert_eq!(got, [text], "queue {i} takes a publish");
    }
    // Awake (the last publish is well within the 2 s a leader waits before
    // it goes quiet), leaders hold connections to their peers: the count
    // that must reach 0 below counts real ones.
    let open: usize = (1..=3)
        .map(|id| cluster.node(id).unwrap().quorum().raft_clients_open())
        .sum();
    assert!(
        open > 0,
        "no peer connection counted while queues are awake"
    );

    // Idle: every leader goes quiet and its followers stop hearing it
    // (four heartbeat intervals without an AppendEntries).
    let before = await_quiet(&cluster, heartbeat * 4, "every queue quiet").await;
    // A quiet cluster holds no elections and sends no heartbeats: the
    // followers' silence keeps growing, leaders and terms stay.
    holds_for(
        Duration::from_secs(5),
        "quiet queues stay quiet, with their leaders and terms",
        || {
            (0..QUEUES).all(|i| {
                agreed(&cluster, i) == Some(before[i]) && quiet_for(&cluster, i, heartbeat * 4)
            })
        },
    )
    .await;
    // A quiet group's data metrics, asked for the first time, show its log
    // (openraft makes that channel on demand and fills it in).
    for (_, replica) in replicas(&cluster, 0) {
        let last = replica.raft_status().last_log_index;
        let shown = replica.data_metrics_last_log(Duration::from_secs(5)).await;
        assert_eq!(shown, last, "the data metrics of a quiet replica");
    }
    assert!(
        (0..QUEUES).all(|i| quiet_for(&cluster, i, Duration::from_secs(5))),
        "no follower took an AppendEntries for the 5 s window"
    );
    // Settled, no replica is visited by its node's driver any more
    // (`quorum/visits.rs`): an idle group costs nothing there.
    for id in 1..=3 {
        let visited = cluster.node(id).unwrap().quorum().replicas_visited();
        assert_eq!(
            visited, 0,
            "node {id}'s driver still visits {visited} replicas"
        );
    }
    // Settled, each quiet leader's core was told to quiesce: it closed its
    // replication streams and heartbeat workers, so no group holds a
    // connection to a peer (the publish below makes them again).
    let all_closed =
        |c: &Cluster| (1..=3).all(|id| c.node(id).unwrap().quorum().raft_clients_open() == 0);
    eventually(
        Duration::from_secs(10),
        "every quiet leader closed its peer connections",
        || all_closed(&cluster),
    )
    .await;
    // And its proposer ended (each queue took a publish, so each leader
    // had one): the publish below starts another.
    for i in 0..QUEUES {
        for (id, q) in replicas(&cluster, i) {
            assert!(
                !q.proposer_running(),
                "queue {i}'s proposer still runs on node {id}"
            );
        }
    }

    // A publish through a real client wakes a quiet queue (through a node
    // that does not lead it: forwarded), is accepted and is delivered.
    let (leader0, _) = before[0];
    let other = if leader0 == 1 { 2 } else { 1 };
    let got = publish(addr(&cluster, other), &name(0), &["woken".to_string()]).await;
    assert_eq!(got, ["woken"], "a quiet queue takes a publish");
    // Woken: back on its leader's list until it settles again.
    eventually(
        Duration::from_secs(5),
        "the woken leader is visited",
        || cluster.node(leader0).unwrap().quorum().replicas_visited() > 0,
    )
    .await;
    let out = consume_at_least(
        addr(&cluster, leader0),
        &name(0),
        2,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(out, ["first 0", "woken"]);

    // Cut off the node that leads the most queues from both others (to
    // them it is dead; the test cannot watch the cluster while a crash
    // runs): each of its queues gets a new leader within the election
    // time-out, the others keep theirs.
    let before = await_quiet(&cluster, heartbeat * 2, "every queue quiet again").await;
    eventually(
        Duration::from_secs(10),
        "the woken leader closed its peer connections again",
        || all_closed(&cluster),
    )
    .await;
    let mut led: HashMap<u64, usize> = HashMap::new();
    for (leader, _) in &before {
        *led.entry(*leader).or_default() += 1;
    }
    let (&victim, &count) = led.iter().max_by_key(|(_, n)| **n).unwrap();
    let others: Vec<u64> = (1..=3).filter(|id| *id != victim).collect();
    let cut = Instant::now();
    for other in &others {
        cluster.set_partitioned(victim, *other, true);
    }
    let mut moved = vec![None; QUEUES];
    // Bounded for correctness, not speed: with no fail-over (a follower
    // that never takes its tick back, trusting a lost leader) no queue
    // moves at all. How fast it is (nominally loss detection, 1.25 s, + a
    // driver visit + a tick) is measured by bench-compare/many_queues.sh;
    // on the shared 2-core machine single runs took 1.6-4.5 s.
    eventually(
        election_max * 3,
        "every queue of the cut-off node has a new leader",
        || {
            for i in 0..QUEUES {
                if before[i].0 == victim && moved[i].is_none() {
                    moved[i] = agreed_without(&cluster, i, victim)
                        .filter(|(l, _)| *l != victim)
                        .map(|(l, _)| (l, cut.elapsed()));
                }
            }
            (0..QUEUES).all(|i| before[i].0 != victim || moved[i].is_some())
        },
    )
    .await;
    let slowest = moved.iter().flatten().map(|(_, t)| *t).max().unwrap();
    eprintln!("node {victim} led {count} of {QUEUES} queues; all had a new leader {slowest:?} after the cut");
    for (i, was) in before.iter().enumerate() {
        if was.0 != victim {
            assert_eq!(
                agreed_without(&cluster, i, victim),
                Some(*was),
                "queue {i} kept its leader and term"
            );
        }
    }
    // The new leaders serve: the message comes out of a failed-over queue.
    if let Some(i) = (1..QUEUES).find(|i| before[*i].0 == victim) {
        let (leader, _) = moved[i].unwrap();
        let out =
            consume_at_least(addr(&cluster, leader), &name(i), 1, Duration::from_secs(20)).await;
        assert_eq!(out, [format!("first {i}")]);
    }
    cluster.crash(victim).await.unwrap();

    // With the victim down, the survivors' groups go quiet again: a lost
    // voter does not keep a group awake while the others are a majority.
    // A publish while it is down reaches the survivors only.
    let survivor = others[0];
    let got = publish(
        addr(&cluster, survivor),
        &name(1),
        &["while down".to_string()],
    )
    .await;
    assert_eq!(got, ["while down"]);
    await_quiet(
        &cluster,
        heartbeat * 4,
        "every queue quiet with a node down",
    )
    .await;
    // Meanwhile each leader's stream to the dead node waits for it to be
    // heard again (`raft::PeerReach`) instead of failing and being retried
    // every second: over a window shorter than a wait's bound (30 s), at
    // most one new wait per group.
    let waits = |c: &Cluster| {
        others
            .iter()
            .map(|id| c.node(*id).unwrap().quorum().lost_peer_waits())
            .fold((0, 0), |(a, b), w| (a + w.started, b + w.woken))
    };
    let (started, _) = waits(&cluster);
    assert!(started > 0, "no stream waited for the lost node");
    let window = Duration::from_secs(4);
    holds_for(window, "every queue stays quiet with a node down", || {
        (0..QUEUES).all(|i| quiet_for(&cluster, i, heartbeat * 4))
    })
    .await;
    let (later, _) = waits(&cluster);
    assert!(
        later - started <= QUEUES as u64,
        "{} new waits for the lost node in {window:?} ({QUEUES} groups): streams retried",
        later - started
    );
    // Back, the node's new incarnation wakes its groups: their leaders
    // bring its replicas up to date (the quiet rule wants it to hold the
    // last entry) and go quiet again, and it serves what it missed.
    for other in &others {
        cluster.set_partitioned(victim, *other, false);
    }
    cluster.restart(victim).await.unwrap();
    await_quiet(
        &cluster,
        heartbeat * 2,
        "every queue quiet after the restart",
    )
    .await;
    // The streams that waited for it went on when it was heard again.
    let (_, woken) = waits(&cluster);
    assert!(woken > 0, "no wait for the lost node ended at its return");
    let out = consume_at_least(addr(&cluster, victim), &name(1), 1, Duration::from_secs(20)).await;
    assert!(
        out.contains(&"while down".to_string()),
        "the restarted node serves the publish it missed: {out:?}"
    );
    cluster.shutdown().await;
}
