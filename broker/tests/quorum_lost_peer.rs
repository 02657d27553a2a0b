//! Replication streams that wait on a lost node (`quorum/lost_peer_wait.rs`,
//! `raft::PeerReach`) on a 3-node in-process cluster with the default Raft
//! timings. With one node crashed, the survivors' leaders' streams to it
//! wait instead of failing and being retried, and `/metrics/node` shows
//! them. Deleting the queues while the node is still down ends those
//! waits at once: openraft cancels a deleted group's stream while it is
//! still opening, so neither the task nor the group's log store outlives
//! the group by the wait's 30 s bound. Nothing is counted as a revival,
//! since the node never came back. And a waiting stream does not keep its
//! leader from purging the log after a snapshot (openraft purges nothing
//! a stream has in flight): a new snapshot ends the wait.

use crate::common;

use std::time::Duration;

use common::*;
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::quorum::LostPeerWaits;
use ramqpd_broker::{BrokerConfig, Cluster};

const QUEUES: usize = 6;
const VICTIM: u64 = 3;
const SURVIVORS: [u64; 2] = [1, 2];

fn name(i: usize) -> String {
    format!("lostpeer{i}")
}

/// The survivors' waits, summed.
fn waits(cluster: &Cluster) -> LostPeerWaits {
    SURVIVORS
        .iter()
        .filter_map(|id| cluster.node(*id))
        .map(|node| node.quorum().lost_peer_waits())
        .fold(LostPeerWaits::default(), |a, w| LostPeerWaits {
            started: a.started + w.started,
            woken: a.woken + w.woken,
            open: a.open + w.open,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_queue_ends_its_streams_wait_on_a_lost_node() {
    trace_from_env();
    let mut config = BrokerConfig::default();
    config.http.listen = Some("127.0.0.1:0".parse().expect("an address"));
    let mut cluster = Cluster::start_lossy(3, config).await.unwrap();
    for i in 0..QUEUES {
        let node = SURVIVORS[i % 2];
        let text = format!("m{i}");
        let got = publish(
            cluster.addr(node).expect("runs"),
            &name(i),
            std::slice::from_ref(&text),
        )
        .await;
        assert_eq!(got, [text], "queue {i} takes a publish");
    }
    assert_eq!(waits(&cluster), LostPeerWaits::default(), "nobody lost yet");

    cluster.crash(VICTIM).await.unwrap();
    // Every group ends up led by a survivor (the victim's by election),
    // whose stream to the victim then waits for it.
    eventually(
        Duration::from_secs(30),
        "the survivors' streams to the crashed node wait for it",
        || waits(&cluster).open >= QUEUES as u64,
    )
    .await;
    let before = waits(&cluster);
    assert_eq!(before.woken, 0, "nothing revived: {before:?}");
    // The endpoint shows the same figures.
    let mut shown = (0.0, 0.0);
    for id in SURVIVORS {
        let http = cluster.node(id).unwrap().http_addr().expect("HTTP on");
        shown.0 += node_sample(http, "ramqp_raft_lost_peer_waits_total").await;
        shown.1 += node_sample(http, "ramqp_raft_lost_peer_waits_open").await;
    }
    assert!(
        shown.0 >= before.started as f64 && shown.1 >= 1.0,
        "/metrics/node shows {shown:?}, the nodes counted {before:?}"
    );

    // Deleted with the node still down: every group closes on the
    // survivors, and with it every wait of its streams, well before the
    // wait's own bound (30 s) and without the node's return.
    for i in 0..QUEUES {
        let deleted = cluster
            .node(SURVIVORS[0])
            .unwrap()
            .delete_queue(&format!("/quorum/{}", name(i)))
            .await;
        assert!(deleted.is_ok(), "queue {i} deleted: {deleted:?}");
    }
    eventually(
        Duration::from_secs(15),
        "the deleted groups' streams stop waiting for the lost node",
        || waits(&cluster).open == 0,
    )
    .await;
    let after = waits(&cluster);
    assert_eq!(
        after.woken, 0,
        "ended by the deletion, not a revival: {after:?}"
    );
    for id in SURVIVORS {
        let http = cluster.node(id).unwrap().http_addr().expect("HTTP on");
        assert_eq!(
            node_sample(http, "ramqp_raft_lost_peer_waits_open").await,
            0.0
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_purges_its_log_while_a_peer_is_lost() {
    trace_from_env();
    let mut config = BrokerConfig::default();
    config.quorum.snapshot_min_log_bytes = 16 * 1024;
    config.quorum.log_entries_kept_after_snapshot = 5;
    // Bodies paged: a snapshot is due every 16 KiB of log, not every
    // queue's worth of resident bodies.
    config.quorum.resident_budget_bytes = 0;
    let mut cluster = Cluster::start_lossy(3, config).await.unwrap();
    let queue = "purgewhilelost";
    let address = QueueAddress::parse(&format!("/quorum/{queue}")).unwrap();
    let first = ["m".to_owned()];
    assert_eq!(
        publish(cluster.addr(1).unwrap(), queue, &first).await,
        first
    );
    let replica = |cluster: &Cluster, id| cluster.node(id)?.quorum().get(&address);
    // Every replica open and at one leader's last entry.
    let leader_of = |cluster: &Cluster| {
        let status: Vec<_> = (1..=3)
            .map(|id| replica(cluster, id).map(|q| q.raft_status()))
            .collect::<Option<_>>()?;
        let first = status.first()?;
        let agreed = status
            .iter()
            .all(|s| s.leader == first.leader && s.applied_index == first.last_log_index);
        agreed.then_some(first.leader).flatten()
    };
    eventually(
        Duration::from_secs(15),
        "three replicas at one leader",
        || leader_of(&cluster).is_some(),
    )
    .await;
    let leader = leader_of(&cluster).expect("led");
    let victim = leader % 3 + 1;
    let crashed_at = replica(&cluster, victim)
        .and_then(|q| q.raft_status().last_log_index)
        .unwrap_or(0);
    cluster.crash(victim).await.unwrap();
    // A stream is opened when there is something to send: these fail the
    // one open to the crashed node, and the next one waits.
    let addr = cluster.addr(leader).expect("runs");
    let few: Vec<String> = (0..5).map(|i| format!("few {i}")).collect();
    assert_eq!(publish(addr, queue, &few).await, few);
    let leader_waits = |cluster: &Cluster| cluster.node(leader).unwrap().quorum().lost_peer_waits();
    eventually(
        Duration::from_secs(15),
        "the leader's stream to the crashed node waits for it",
        || leader_waits(&cluster).open >= 1,
    )
    .await;
    let held = leader_waits(&cluster);

    // Past several snapshots' worth of log (16 KiB each).
    let bodies: Vec<String> = (0..400)
        .map(|i| format!("{i:04} {}", "p".repeat(250)))
        .collect();
    let addr = cluster.addr(leader).expect("runs");
    assert_eq!(publish(addr, queue, &bodies).await, bodies);
    // Purged past all the crashed node has, well within the wait's own
    // bound (30 s, when a failed try would let openraft purge): the node
    // can then only catch up from a snapshot.
    let purged =
        |cluster: &Cluster| replica(cluster, leader).and_then(|q| q.raft_status().purged_index);
    eventually(
        Duration::from_secs(15),
        "the leader purges its log past the crashed node's",
        || purged(&cluster).is_some_and(|p| p > crashed_at + 100),
    )
    .await;
    let after = leader_waits(&cluster);
    assert!(
        after.started > held.started && after.woken == held.woken,
        "snapshots ended waits, revivals did not: {held:?} -> {after:?}"
    );

    // Back, it catches up from the leader's snapshot.
    cluster.restart(victim).await.unwrap();
    let applied =
        |cluster: &Cluster, id| replica(cluster, id).and_then(|q| q.raft_status().applied_index);
    eventually(
        Duration::from_secs(30),
        "the restarted node caught up",
        || {
            let ours = applied(&cluster, victim);
            ours.is_some() && ours == applied(&cluster, leader)
        },
    )
    .await;
    cluster.shutdown().await;
}
