//! A quorum queue's single active consumer and consumer order across
//! leader changes, on an in-process cluster (`ramqpd_broker::Cluster`) with
//! the third-party client (fe2o3-amqp): three consumers attached through
//! one node, the leadership moved twice; each time the consumers come back
//! to the new leader in no set order, and still the first attached stays
//! the active one, and when it detaches the second takes over, then the
//! third. And priorities: a high-priority consumer attached after a low
//! one still gets every message after the leadership moved. And a lost
//! active consumer: its node cut off with the leadership, the next in
//! order takes over once the new leader's wait for it (2 s) is over.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::definitions::Fields;
use fe2o3_amqp::types::primitives::{Symbol, Value};
use fe2o3_amqp::Receiver;
use ramqpd_broker::config::PolicyConfig;
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::{BrokerConfig, Cluster};

const QUEUE: &str = "sac-moving";
const PRIO_QUEUE: &str = "prio-moving";
const LOST_QUEUE: &str = "sac-lost";
/// Long enough to see that a message is not coming, short for the suite.
const QUIET: Duration = Duration::from_millis(500);

fn config() -> BrokerConfig {
    let mut config = BrokerConfig::default();
    fast_raft(&mut config);
    config.quorum.leader_wait_ms = 5000;
    config.policies.push(PolicyConfig {
        pattern: "/quorum/sac-*".to_string(),
        single_active_consumer: true,
        ..PolicyConfig::default()
    });
    config
}

async fn receiver(session: &mut Sess, name: &str) -> Receiver {
    receiver_of(session, QUEUE, name, 0).await
}

async fn receiver_of(session: &mut Sess, queue: &str, name: &str, priority: i32) -> Receiver {
    let mut builder = Receiver::builder()
        .name(name.to_string())
        .source(format!("/quorum/{queue}"))
        .credit_mode(CreditMode::Manual);
    if priority != 0 {
        let mut properties = Fields::new();
        properties.insert(Symbol::from("rabbitmq:priority"), Value::Int(priority));
        builder = builder.properties(properties);
    }
    let mut receiver = step("receiver attach", builder.attach(session))
        .await
        .expect("receiver attaches");
    step("credit", receiver.set_credit(50))
        .await
        .expect("credit");
    receiver
}

/// Receive `texts` in order on `receiver`, accepting each; messages of
/// earlier batches (`seen`) may come again first (a settlement not yet
/// replicated when the leadership moved: at least once), no other.
async fn expect_texts(receiver: &mut Receiver, texts: &[String], seen: &mut Vec<String>) {
    let mut want = texts.iter();
    let mut next = want.next();
    while let Some(expected) = next {
        let delivery = within(
            Duration::from_secs(15),
            "a delivery to the active consumer",
            receiver.recv::<String>(),
        )
        .await
        .expect("receive");
        let body = delivery.body().clone();
        step("accept", receiver.accept(&delivery))
            .await
            .expect("accept");
        if body == *expected {
            next = want.next();
        } else {
            assert!(seen.contains(&body), "got {body}, expected {expected}");
        }
    }
    seen.extend(texts.iter().cloned());
}

async fn leader(cluster: &Cluster, queue: &str) -> u64 {
    wait_for_leader(cluster, queue, None, Duration::from_secs(15)).await
}

async fn publish_all(cluster: &Cluster, texts: &[String]) {
    publish_to(cluster, QUEUE, texts).await;
}

async fn publish_to(cluster: &Cluster, queue: &str, texts: &[String]) {
    let via = cluster.addr(2).expect("node 2");
    assert_eq!(publish(via, queue, texts).await, texts, "all accepted");
}

/// Move `queue`'s leadership to the next node; returns when it leads.
async fn move_leader(cluster: &Cluster, queue: &str) {
    let from = leader(cluster, queue).await;
    let to = from % 3 + 1;
    within(
        Duration::from_secs(20),
        "move_leadership",
        cluster
            .node(from)
            .expect("leader node")
            .quorum()
            .move_leadership(Some(queue), Some(to)),
    )
    .await
    .expect("leadership moves");
    eventually(Duration::from_secs(15), "the target leads", || {
        cluster.leader_of(queue) == Some(to)
    })
    .await;
}

