//! Dead-lettering from a quorum queue across a leader change, in a 3-node
//! in-process cluster with fe2o3-amqp: messages rejected through a
//! follower are dead-lettered by the source's leader (the Raft outbox,
//! `quorum/dead_letter_outbox.rs`) to a quorum dead-letter queue led by
//! the same node; that node is stopped as soon as the first copy landed,
//! while copies are in the outbox, on their way, or committed in the
//! dead-letter queue without the source having recorded it, so the new
//! leader sends its outbox again. No copy may land twice, and no message
//! may be lost: each is in the dead-letter queue or (a rejection the
//! stopped leader had not yet logged) back in the source queue.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::Receiver;
use ramqpd_broker::config::PolicyConfig;
use ramqpd_broker::{BrokerConfig, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_land_once_across_a_leader_change() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    base.quorum.leader_wait_ms = 5000;
    base.policies = vec![PolicyConfig {
        pattern: "/quorum/lc-src".into(),
        dead_letter_address: Some("/quorum/lc-dlq".into()),
        ..PolicyConfig::default()
    }];
    let mut cluster = Cluster::start(3, base).await.unwrap();
    let bodies = texts(0..30);
    assert_eq!(
        publish(cluster.addr(1).unwrap(), "lc-src", &bodies).await,
        bodies
    );
    publish(cluster.addr(1).unwrap(), "lc-dlq", &[]).await;
    let (leader, other1, other2) = roles(&cluster, "lc-src", Duration::from_secs(10)).await;
    let others = [other1, other2];
    // The dead-letter queue led by the same node: the copies are published
    // there, where the stop interrupts them too.
    let dlq_leader = wait_for_leader(&cluster, "lc-dlq", None, Duration::from_secs(10)).await;
    if dlq_leader != leader {
        let from = cluster.node(dlq_leader).unwrap();
        step(
            "move the DLQ's leadership",
            from.quorum().move_leadership(Some("lc-dlq"), Some(leader)),
        )
        .await
        .expect("leadership moves");
    }
    let node = cluster.node(leader).unwrap();
    let dlq_published = |node: &ramqpd_broker::Broker| {
        node.queues()
            .iter()
            .find(|q| q.address == "/quorum/lc-dlq")
            .map_or(0, |q| q.published_total)
    };

    // Reject every message through a follower, then stop the leader at once.
    let mut connection = open_at(cluster.addr(others[0]).unwrap(), "rejecter").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = step(
        "receiver attach",
        Receiver::builder()
            .name("rx")
            .source("/quorum/lc-src")
            .credit_mode(CreditMode::Manual)
            .attach(&mut session),
    )
    .await
    .expect("receiver attaches");
    step("credit", rx.set_credit(100)).await.expect("credit");
    for _ in 0..bodies.len() {
        let delivery = recv(&mut rx).await;
        step("reject", rx.reject(&delivery, None))
            .await
            .expect("reject");
    }
    eventually(Duration::from_secs(10), "a first copy in the DLQ", || {
        dlq_published(node) >= 1
    })
    .await;
    cluster.stop(leader).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), connection.close()).await;

    let dead = consume_at_least(
        cluster.addr(others[1]).unwrap(),
        "lc-dlq",
        1,
        Duration::from_secs(40),
    )
    .await;
    let back = consume(cluster.addr(others[0]).unwrap(), "lc-src", 100).await;
    let mut unique = dead.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), dead.len(), "a copy landed twice: {dead:?}");
    let mut all: Vec<String> = dead.iter().chain(back.iter()).cloned().collect();
    all.sort();
    let mut expected = bodies.clone();
    expected.sort();
    assert_eq!(
        all, expected,
        "each message in the DLQ or back in the source, once"
    );
    cluster.shutdown().await;
}
