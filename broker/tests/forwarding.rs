//! Forwarding through a 3-node in-process cluster with the third-party
//! client (fe2o3-amqp): clients attached to any node publish to and
//! consume from any queue; links follow a leadership change without being
//! detached; a client cut off with a minority never sees `accepted`.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::{BrokerConfig, Cluster};

fn config() -> BrokerConfig {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    base.quorum.leader_wait_ms = 5000;
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_through_a_follower_consume_through_the_other_exactly_once() {
    let cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "fwd", &[]).await;
    let (_, f1, f2) = roles(&cluster, "fwd", Duration::from_secs(10)).await;
    let accepted = publish(cluster.addr(f1).unwrap(), "fwd", &texts(0..300)).await;
    assert_eq!(
        accepted,
        texts(0..300),
        "every publish through a follower is accepted"
    );
    let received = consume(cluster.addr(f2).unwrap(), "fwd", 1000).await;
    assert_eq!(
        received,
        texts(0..300),
        "each once, in order, through the other follower"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_and_drain_through_a_follower() {
    let cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "credit", &[]).await;
    let (_, f1, f2) = roles(&cluster, "credit", Duration::from_secs(10)).await;
    publish(cluster.addr(f1).unwrap(), "credit", &texts(0..5)).await;

    let mut connection = open_at(cluster.addr(f2).unwrap(), "credit-rx").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver_at(&mut session, "rx", "/quorum/credit", 2).await;
    for i in 0..2 {
        let (delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("m-{i}"));
        step("accept", rx.accept(&delivery)).await.unwrap();
    }
    expect_nothing(&mut rx, Duration::from_millis(300), "credit 2 is used up").await;
    step("credit 10", rx.set_credit(10)).await.unwrap();
    step("drain", rx.drain()).await.unwrap();
    for i in 2..5 {
        let (delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("m-{i}"));
        step("accept", rx.accept(&delivery)).await.unwrap();
    }
    // The drain used up the credit: a new message waits in the queue.
    publish(cluster.addr(f1).unwrap(), "credit", &["late".to_string()]).await;
    expect_nothing(
        &mut rx,
        Duration::from_millis(500),
        "drain ended the credit",
    )
    .await;
    step("credit 1", rx.set_credit(1)).await.unwrap();
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "late");
    step("accept", rx.accept(&delivery)).await.unwrap();
    let _ = rx.close().await;
    let _ = connection.close().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_queue_is_reachable_from_every_node() {
    let cluster = Cluster::start(3, config()).await.unwrap();
    let via = |n| cluster.addr(n).unwrap();
    // Transient queues use the same helpers with a /queues/ address.
    let declared = publish_to(via(1), "/queues/shared", &texts(0..10)).await;
    let more = publish_to(via(2), "/queues/shared", &texts(10..20)).await;
    assert_eq!(declared.len() + more.len(), 20);
    let received = consume_from(via(3), "/queues/shared", 100).await;
    assert_eq!(
        received,
        texts(0..20),
        "published on nodes 1 and 2, consumed on 3"
    );
    cluster.shutdown().await;
}

/// A node lets go of a routed queue once no link has held it for two
/// sweeps (`node/route_sweep.rs`) and makes it again for the next attach;
/// one a consumer holds stays and keeps delivering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_queue_nothing_uses_is_let_go_and_made_again() {
    let mut base = config();
    base.queues.route_sweep_ms = 100;
    let cluster = Cluster::start(3, base).await.unwrap();
    publish(cluster.addr(1).unwrap(), "let-go", &[]).await;
    let (_, f1, f2) = roles(&cluster, "let-go", Duration::from_secs(10)).await;
    let routes = |n: u64| cluster.node(n).unwrap().routed_queues();

    let mut connection = open_at(cluster.addr(f2).unwrap(), "let-go-rx").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver_at(&mut session, "rx", "/quorum/let-go", 100).await;
    let sent = publish(cluster.addr(f1).unwrap(), "let-go", &texts(0..5)).await;
    assert_eq!(sent, texts(0..5), "accepted through a follower");
    eventually(
        Duration::from_secs(10),
        "the publisher's node lets go",
        || routes(f1) == 0,
    )
    .await;
    assert_eq!(routes(f2), 1, "the consumer's routed queue is kept");
    let sent = publish(cluster.addr(f1).unwrap(), "let-go", &texts(5..10)).await;
    assert_eq!(
        sent,
        texts(5..10),
        "accepted through a routed queue made again"
    );
    for i in 0..10 {
        let (delivery, text) = recv_text(&mut rx).await;
        assert_eq!(text, format!("m-{i}"), "each once, in order");
        step("accept", rx.accept(&delivery)).await.unwrap();
    }
    let _ = rx.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
    eventually(
        Duration::from_secs(10),
        "the consumer's node lets go",
        || routes(f2) == 0,
    )
    .await;
    cluster.shutdown().await;
}

