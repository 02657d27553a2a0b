//! Settlements through a follower are not lost on the way to the leader
//! (3-node in-process cluster, the third-party client fe2o3-amqp): a
//! consumer on a follower accepts a message while the follower cannot
//! reach the leader, and the accepted message must leave the queue once
//! the network heals, not be delivered again:
//!
//! - the settlement's forwarding send fails: it is held and sent when the
//!   leader is reachable again (`forward/held_settles.rs`);
//! - the consumer detaches before a leader is found again: what it settled
//!   still reaches the leader;
//! - the leader took the settlement but lost its leadership before the
//!   settlement was replicated: it is handed to the new leader
//!   (`quorum/settle_batcher.rs`);
//! - the same, the consumer on a node that holds no replica: when its
//!   link follows the new leader it sends the settlement again (in
//!   doubt: the old leader may have lost it), before its credit, so the
//!   client is not handed the message it accepted a second time.
//!
//! Each test checks the queue is empty on every replica once the network
//! healed (an accepted message is never delivered again); without the fix
//! the message stays (it is redelivered or waits for a consumer) and the
//! bounded wait fails.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::{BrokerConfig, Cluster};

fn config() -> BrokerConfig {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    // The partitions below last a moment: longer time-outs keep the
    // follower from giving its links up (cut off) meanwhile.
    base.quorum.election_timeout_min_ms = 1500;
    base.quorum.election_timeout_max_ms = 3000;
    base.quorum.leader_wait_ms = 10_000;
    base
}

/// A transient queue's address that node `node` of a cluster of `size`
/// nodes owns: attaching to it is answered by that node alone, whatever
/// the network.
fn owned_by(node: u64, size: u64) -> String {
    (0..1_000_000)
        .map(|i| format!("owned-{i}"))
        .find(|name| ramqpd_broker::raft::group_id(name) % size + 1 == node)
        .map(|name| format!("/queues/{name}"))
        .unwrap_or_default()
}

/// Wait until the broker has read everything this session sent so far:
/// attach a link to a queue `node` itself owns (frames of a connection are
/// taken in order) and wait for the broker's answer.
async fn round_trip(session: &mut Sess, (node, size): (u64, u64), name: &str) {
    let sender = step(
        "probe attach",
        Sender::attach(session, name, owned_by(node, size)),
    )
    .await
    .expect("probe attaches");
    let _ = step("probe detach", sender.close()).await;
}

/// Every replica of `/quorum/<queue>` holds no message (none ready, none
/// out with a consumer).
fn empty_everywhere(cluster: &Cluster, queue: &str) -> bool {
    let address = format!("/quorum/{queue}");
    cluster.running().into_iter().all(|n| {
        cluster.node(n).is_some_and(|b| {
            b.queues()
                .iter()
                .filter(|s| s.address == address)
                .all(|s| s.ready == 0 && s.unsettled == 0)
        })
    })
}

/// Where the receiver of [`one_delivery`] attaches.
#[derive(Clone, Copy)]
enum ConsumerOn {
    /// The queue's leader: settlements go straight to its batcher.
    Leader,
    /// A follower: settlements are forwarded to the leader.
    Follower,
}

/// A cluster with one message in `/quorum/<queue>`, and a receiver on
/// the leader or a follower holding it unsettled; returns ((leader, the
/// two followers), connection, session, receiver, delivery).
async fn one_delivery(
    queue: &str,
    on: ConsumerOn,
) -> (
    Cluster,
    (u64, u64, u64),
    Conn,
    Sess,
    Receiver,
    fe2o3_amqp::link::delivery::Delivery<String>,
) {
    let cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), queue, &[]).await;
    let (leader, f1, f2) = roles(&cluster, queue, Duration::from_secs(10)).await;
    let accepted = publish(cluster.addr(leader).unwrap(), queue, &texts(0..1)).await;
    assert_eq!(accepted, texts(0..1));
    let consumer = match on {
        ConsumerOn::Leader => leader,
        ConsumerOn::Follower => f1,
    };
    let (connection, session, rx, delivery) = first_delivery(&cluster, consumer, queue).await;
    (cluster, (leader, f1, f2), connection, session, rx, delivery)
}

