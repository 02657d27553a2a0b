//! Replication streams that wait on a lost node (`quorum/lost_peer_wait.rs`,
//! `raft::PeerReach`) on a 3-node in-process cluster with the default Raft
//! timings. With one node crashed, the survivors' leaders' streams to it
//! wait instead of failing and being retried, and `/metrics/node` shows
//! them. Deleting the queues while the node is still down ends those
//! waits at once: openraft cancels a deleted group's stream while it is
//! still opening, so neither the task nor the group's log store outlives
//! the group by the wait's 30 s bound. Nothing is counted as a revival,
//! since the node never came back.

use crate::common;

use std::time::Duration;

use common::*;
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