/// `route_sweep_ms = 0`: a node keeps its routed queues (the sweep does
/// not run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_route_sweep_a_routed_queue_is_kept() {
    let mut base = config();
    base.queues.route_sweep_ms = 0;
    let cluster = Cluster::start(3, base).await.unwrap();
    publish(cluster.addr(1).unwrap(), "kept", &[]).await;
    let (_, f1, _) = roles(&cluster, "kept", Duration::from_secs(10)).await;
    let sent = publish(cluster.addr(f1).unwrap(), "kept", &texts(0..1)).await;
    assert_eq!(sent, texts(0..1));
    let routes = || cluster.node(f1).unwrap().routed_queues();
    holds_for(Duration::from_secs(1), "the routed queue is kept", || {
        routes() == 1
    })
    .await;
    cluster.shutdown().await;
}

/// Publish to any address; returns the accepted texts.
async fn publish_to(addr: SocketAddr, address: &str, texts: &[String]) -> Vec<String> {
    let mut connection = open_at(addr, "tx").await;
    let mut session = begin_session(&mut connection).await;
    let mut sender = step("sender attach", Sender::attach(&mut session, "tx", address))
        .await
        .unwrap();
    let mut accepted = Vec::new();
    for text in texts {
        if let Outcome::Accepted(_) = step("send", sender.send(text.clone())).await.unwrap() {
            accepted.push(text.clone());
        }
    }
    let _ = sender.close().await;
    let _ = connection.close().await;
    accepted
}

