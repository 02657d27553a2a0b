//! Deleting and purging queues (what `ramqp-ctl queue delete|purge` asks,
//! here through `Broker::delete_queue` / `purge_queue`), with the
//! third-party client (fe2o3-amqp) attached: a purge drops the waiting
//! messages and leaves those out with a consumer; a quorum purge goes
//! through the Raft log (it survives a restart, and every replica of a
//! 3-node cluster agrees); a deletion detaches the queue's links with
//! amqp:resource-deleted, on every node, and a queue declared again under
//! the same name starts empty.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::admin::QueueChange;
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

/// (ready, unsettled) of `address` as `broker` holds it.
fn depth_of(broker: &Broker, address: &str) -> Option<(usize, usize)> {
    broker
        .queues()
        .into_iter()
        .find(|q| q.address == address)
        .map(|q| (q.ready, q.unsettled))
}

async fn sender(session: &mut Sess, address: &str) -> Sender {
    step(
        "sender attach",
        Sender::attach(session, "tx", address.to_string()),
    )
    .await
    .expect("sender attaches")
}

async fn receiver(session: &mut Sess, name: &str, address: &str, credit: u32) -> Receiver {
    let mut receiver = step(
        "receiver attach",
        Receiver::builder()
            .name(name)
            .source(address.to_string())
            .credit_mode(fe2o3_amqp::link::receiver::CreditMode::Manual)
            .attach(session),
    )
    .await
    .expect("receiver attaches");
    if credit > 0 {
        step("credit", receiver.set_credit(credit)).await.unwrap();
    }
    receiver
}

async fn send_all(sender: &mut Sender, n: usize) {
    for i in 0..n {
        let outcome = step("send", sender.send(format!("m{i}"))).await.unwrap();
        assert!(matches!(outcome, Outcome::Accepted(_)), "{outcome:?}");
    }
}

/// The receiver's link is detached by the broker with resource-deleted
/// (after the deliveries it had already received, at most `credit`).
async fn assert_deleted_detach(receiver: &mut Receiver, credit: usize) {
    for _ in 0..=credit {
        match step("receive after delete", receiver.recv::<String>()).await {
            Ok(_) => continue,
            Err(error) => {
                let error = format!("{error:?}");
                assert!(error.contains("ResourceDeleted"), "{error}");
                return;
            }
        }
    }
    panic!("the link was not detached");
}