fn texts(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_consumer_and_the_order_survive_leader_changes() {
    let cluster = Cluster::start(3, config()).await.expect("cluster starts");
    publish_all(&cluster, &[]).await; // declares the queue
    let first_leader = leader(&cluster, QUEUE).await;
    // Through a node that does not lead, so the links are forwarded, and
    // all through one routed queue.
    let via = first_leader % 3 + 1;
    let mut connection = open_at(cluster.addr(via).expect("node"), "consumers").await;
    let mut session = begin_session(&mut connection).await;
    let mut first = receiver(&mut session, "first").await;
    let mut second = receiver(&mut session, "second").await;
    let mut third = receiver(&mut session, "third").await;
    let mut seen = Vec::new();
    let batch = texts("before", 3);
    publish_all(&cluster, &batch).await;
    expect_texts(&mut first, &batch, &mut seen).await;
    for round in 0..2 {
        move_leader(&cluster, QUEUE).await;
        let batch = texts(&format!("after-move-{round}"), 3);
        publish_all(&cluster, &batch).await;
        expect_texts(&mut first, &batch, &mut seen).await;
        expect_nothing(&mut second, QUIET, "the first consumer stays active").await;
        expect_nothing(
            &mut third,
            Duration::ZERO,
            "the first consumer stays active",
        )
        .await;
    }
    step("detach the active one", first.close())
        .await
        .expect("detach");
    let batch = texts("second", 2);
    publish_all(&cluster, &batch).await;
    expect_texts(&mut second, &batch, &mut seen).await;
    expect_nothing(&mut third, QUIET, "the second consumer took over").await;
    step("detach the second", second.close())
        .await
        .expect("detach");
    let batch = texts("third", 2);
    publish_all(&cluster, &batch).await;
    expect_texts(&mut third, &batch, &mut seen).await;

    // Priorities (no single active consumer): the high one, attached
    // after the low one, keeps first call after the leadership moved.
    let mut low = receiver_of(&mut session, PRIO_QUEUE, "low", 0).await;
    let mut high = receiver_of(&mut session, PRIO_QUEUE, "high", 5).await;
    move_leader(&cluster, PRIO_QUEUE).await;
    let batch = texts("prio", 4);
    publish_to(&cluster, PRIO_QUEUE, &batch).await;
    expect_texts(&mut high, &batch, &mut seen).await;
    expect_nothing(&mut low, QUIET, "the high-priority consumer had credit").await;

    // The active consumer is on the leader's node, which is cut off: the
    // new leader waits for it in vain, then the next in order takes over.
    publish_to(&cluster, LOST_QUEUE, &[]).await;
    let cut = leader(&cluster, LOST_QUEUE).await;
    let other = cut % 3 + 1;
    let mut cut_conn = open_at(cluster.addr(cut).expect("node"), "on the cut node").await;
    let mut cut_session = begin_session(&mut cut_conn).await;
    let mut lost = receiver_of(&mut cut_session, LOST_QUEUE, "lost", 0).await;
    let mut other_conn = open_at(cluster.addr(other).expect("node"), "elsewhere").await;
    let mut other_session = begin_session(&mut other_conn).await;
    let mut next = receiver_of(&mut other_session, LOST_QUEUE, "next", 0).await;
    let batch = texts("lost", 2);
    publish_via(&cluster, other, LOST_QUEUE, &batch).await;
    expect_texts(&mut lost, &batch, &mut seen).await;
    expect_nothing(&mut next, QUIET, "the consumer on the cut node is active").await;
    for node in [1, 2, 3] {
        if node != cut {
            cluster.set_partitioned(cut, node, true);
        }
    }
    eventually(Duration::from_secs(15), "a new leader", || {
        cluster
            .node(other)
            .and_then(|n| n.quorum().get(&lost_address()))
            .and_then(|q| q.leader())
            .is_some_and(|l| l != cut)
    })
    .await;
    let batch = texts("after-cut", 2);
    publish_via(&cluster, other, LOST_QUEUE, &batch).await;
    expect_texts(&mut next, &batch, &mut seen).await;
    for node in [1, 2, 3] {
        if node != cut {
            cluster.set_partitioned(cut, node, false);
        }
    }
    let _ = connection.close().await;
    let _ = other_conn.close().await;
    drop(cut_conn);
    cluster.shutdown().await;
}

fn lost_address() -> QueueAddress {
    QueueAddress::parse(&format!("/quorum/{LOST_QUEUE}")).expect("address")
}

async fn publish_via(cluster: &Cluster, node: u64, queue: &str, texts: &[String]) {
    let via = cluster.addr(node).expect("node");
    assert_eq!(publish(via, queue, texts).await, texts, "all accepted");
}
