//! Quorum queues through a third-party client (fe2o3-amqp): a publish is
//! accepted only once committed, a node restarted on its data directory
//! recovers every accepted and unsettled message (and expires those whose
//! time comes after it), and a 3-node in-process cluster keeps every
//! accepted message when its leader stops.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::{Connection, Receiver, Sender};
use ramqpd_broker::config::PolicyConfig;
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_recovers_accepted_and_unsettled_messages_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..BrokerConfig::default()
    };
    let broker = Broker::start(config.clone()).await.unwrap();
    let accepted = publish(broker.local_addr(), "q1", &texts(0..200)).await;
    assert_eq!(accepted, texts(0..200), "every publish is accepted");
    let first = consume(broker.local_addr(), "q1", 50).await;
    assert_eq!(first, texts(0..50));
    broker.shutdown().await;

    let broker = Broker::start(config).await.unwrap();
    let rest = consume(broker.local_addr(), "q1", 1000).await;
    assert_eq!(
        rest,
        texts(50..200),
        "the 150 unsettled messages came back, in order"
    );
    broker.shutdown().await;
}

/// Messages with an expiry that outlive a restart still expire, with no
/// consumer: the node's sweep visits only the groups that hold such
/// messages, and the restarted leader must put its group back on that list
/// when it takes the lead (the log's replay runs before it leads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_expire_after_a_restart_without_a_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..BrokerConfig::default()
    };
    let depth = |broker: &Broker| {
        let address = QueueAddress::parse("/quorum/later").unwrap();
        broker.quorum().get(&address).map(|q| {
            let stats = ramqpd_broker::queue::Queue::stats(&*q);
            stats.ready + stats.unsettled
        })
    };
    let broker = Broker::start(config.clone()).await.unwrap();
    let ttl = PolicyConfig {
        pattern: "/quorum/later".into(),
        message_ttl_ms: Some(2_000),
        ..PolicyConfig::default()
    };
    broker.set_policies(&[ttl]).unwrap();
    assert_eq!(
        publish(broker.local_addr(), "later", &texts(0..3))
            .await
            .len(),
        3
    );
    broker.shutdown().await;

    // The expiry is in the log: the restarted node needs no policy.
    let broker = Broker::start(config).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "the expired messages removed",
        || depth(&broker) == Some(0),
    )
    .await;
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_node_cluster_keeps_accepted_messages_when_the_leader_stops() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    let mut cluster = Cluster::start(3, base).await.unwrap();
    let first_node = cluster.addr(1).unwrap();
    let mut accepted = publish(first_node, "orders", &texts(0..100)).await;
    wait_replicated(&cluster, "orders", 100, Duration::from_secs(20)).await;
    let leader = cluster.leader_of("orders").expect("a leader");
    let mut received = consume(cluster.addr(leader).unwrap(), "orders", 30).await;
    assert_eq!(received, texts(0..30));

    cluster.stop(leader).await;
    let new_leader =
        wait_for_leader(&cluster, "orders", Some(leader), Duration::from_secs(10)).await;
    let addr = cluster.addr(new_leader).unwrap();
    accepted.extend(publish(addr, "orders", &texts(100..150)).await);
    received.extend(consume(addr, "orders", 1000).await);

    // Every accepted message was delivered; count duplicates (allowed:
    // deliveries unsettled when the leader stopped come again).
    let (lost, duplicates) = check_delivered(&accepted, &received);
    eprintln!(
        "accepted {}, received {}, duplicates {duplicates}",
        accepted.len(),
        received.len()
    );
    assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    assert_eq!(accepted.len(), 150, "all publishes were accepted");

    // The stopped node comes back and catches up.
    cluster.restart(leader).await.unwrap();
    eventually(Duration::from_secs(10), "the old leader rejoins", || {
        cluster.leader_of("orders").is_some()
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_quorum_no_publish_is_accepted_and_none_hangs() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    let mut cluster = Cluster::start(3, base).await.unwrap();
    let accepted = publish(cluster.addr(1).unwrap(), "solo", &texts(0..10)).await;
    assert_eq!(accepted.len(), 10);
    let leader = cluster.leader_of("solo").unwrap();
    for node in cluster.running() {
        if node != leader {
            cluster.stop(node).await;
        }
    }
    // Through the (former) leader: every publish gets an answer within a
    // bounded time, and none of them is `accepted`.
    let addr = cluster.addr(leader).unwrap();
    let result = within(Duration::from_secs(30), "publishes without quorum", async {
        let mut connection = open_at(addr, "no-quorum").await;
        let mut session = begin_session(&mut connection).await;
        let mut outcomes = Vec::new();
        for i in 0..3 {
            // A fresh link per publish, as a client resending would: the
            // broker may detach the link together with a `released`
            // outcome (this node does not lead), and a second send on it
            // races fe2o3's handling of that detach (it sent on the
            // detached handle, the broker ended the session as the spec
            // requires, and fe2o3's send never returned).
            let Ok(mut sender) =
                Sender::attach(&mut session, format!("tx-{i}"), "/quorum/solo").await
            else {
                outcomes.push("attach refused".to_string());
                break;
            };
            match sender.send(format!("late-{i}")).await {
                Ok(outcome) => outcomes.push(format!("{outcome:?}")),
                Err(error) => {
                    outcomes.push(format!("error: {error:?}"));
                    break;
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(2), sender.close()).await;
        }
        outcomes
    })
    .await;
    eprintln!("outcomes without quorum: {result:?}");
    assert!(
        result.iter().all(|o| !o.starts_with("Accepted")),
        "a publish without quorum was accepted: {result:?}"
    );
    cluster.shutdown().await;
}

/// A connection and session at the node that leads `queue` now; `None`
/// (after a short pause when there is no leader) if that is not possible.
async fn session_at_leader(
    cluster: &tokio::sync::RwLock<Cluster>,
    queue: &str,
    container_id: &str,
) -> Option<(Conn, Sess)> {
    let addr = {
        let cluster = cluster.read().await;
        cluster.leader_of(queue).and_then(|l| cluster.addr(l))
    };
    let Some(addr) = addr else {
        // An election is running: ask again shortly.
        tokio::time::sleep(Duration::from_millis(50)).await;
        return None;
    };
    let mut connection = tokio::time::timeout(
        Duration::from_secs(2),
        Connection::open(container_id.to_string(), format!("amqp://{addr}").as_str()),
    )
    .await
    .ok()?
    .ok()?;
    let session = fe2o3_amqp::Session::begin(&mut connection).await.ok()?;
    Some((connection, session))
}

/// Publish unique texts in a loop through whichever node leads `queue`,
/// reconnecting after errors, until `stop` is set; returns the accepted
/// texts.
async fn publish_through_failures(
    cluster: std::sync::Arc<tokio::sync::RwLock<Cluster>>,
    queue: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    n_accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<String> {
    use std::sync::atomic::Ordering;
    let mut accepted = Vec::new();
    let mut next = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let Some((mut connection, mut session)) = session_at_leader(&cluster, queue, "pub").await
        else {
            continue;
        };
        let Ok(mut sender) = Sender::attach(&mut session, "tx", format!("/quorum/{queue}")).await
        else {
            let _ = connection.close().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            let text = format!("m-{next}");
            match tokio::time::timeout(Duration::from_secs(10), sender.send(text.clone())).await {
                Ok(Ok(Outcome::Accepted(_))) => {
                    accepted.push(text);
                    n_accepted.fetch_add(1, Ordering::Relaxed);
                    next += 1;
                }
                // Released (leader lost mid-commit): send it again.
                Ok(Ok(_)) => {}
                _ => break,
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;
    }
    accepted
}

/// Consume from whichever node leads `queue`, accepting, until `stop` is
/// set and the queue stays quiet; returns the received texts.
async fn consume_through_failures(
    cluster: std::sync::Arc<tokio::sync::RwLock<Cluster>>,
    queue: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<String> {
    use std::sync::atomic::Ordering;
    let mut received = Vec::new();
    loop {
        let Some((mut connection, mut session)) = session_at_leader(&cluster, queue, "sub").await
        else {
            continue;
        };
        let Ok(mut receiver) =
            Receiver::attach(&mut session, "rx", format!("/quorum/{queue}")).await
        else {
            let _ = connection.close().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        loop {
            match tokio::time::timeout(Duration::from_secs(2), receiver.recv::<String>()).await {
                Ok(Ok(delivery)) => {
                    received.push(delivery.body().clone());
                    if receiver.accept(&delivery).await.is_err() {
                        break;
                    }
                }
                Ok(Err(_)) => break,
                // Quiet: done once the publisher has stopped.
                Err(_) if stop.load(Ordering::Relaxed) => {
                    let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;
                    return received;
                }
                Err(_) => {}
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_stopped_mid_stream_loses_no_accepted_message() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    let cluster = Cluster::start(3, base).await.unwrap();
    // Create the queue before the clients look for its leader.
    publish(cluster.addr(1).unwrap(), "stream", &[]).await;
    let cluster = Arc::new(tokio::sync::RwLock::new(cluster));
    let stop = Arc::new(AtomicBool::new(false));
    let n_accepted = Arc::new(AtomicUsize::new(0));
    let publisher = tokio::spawn(publish_through_failures(
        cluster.clone(),
        "stream",
        stop.clone(),
        n_accepted.clone(),
    ));
    let consumer = tokio::spawn(consume_through_failures(
        cluster.clone(),
        "stream",
        stop.clone(),
    ));

    eventually(Duration::from_secs(20), "publishing starts", || {
        n_accepted.load(Ordering::Relaxed) >= 20
    })
    .await;
    let leader = cluster.read().await.leader_of("stream").unwrap();
    cluster.write().await.stop(leader).await;
    let before_failover = n_accepted.load(Ordering::Relaxed);
    // Publishing resumes on the new leader within a few seconds.
    eventually(
        Duration::from_secs(15),
        "publishing resumes on the new leader",
        || n_accepted.load(Ordering::Relaxed) >= before_failover + 20,
    )
    .await;
    cluster.write().await.restart(leader).await.unwrap();
    let after_restart = n_accepted.load(Ordering::Relaxed);
    eventually(
        Duration::from_secs(15),
        "publishing goes on with the old leader back",
        || n_accepted.load(Ordering::Relaxed) >= after_restart + 20,
    )
    .await;
    stop.store(true, Ordering::Relaxed);

    let accepted = within(Duration::from_secs(30), "publisher ends", publisher)
        .await
        .unwrap();
    let received = within(Duration::from_secs(60), "consumer drains", consumer)
        .await
        .unwrap();
    let (lost, duplicates) = check_delivered(&accepted, &received);
    eprintln!(
        "leader {leader} stopped mid-stream: accepted {}, received {}, duplicates {duplicates}, lost {}",
        accepted.len(),
        received.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    Arc::try_unwrap(cluster)
        .ok()
        .unwrap()
        .into_inner()
        .shutdown()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_restore_a_restarted_node_and_catch_up_a_lagging_follower() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    // Snapshot (and purge the log before it) every 40 entries.
    base.quorum.snapshot_every_entries = 40;
    let mut cluster = Cluster::start(3, base).await.unwrap();
    publish(cluster.addr(1).unwrap(), "snap", &texts(0..1)).await;
    wait_replicated(&cluster, "snap", 1, Duration::from_secs(20)).await;
    let leader = cluster.leader_of("snap").unwrap();
    let lagging = cluster
        .running()
        .into_iter()
        .find(|n| *n != leader)
        .unwrap();
    cluster.stop(lagging).await;

    // Closed-loop publishes: one entry each, so several snapshots and purges.
    let accepted = publish(cluster.addr(leader).unwrap(), "snap", &texts(1..200)).await;
    assert_eq!(accepted.len(), 199);

    // The lagging follower comes back; the entries it missed are purged on
    // the leader, so it can only catch up from a snapshot (with bodies).
    cluster.restart(lagging).await.unwrap();
    eventually(Duration::from_secs(20), "the follower catches up", || {
        replica_stats(&cluster, lagging, "snap").map(|s| s.ready) == Some(200)
    })
    .await;

    // The leader restarts from its own snapshot + log; everything is there.
    cluster.restart(leader).await.unwrap();
    let new_leader = wait_for_leader(&cluster, "snap", None, Duration::from_secs(20)).await;
    let received = consume(cluster.addr(new_leader).unwrap(), "snap", 1000).await;
    assert_eq!(
        received,
        texts(0..200),
        "every message, in order, after snapshots"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_queue_snapshots_and_purges_its_log_by_size() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    // Never by entry count here: only the size rule can snapshot.
    base.quorum.snapshot_every_entries = 1_000_000;
    base.quorum.snapshot_min_log_bytes = 4 * 1024;
    base.quorum.log_entries_kept_after_snapshot = 5;
    let mut cluster = Cluster::start(3, base).await.unwrap();
    let address = ramqpd_broker::queue::QueueAddress::parse("/quorum/sized").unwrap();

    // Closed-loop publishes (one entry each, tens of bytes), all consumed:
    // the log grows while the queue stays shallow.
    let accepted = publish(cluster.addr(1).unwrap(), "sized", &texts(0..300)).await;
    assert_eq!(accepted.len(), 300);
    let leader = cluster.leader_of("sized").unwrap();
    let received = consume(cluster.addr(leader).unwrap(), "sized", 1000).await;
    assert_eq!(received, texts(0..300));

    // Every replica snapshotted and dropped most of its log.
    for node in cluster.running() {
        let queue = cluster.node(node).unwrap().quorum().get(&address).unwrap();
        let mut compaction = (None, None);
        eventually(Duration::from_secs(10), "a snapshot and a purge", || {
            compaction = queue.compaction();
            matches!(compaction, (Some(_), Some(purged)) if purged > 200)
        })
        .await;
    }

    // After a restart from the snapshot and the short log: nothing settled
    // comes back, and the queue still serves.
    cluster.restart(leader).await.unwrap();
    let new_leader = wait_for_leader(&cluster, "sized", None, Duration::from_secs(20)).await;
    let addr = cluster.addr(new_leader).unwrap();
    let accepted = publish(addr, "sized", &texts(300..301)).await;
    assert_eq!(accepted.len(), 1);
    assert_eq!(consume(addr, "sized", 1000).await, texts(300..301));
    cluster.shutdown().await;
}