fn done(change: QueueChange) -> String {
    match change {
        QueueChange::Done(summary) => summary,
        other => panic!("expected done here, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_purge_then_delete() {
    let broker = start().await;
    let address = "/queues/to-purge";
    let mut connection = connect(&broker, "purge").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = sender(&mut session, address).await;
    send_all(&mut tx, 5).await;
    let mut rx = receiver(&mut session, "rx", address, 1).await;
    let (held, first) = recv_text(&mut rx).await;
    assert_eq!(first, "m0");

    let summary = done(broker.purge_queue(address).await.expect("purge"));
    assert!(summary.contains("4 messages"), "{summary}");
    assert_eq!(
        depth_of(&broker, address),
        Some((0, 1)),
        "the held one stays"
    );
    // Released, it is the only one left.
    step("release", rx.release(&held)).await.unwrap();
    step("credit", rx.set_credit(5)).await.unwrap();
    let (again, text) = recv_text(&mut rx).await;
    assert_eq!(text, "m0");
    step("accept", rx.accept(&again)).await.unwrap();
    expect_nothing(&mut rx, Duration::from_millis(300), "the purged four").await;

    send_all(&mut tx, 2).await;
    let summary = done(broker.delete_queue(address).await.expect("delete"));
    assert!(summary.contains("deleted /queues/to-purge"), "{summary}");
    assert_eq!(depth_of(&broker, address), None);
    assert_deleted_detach(&mut rx, 10).await;
    // The attached sender's next message is refused, not lost silently.
    let outcome = step("send to a deleted queue", tx.send("late".to_string())).await;
    assert!(
        matches!(outcome, Ok(Outcome::Released(_)) | Err(_)),
        "{outcome:?}"
    );
    assert!(broker.delete_queue(address).await.is_err(), "gone already");
    let _ = connection.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_purge_goes_through_the_log_and_delete_starts_over() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..BrokerConfig::default()
    };
    let address = "/quorum/to-purge";
    let broker = Broker::start(config.clone()).await.unwrap();
    let mut connection = connect(&broker, "qpurge").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = sender(&mut session, address).await;
    send_all(&mut tx, 10).await;
    let mut rx = receiver(&mut session, "rx", address, 2).await;
    recv_text(&mut rx).await;
    recv_text(&mut rx).await;
    let summary = done(broker.purge_queue(address).await.expect("purge"));
    assert!(summary.contains("8 messages"), "{summary}");
    assert_eq!(depth_of(&broker, address), Some((0, 2)));
    let _ = connection.close().await;
    broker.shutdown().await;

    // Replayed from the log: the purge holds, the two unsettled are back.
    let broker = Broker::start(config).await.unwrap();
    let back = consume(broker.local_addr(), "to-purge", 100).await;
    assert_eq!(back, vec!["m0".to_string(), "m1".to_string()]);

    let mut connection = connect(&broker, "qdelete").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = sender(&mut session, address).await;
    send_all(&mut tx, 3).await;
    let mut rx = receiver(&mut session, "rx", address, 10).await;
    recv_text(&mut rx).await;
    done(broker.delete_queue(address).await.expect("delete"));
    assert_deleted_detach(&mut rx, 10).await;
    eventually(Duration::from_secs(10), "the replica is removed", || {
        depth_of(&broker, address).is_none()
    })
    .await;
    let _ = connection.close().await;
    // Declared again by the next attach: a new, empty queue.
    let accepted = publish(broker.local_addr(), "to-purge", &["new".to_string()]).await;
    assert_eq!(accepted, vec!["new".to_string()]);
    let got = consume(broker.local_addr(), "to-purge", 100).await;
    assert_eq!(got, vec!["new".to_string()], "nothing of the deleted queue");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_purge_and_delete_reach_every_replica() {
    let mut config = BrokerConfig::default();
    fast_raft(&mut config);
    config.quorum.leader_wait_ms = 5000;
    let cluster = Cluster::start(3, config).await.unwrap();
    let address = "/quorum/everywhere";
    let accepted = publish(cluster.addr(1).unwrap(), "everywhere", &texts(0..20)).await;
    assert_eq!(accepted.len(), 20);
    let leader = wait_for_leader(&cluster, "everywhere", None, Duration::from_secs(10)).await;
    let follower = cluster
        .running()
        .into_iter()
        .find(|n| *n != leader)
        .unwrap_or_default();
    let node = |id| cluster.node(id).expect("running");

    // A follower names the leader; the leader purges through the log.
    match node(follower).purge_queue(address).await.expect("answer") {
        QueueChange::Elsewhere(at) => assert_eq!(at, leader),
        other => panic!("a follower cannot purge: {other:?}"),
    }
    done(node(leader).purge_queue(address).await.expect("purge"));
    eventually(Duration::from_secs(10), "every replica purged", || {
        cluster
            .running()
            .into_iter()
            .all(|n| depth_of(node(n), address) == Some((0, 0)))
    })
    .await;

    // Consumers on the leader and through a follower.
    let mut on_leader = open_at(cluster.addr(leader).unwrap(), "on-leader").await;
    let mut s1 = begin_session(&mut on_leader).await;
    let mut rx_leader = receiver(&mut s1, "rx-l", address, 5).await;
    let mut via_follower = open_at(cluster.addr(follower).unwrap(), "via-follower").await;
    let mut s2 = begin_session(&mut via_follower).await;
    let mut rx_follower = receiver(&mut s2, "rx-f", address, 5).await;

    // Deleted through the follower: recorded in the metadata.
    done(node(follower).delete_queue(address).await.expect("delete"));
    assert_deleted_detach(&mut rx_leader, 5).await;
    assert_deleted_detach(&mut rx_follower, 5).await;
    eventually(Duration::from_secs(15), "every replica removed", || {
        cluster
            .running()
            .into_iter()
            .all(|n| depth_of(node(n), address).is_none())
    })
    .await;
    let _ = on_leader.close().await;
    let _ = via_follower.close().await;
    cluster.shutdown().await;
}