/// Receive (accepting) from any address until a quiet second.
async fn consume_from(addr: SocketAddr, address: &str, n: usize) -> Vec<String> {
    let mut connection = open_at(addr, "rx").await;
    let mut session = begin_session(&mut connection).await;
    let mut receiver = step(
        "receiver attach",
        Receiver::attach(&mut session, "rx", address),
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    while got.len() < n {
        let Ok(delivery) =
            tokio::time::timeout(Duration::from_secs(1), receiver.recv::<String>()).await
        else {
            break;
        };
        let delivery = delivery.unwrap();
        got.push(delivery.body().clone());
        step("accept", receiver.accept(&delivery)).await.unwrap();
    }
    let _ = receiver.close().await;
    let _ = connection.close().await;
    got
}

/// Stop the leader while a publisher on `pub_node` and a consumer on
/// `sub_node` (both not the leader) keep their links; check that neither
/// link fails, publishing resumes and no accepted message is lost.
async fn leader_stops_under_steady_clients(pick: fn(u64, u64) -> (u64, u64)) {
    let mut cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "steady", &[]).await;
    let (leader, f1, f2) = roles(&cluster, "steady", Duration::from_secs(10)).await;
    let (pub_node, sub_node) = pick(f1, f2);
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let publisher = tokio::spawn(keep_publishing(
        cluster.addr(pub_node).unwrap(),
        "steady",
        stop.clone(),
        counts.clone(),
    ));
    let consumer = tokio::spawn(keep_consuming(
        cluster.addr(sub_node).unwrap(),
        "steady",
        stop.clone(),
        counts.clone(),
    ));
    eventually(Duration::from_secs(20), "publishing starts", || {
        counts.accepted() >= 50
    })
    .await;
    cluster.stop(leader).await;
    let before = counts.accepted();
    let stopped_at = std::time::Instant::now();
    eventually(Duration::from_secs(20), "publishing resumes", || {
        counts.accepted() > before
    })
    .await;
    let pause = stopped_at.elapsed();
    eventually(Duration::from_secs(20), "publishing goes on", || {
        counts.accepted() >= before + 50
    })
    .await;
    let (accepted, received) = stop_steady_clients(&stop, publisher, consumer).await;
    let (lost, duplicates) = check_delivered(&accepted, &received);
    eprintln!(
        "leader {leader} stopped; publisher on {pub_node}, consumer on {sub_node}: accepted {}, \
         received {}, duplicates {duplicates}, lost {}, publishing paused {pause:?}",
        accepted.len(),
        received.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_stops_while_clients_on_one_follower_keep_their_links() {
    leader_stops_under_steady_clients(|f1, _| (f1, f1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_stops_while_clients_on_both_peers_keep_their_links() {
    leader_stops_under_steady_clients(|f1, f2| (f1, f2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_on_the_minority_side_never_sees_accepted() {
    trace_from_env();
    let cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "split", &[]).await;
    let (leader, minority, _) = roles(&cluster, "split", Duration::from_secs(10)).await;
    let mut accepted = publish(cluster.addr(minority).unwrap(), "split", &texts(0..20)).await;
    assert_eq!(accepted.len(), 20);

    let mut connection = open_at(cluster.addr(minority).unwrap(), "minority").await;
    let mut session = begin_session(&mut connection).await;
    let mut sender = step(
        "sender attach",
        Sender::attach(&mut session, "tx", "/quorum/split"),
    )
    .await
    .unwrap();
    for other in cluster.running().into_iter().filter(|n| *n != minority) {
        cluster.set_partitioned(minority, other, true);
    }
    let mut outcomes = Vec::new();
    for i in 0..5 {
        let text = format!("cut-{i}");
        match tokio::time::timeout(Duration::from_secs(15), sender.send(text.clone())).await {
            Ok(Ok(Outcome::Accepted(_))) => {
                outcomes.push("accepted".to_string());
                accepted.push(text);
            }
            Ok(Ok(other)) => outcomes.push(format!("{other:?}")),
            Ok(Err(e)) => {
                outcomes.push(format!("error {e:?}"));
                break;
            }
            // After `leader_wait_ms` without a leader the broker detaches
            // the link with an error. fe2o3 sometimes sends one more
            // transfer on that handle after its own answering detach (seen
            // in a frame trace: detach sent, detach received, then a
            // transfer on handle 0, all in order on one socket), the
            // broker ends the session with `unattached-handle` as the spec
            // asks, and fe2o3's send may never resolve. Not accepted
            // either way, which is what this test is about. Frame traces:
            // `RAMQP_TEST_LOG=ramqpd_broker::engine=trace`.
            Err(_) => {
                outcomes.push("no outcome (link closed)".to_string());
                break;
            }
        }
    }
    eprintln!("minority outcomes: {outcomes:?}");
    assert!(
        outcomes.iter().all(|o| o != "accepted"),
        "accepted on the minority side: {outcomes:?}"
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;

    for other in cluster.running().into_iter().filter(|n| *n != minority) {
        cluster.set_partitioned(minority, other, false);
    }
    // After the heal, publishing through the former minority node works.
    let mut after = Vec::new();
    within(
        Duration::from_secs(30),
        "publishing after the heal",
        async {
            while after.is_empty() {
                after = publish(cluster.addr(minority).unwrap(), "split", &texts(100..110)).await;
            }
        },
    )
    .await;
    accepted.extend(after);
    // The healed node may start an election (its term rose while it was
    // cut off), so the consumer waits for the messages rather than for a
    // quiet 2 s.
    let received = consume_at_least(
        cluster.addr(leader).unwrap(),
        "split",
        accepted.len(),
        Duration::from_secs(30),
    )
    .await;
    let (lost, duplicates) = check_delivered(&accepted, &received);
    eprintln!(
        "partition: accepted {}, received {}, duplicates {duplicates}",
        accepted.len(),
        received.len()
    );
    assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    cluster.shutdown().await;
}