/// A receiver of `/quorum/<queue>` on node `node` with credit 10, and
/// the first delivery it got, which must be `m-0`.
async fn first_delivery(
    cluster: &Cluster,
    node: u64,
    queue: &str,
) -> (
    Conn,
    Sess,
    Receiver,
    fe2o3_amqp::link::delivery::Delivery<String>,
) {
    let mut connection = open_at(cluster.addr(node).unwrap(), "rx").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = step(
        "receiver attach",
        Receiver::builder()
            .name("rx")
            .source(format!("/quorum/{queue}"))
            .credit_mode(CreditMode::Manual)
            .attach(&mut session),
    )
    .await
    .unwrap();
    step("credit", rx.set_credit(10)).await.unwrap();
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "m-0");
    (connection, session, rx, delivery)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_whose_send_failed_reaches_the_leader_after_the_heal() {
    trace_from_env();
    let (cluster, (leader, follower, _), mut connection, mut session, rx, delivery) =
        one_delivery("sendfail", ConsumerOn::Follower).await;
    cluster.set_partitioned(follower, leader, true);
    // Forwarded at once: the send fails (the follower's link to the leader
    // is down).
    step("accept", rx.accept(&delivery)).await.unwrap();
    round_trip(&mut session, (follower, 3), "probe-1").await;
    cluster.set_partitioned(follower, leader, false);
    eventually(
        Duration::from_secs(10),
        "the accepted message leaves every replica",
        || empty_everywhere(&cluster, "sendfail"),
    )
    .await;
    // The receiver stays attached and gets nothing more (the queue is
    // empty everywhere, so nothing can come).
    let _ = step("receiver close", rx.close()).await;
    let _ = step("connection close", connection.close()).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_held_without_a_leader_survives_the_detach() {
    trace_from_env();
    let (cluster, (leader, follower, _), mut connection, mut session, mut rx, delivery) =
        one_delivery("detached", ConsumerOn::Follower).await;
    cluster.set_partitioned(follower, leader, true);
    // A flow the follower cannot forward: it loses the leader and looks
    // for one; the consumer waits, attached to no node.
    step("credit", rx.set_credit(11)).await.unwrap();
    round_trip(&mut session, (follower, 3), "probe-1").await;
    // Held while no leader is known, then the consumer leaves.
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("receiver close", rx.close()).await.unwrap();
    cluster.set_partitioned(follower, leader, false);
    eventually(
        Duration::from_secs(10),
        "the accepted message leaves every replica",
        || empty_everywhere(&cluster, "detached"),
    )
    .await;
    let _ = step("connection close", connection.close()).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_the_old_leader_could_not_replicate_reaches_the_new_one() {
    trace_from_env();
    let queue = "oldleader";
    // The consumer is on the leader itself: its settlement goes straight
    // to the leader's settlement batcher.
    let (cluster, (leader, f1, f2), mut connection, mut session, rx, delivery) =
        one_delivery(queue, ConsumerOn::Leader).await;
    // Cut off, the leader still takes the settlement (it leads until
    // check-quorum stops it), but cannot replicate it.
    for other in [f1, f2] {
        cluster.set_partitioned(leader, other, true);
    }
    step("accept", rx.accept(&delivery)).await.unwrap();
    round_trip(&mut session, (leader, 3), "probe-1").await;
    eventually(
        Duration::from_secs(30),
        "the other two elect a new leader",
        || leader_seen_by(&cluster, f1, queue).is_some_and(|l| l != leader),
    )
    .await;
    for other in [f1, f2] {
        cluster.set_partitioned(leader, other, false);
    }
    eventually(
        Duration::from_secs(20),
        "the accepted message leaves every replica",
        || empty_everywhere(&cluster, queue),
    )
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_sent_to_a_leader_that_lost_it_is_not_redelivered() {
    trace_from_env();
    let queue = "indoubt";
    let mut base = config();
    base.quorum.replication_factor = 3;
    let cluster = Cluster::start(4, base).await.unwrap();
    publish(cluster.addr(1).unwrap(), queue, &[]).await;
    let address = ramqpd_broker::queue::QueueAddress::parse(&format!("/quorum/{queue}")).unwrap();
    let replicas = || -> Vec<u64> {
        (1..=4)
            .filter(|n| {
                cluster
                    .node(*n)
                    .is_some_and(|b| b.quorum().get(&address).is_some())
            })
            .collect()
    };
    eventually(Duration::from_secs(10), "three replicas", || {
        replicas().len() == 3
    })
    .await;
    let leader = wait_for_leader(&cluster, queue, None, Duration::from_secs(10)).await;
    let others: Vec<u64> = replicas().into_iter().filter(|n| *n != leader).collect();
    let outside = (1..=4)
        .find(|n| !replicas().contains(n))
        .expect("a fourth node");
    let accepted = publish(cluster.addr(leader).unwrap(), queue, &texts(0..1)).await;
    assert_eq!(accepted, texts(0..1));

    // The consumer on the node without a replica: everything it does is
    // forwarded to the leader.
    let (mut connection, mut session, mut rx, delivery) =
        first_delivery(&cluster, outside, queue).await;
    // Cut from the other replicas (not from the consumer's node), the
    // leader takes the settlement and cannot replicate it.
    for other in &others {
        cluster.set_partitioned(leader, *other, true);
    }
    step("accept", rx.accept(&delivery)).await.unwrap();
    round_trip(&mut session, (outside, 4), "probe-1").await;
    eventually(
        Duration::from_secs(30),
        "the other two replicas elect a new leader",
        || leader_seen_by(&cluster, others[0], queue).is_some_and(|l| l != leader),
    )
    .await;
    let new_leader = leader_seen_by(&cluster, others[0], queue).expect("led");
    assert!(others.contains(&new_leader));
    let more = publish(cluster.addr(new_leader).unwrap(), queue, &texts(1..2)).await;
    assert_eq!(more, texts(1..2));
    // The link follows the new leader; the first thing it gets is the new
    // message: m-0, returned to the queue there, was settled by id first.
    let delivery = within(
        Duration::from_secs(30),
        "a delivery through the new leader",
        rx.recv::<String>(),
    )
    .await
    .expect("receive succeeds");
    let text = delivery.body().clone();
    assert_eq!(text, "m-1", "the accepted m-0 was delivered again");
    step("accept", rx.accept(&delivery)).await.unwrap();
    for other in &others {
        cluster.set_partitioned(leader, *other, false);
    }
    eventually(
        Duration::from_secs(20),
        "both messages leave every replica",
        || empty_everywhere(&cluster, queue),
    )
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;
    cluster.shutdown().await;
}
