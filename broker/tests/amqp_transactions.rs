//! Local transactions (AMQP 1.0 part 4) with the third-party client's
//! transaction API (fe2o3-amqp `Controller` / `Transaction`) and, for the
//! exact answers, raw frames: declare, posted messages visible only after
//! a commit and never after a rollback, settlements applied on commit and
//! returned on rollback, posts through the anonymous relay, the staging
//! bound, a full queue refusing the
//! whole transaction, a transaction dying with its connection, one Raft
//! log entry per queue per commit, and a commit forwarded from a follower
//! surviving the loss of the leader.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use fe2o3_amqp::transaction::{
    Controller, ControllerSendError, Transaction, TransactionDischarge, TransactionPosting,
    TransactionRetirement,
};
use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::Sender;
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::codec::value::Value;
use ramqpd_broker::codec::{DeliveryState, Detach, Performative, Role, Symbol, Target, TargetKind};
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

async fn sender_to(session: &mut Sess, name: &str, address: &str) -> Sender {
    step(
        "sender attach",
        Sender::attach(session, name.to_string(), address.to_string()),
    )
    .await
    .expect("sender attaches")
}

async fn controller(session: &mut Sess) -> Controller {
    step("controller attach", Controller::attach(session, "ctl"))
        .await
        .expect("the coordinator link attaches")
}

/// (ready, unsettled) of the queue at `address` on `broker`.
fn ready_unsettled(broker: &Broker, address: &str) -> (usize, usize) {
    broker
        .queues()
        .into_iter()
        .find(|q| q.address == address)
        .map_or((0, 0), |q| (q.ready, q.unsettled))
}

async fn post(txn: &Transaction<'_>, sender: &mut Sender, text: &str) -> Outcome {
    step("transactional post", txn.post(sender, text.to_string()))
        .await
        .expect("the post is answered")
}

/// Posted messages: invisible until the commit, all there after it in
/// posting order; a rolled-back transaction leaves nothing.
async fn commit_and_rollback_of_posts(address: &str, config: impl FnOnce(&mut BrokerConfig)) {
    let broker = start_with(config).await;
    let mut connection = connect(&broker, "txn-posts").await;
    let mut session = begin_session(&mut connection).await;
    let controller = controller(&mut session).await;
    let mut sender = sender_to(&mut session, "tx", address).await;

    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    for text in ["a", "b", "c"] {
        let outcome = post(&txn, &mut sender, text).await;
        assert!(outcome.is_accepted(), "presumptive outcome: {outcome:?}");
    }
    assert_eq!(
        ready_unsettled(&broker, address),
        (0, 0),
        "nothing is visible before the commit"
    );
    step("commit", txn.commit()).await.expect("committed");
    assert_eq!(ready_unsettled(&broker, address).0, 3);

    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    assert!(post(&txn, &mut sender, "never").await.is_accepted());
    step("rollback", txn.rollback()).await.expect("rolled back");
    assert_eq!(ready_unsettled(&broker, address).0, 3);

    let mut receiver = step(
        "receiver attach",
        fe2o3_amqp::Receiver::attach(&mut session, "rx", address.to_string()),
    )
    .await
    .expect("receiver attaches");
    for want in ["a", "b", "c"] {
        let (delivery, text) = recv_text(&mut receiver).await;
        assert_eq!(text, want);
        step("accept", receiver.accept(&delivery)).await.unwrap();
    }
    expect_nothing(&mut receiver, Duration::from_millis(300), "rolled back").await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test]
async fn posts_land_on_commit_only_transient() {
    commit_and_rollback_of_posts("/queues/txn-posts", |_| {}).await;
}

#[tokio::test]
async fn posts_land_on_commit_only_quorum() {
    commit_and_rollback_of_posts("/quorum/txn-posts", |_| {}).await;
}

/// Settlements in a transaction: a rollback returns the message to the
/// queue (and tells the consumer it was released), a commit removes it.
#[tokio::test]
async fn settlements_apply_on_commit_and_return_on_rollback() {
    for address in ["/queues/txn-settle", "/quorum/txn-settle"] {
        let broker = start().await;
        let mut connection = connect(&broker, "txn-settle").await;
        let mut session = begin_session(&mut connection).await;
        let controller = controller(&mut session).await;
        let mut sender = sender_to(&mut session, "tx", address).await;
        for text in ["one", "two"] {
            send_text(&mut sender, text).await;
        }
        // Credit for the two only, so a returned message stays ready.
        let mut receiver = step(
            "receiver attach",
            fe2o3_amqp::Receiver::builder()
                .name("rx")
                .source(address.to_string())
                .credit_mode(fe2o3_amqp::link::receiver::CreditMode::Manual)
                .attach(&mut session),
        )
        .await
        .expect("receiver attaches");
        step("credit", receiver.set_credit(2)).await.unwrap();
        let (first, _) = recv_text(&mut receiver).await;
        let (second, _) = recv_text(&mut receiver).await;
        assert_eq!(ready_unsettled(&broker, address), (0, 2));

        let txn = step("declare", Transaction::declare(&controller, None))
            .await
            .expect("declared");
        step("accept in txn", txn.accept(&mut receiver, &first))
            .await
            .expect("disposition sent");
        step("rollback", txn.rollback()).await.expect("rolled back");
        eventually(
            Duration::from_secs(5),
            "the rolled-back message returns",
            || ready_unsettled(&broker, address) == (1, 1),
        )
        .await;

        let txn = step("declare", Transaction::declare(&controller, None))
            .await
            .expect("declared");
        step("accept in txn", txn.accept(&mut receiver, &second))
            .await
            .expect("disposition sent");
        // Staged: still out with the consumer until the commit.
        assert_eq!(ready_unsettled(&broker, address), (1, 1), "{address}");
        step("commit", txn.commit()).await.expect("committed");
        eventually(
            Duration::from_secs(5),
            "the committed accept removes it",
            || ready_unsettled(&broker, address) == (1, 0),
        )
        .await;
        // The released one comes again.
        step("credit", receiver.set_credit(1)).await.unwrap();
        let (again, text) = recv_text(&mut receiver).await;
        assert_eq!(text, "one", "{address}");
        step("accept", receiver.accept(&again)).await.unwrap();
        eventually(Duration::from_secs(5), "empty", || {
            ready_unsettled(&broker, address) == (0, 0)
        })
        .await;
        step("close", connection.close()).await.unwrap();
        stop(broker).await;
    }
}

/// Past the per-connection staging bound a post is rejected with
/// amqp:resource-limit-exceeded and the transaction can only roll back.
#[tokio::test]
async fn staging_is_bounded_per_connection() {
    let broker = start_with(|c| c.limits.txn_max_operations = 3).await;
    let address = "/queues/txn-bound";
    let mut connection = connect(&broker, "txn-bound").await;
    let mut session = begin_session(&mut connection).await;
    let controller = controller(&mut session).await;
    let mut sender = sender_to(&mut session, "tx", address).await;
    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    for text in ["1", "2", "3"] {
        assert!(post(&txn, &mut sender, text).await.is_accepted());
    }
    match post(&txn, &mut sender, "4").await {
        Outcome::Rejected(rejected) => {
            let error = rejected.error.expect("an error");
            assert_eq!(
                format!("{:?}", error.condition),
                format!(
                    "{:?}",
                    fe2o3_amqp::types::definitions::ErrorCondition::AmqpError(
                        fe2o3_amqp::types::definitions::AmqpError::ResourceLimitExceeded
                    )
                )
            );
        }
        other => panic!("expected the 4th post rejected, got {other:?}"),
    }
    match step("commit", txn.commit()).await {
        Err(ControllerSendError::Rejected(rejected)) => {
            let text = format!("{rejected:?}");
            assert!(text.to_lowercase().contains("rollback"), "{text}");
        }
        other => panic!("expected the commit refused, got {other:?}"),
    }
    assert_eq!(ready_unsettled(&broker, address), (0, 0));
    // The bound is free again: a new transaction commits. (On a fresh
    // coordinator link: after a refused commit fe2o3 still sends a
    // best-effort rollback of that transaction when it drops it, whose
    // answer it would take for the next declare's.)
    let controller = step(
        "controller attach",
        Controller::attach(&mut session, "ctl2"),
    )
    .await
    .expect("a second coordinator link");
    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    assert!(post(&txn, &mut sender, "5").await.is_accepted());
    step("commit", txn.commit()).await.expect("committed");
    assert_eq!(ready_unsettled(&broker, address), (1, 0));
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

/// A transaction over two queues, one of which has no room for its part:
/// the commit is refused and neither queue gets anything.
#[tokio::test]
async fn a_full_queue_refuses_the_whole_transaction() {
    let broker = start_with(|c| c.queues.max_messages = 2).await;
    let mut connection = connect(&broker, "txn-full").await;
    let mut session = begin_session(&mut connection).await;
    let controller = controller(&mut session).await;
    let mut small = sender_to(&mut session, "small", "/queues/txn-small").await;
    let mut roomy = sender_to(&mut session, "roomy", "/quorum/txn-roomy").await;
    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    assert!(post(&txn, &mut roomy, "r").await.is_accepted());
    for text in ["s1", "s2", "s3"] {
        assert!(post(&txn, &mut small, text).await.is_accepted());
    }
    match step("commit", txn.commit()).await {
        Err(ControllerSendError::Rejected(rejected)) => {
            let text = format!("{rejected:?}");
            assert!(
                text.to_lowercase().contains("rollback") && text.contains("txn-small"),
                "{text}"
            );
        }
        other => panic!("expected the commit refused, got {other:?}"),
    }
    assert_eq!(ready_unsettled(&broker, "/queues/txn-small"), (0, 0));
    assert_eq!(ready_unsettled(&broker, "/quorum/txn-roomy"), (0, 0));
    let _ = tokio::time::timeout(Duration::from_secs(5), connection.close()).await;
    stop(broker).await;
}

/// Messages posted in a transaction through the anonymous relay go to
/// the queues their `to` names (a transient and a quorum one, both created
/// by the relay) only on commit; an address that cannot exist is rejected
/// on its own.
#[tokio::test]
async fn posts_through_the_anonymous_relay() {
    use fe2o3_amqp::types::messaging::{Message, Properties};
    let broker = start().await;
    let mut connection = connect(&broker, "txn-relay").await;
    let mut session = begin_session(&mut connection).await;
    let controller = controller(&mut session).await;
    let mut relay = step(
        "anonymous sender attach",
        Sender::builder()
            .name("anon")
            .target(fe2o3_amqp::types::messaging::Target::builder().build())
            .attach(&mut session),
    )
    .await
    .expect("an anonymous sender attaches");
    let to = |address: &str, text: &str| {
        Message::builder()
            .properties(Properties::builder().to(address).build())
            .value(text.to_string())
            .build()
    };
    for end in ["abort", "commit"] {
        let txn = step("declare", Transaction::declare(&controller, None))
            .await
            .expect("declared");
        for address in ["/queues/txn-relay-a", "/quorum/txn-relay-b"] {
            let outcome = step("post", txn.post(&mut relay, to(address, end)))
                .await
                .expect("answered");
            assert!(outcome.is_accepted(), "{address}: {outcome:?}");
        }
        let outcome = step("post", txn.post(&mut relay, to("/nowhere/x", end)))
            .await
            .expect("answered");
        assert!(matches!(outcome, Outcome::Rejected(_)), "{outcome:?}");
        for address in ["/queues/txn-relay-a", "/quorum/txn-relay-b"] {
            assert_eq!(ready_unsettled(&broker, address), (0, 0), "before {end}");
        }
        if end == "commit" {
            step("commit", txn.commit()).await.expect("committed");
        } else {
            step("rollback", txn.rollback()).await.expect("rolled back");
        }
    }
    for address in ["/queues/txn-relay-a", "/quorum/txn-relay-b"] {
        assert_eq!(ready_unsettled(&broker, address), (1, 0), "{address}");
    }
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

/// A connection that goes away takes its transactions with it: the
/// posted messages never land and the settled ones come back.
#[tokio::test]
async fn a_transaction_dies_with_its_connection() {
    let broker = start().await;
    let address = "/queues/txn-dies";
    {
        let mut connection = connect(&broker, "setup").await;
        let mut session = begin_session(&mut connection).await;
        let mut sender = sender_to(&mut session, "tx", address).await;
        send_text(&mut sender, "held").await;
        step("close", connection.close()).await.unwrap();
    }
    let mut connection = connect(&broker, "txn-dies").await;
    let mut session = begin_session(&mut connection).await;
    let controller = controller(&mut session).await;
    let mut sender = sender_to(&mut session, "tx", address).await;
    let mut receiver = step(
        "receiver attach",
        fe2o3_amqp::Receiver::attach(&mut session, "rx", address.to_string()),
    )
    .await
    .expect("receiver attaches");
    let (delivery, _) = recv_text(&mut receiver).await;
    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    assert!(post(&txn, &mut sender, "staged").await.is_accepted());
    step("accept in txn", txn.accept(&mut receiver, &delivery))
        .await
        .expect("disposition sent");
    // The client must not discharge it: the broker's own clean-up is under
    // test.
    std::mem::forget(txn);
    let _ = tokio::time::timeout(Duration::from_secs(5), connection.close()).await;
    eventually(
        Duration::from_secs(5),
        "rolled back with the connection",
        || ready_unsettled(&broker, address) == (1, 0),
    )
    .await;
    let mut connection = connect(&broker, "after").await;
    let mut session = begin_session(&mut connection).await;
    let mut receiver = attach_receiver(&mut session, "rx2", "txn-dies", 5).await;
    let (_, text) = recv_text(&mut receiver).await;
    assert_eq!(
        text, "held",
        "the settled message came back, the post never landed"
    );
    expect_nothing(&mut receiver, Duration::from_millis(300), "the staged post").await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

/// A commit on a quorum queue is one log entry, however many posts and
/// settlements it holds.
#[tokio::test]
async fn a_quorum_part_is_one_log_entry() {
    let broker = start().await;
    let address = "/quorum/txn-entry";
    let mut connection = connect(&broker, "txn-entry").await;
    let mut session = begin_session(&mut connection).await;
    let controller = controller(&mut session).await;
    let mut sender = sender_to(&mut session, "tx", address).await;
    send_text(&mut sender, "before").await;
    let mut receiver = step(
        "receiver attach",
        fe2o3_amqp::Receiver::attach(&mut session, "rx", address.to_string()),
    )
    .await
    .expect("receiver attaches");
    let (delivery, _) = recv_text(&mut receiver).await;
    let queue = broker
        .quorum()
        .get(&QueueAddress::parse(address).unwrap())
        .expect("the local replica");
    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    for i in 0..20 {
        assert!(post(&txn, &mut sender, &format!("m{i}"))
            .await
            .is_accepted());
    }
    step("accept in txn", txn.accept(&mut receiver, &delivery))
        .await
        .expect("disposition sent");
    let before = queue.applied_index().expect("applied");
    step("commit", txn.commit()).await.expect("committed");
    assert_eq!(
        queue.applied_index(),
        Some(before + 1),
        "20 posts and a settlement in one entry"
    );
    // The settlement landed and the 20 are there (out with the consumer
    // that still has credit, or ready).
    eventually(Duration::from_secs(5), "the part applied", || {
        let (ready, unsettled) = ready_unsettled(&broker, address);
        ready + unsettled == 20
    })
    .await;
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

/// On a 3-node cluster, a client on a follower commits a transaction (the
/// part is forwarded to the leader as one entry); the leader then dies and
/// the new leader has every message of it.
#[tokio::test]
async fn a_commit_forwarded_from_a_follower_survives_the_leader() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    let mut cluster = step("cluster start", Cluster::start_lossy(3, base))
        .await
        .expect("cluster starts");
    let queue = "txn-cluster";
    let first = cluster.addr(1).expect("node 1");
    assert_eq!(publish(first, queue, &texts(0..1)).await.len(), 1);
    let leader = cluster.leader_of(queue).expect("a leader");
    let follower = cluster
        .running()
        .into_iter()
        .find(|&n| n != leader)
        .expect("a follower");
    let mut connection = open_at(cluster.addr(follower).unwrap(), "txn-follower").await;
    let mut session = begin_session(&mut connection).await;
    let controller = controller(&mut session).await;
    let mut sender = sender_to(&mut session, "tx", &format!("/quorum/{queue}")).await;
    let txn = step("declare", Transaction::declare(&controller, None))
        .await
        .expect("declared");
    let posted = texts(1..11);
    for text in &posted {
        assert!(post(&txn, &mut sender, text).await.is_accepted());
    }
    step("commit", txn.commit()).await.expect("committed");
    let _ = tokio::time::timeout(Duration::from_secs(5), connection.close()).await;

    step("leader crash", cluster.crash(leader))
        .await
        .expect("crashed");
    let survivor = cluster.addr(follower).unwrap();
    let got = consume_at_least(survivor, queue, 11, Duration::from_secs(20)).await;
    for text in texts(0..11) {
        assert!(got.contains(&text), "{text} lost: got {got:?}");
    }
    cluster.shutdown().await;
}

/// The exact answers, with raw frames: the attach reply offers local
/// transactions, a declare gets `declared`, an unknown id, a global id and
/// a body that is no control message are each rejected alone, and the
/// connection's other links go on.
#[tokio::test]
async fn coordinator_answers_exactly() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    raw.attach_publisher(0, 0, "txn-neighbour").await;

    let mut declare = attach(1, Role::Sender, "unused");
    declare.name = "txn-ctrl".into();
    declare.target = Some(Target {
        kind: TargetKind::Coordinator,
        capabilities: vec!["amqp:local-transactions".into()],
        ..Target::default()
    });
    raw.send(0, Performative::Attach(Box::new(declare))).await;
    match raw.performative().await {
        (0, Performative::Attach(reply), _) => {
            assert_eq!(reply.role, Role::Receiver);
            let target = reply.target.expect("the coordinator in the reply");
            assert_eq!(target.kind, TargetKind::Coordinator);
            assert_eq!(
                target.capabilities,
                vec![Symbol::from("amqp:local-transactions")]
            );
        }
        other => panic!("expected the attach reply, got {other:?}"),
    }
    let control = |code: u64, fields: Vec<Value>| {
        encode(&[section(0x77, section(code, Value::List(fields)))])
    };
    let declared = raw.publish(0, 1, 0, &control(0x31, vec![])).await;
    let txn_id = match declared.state {
        Some(DeliveryState::Declared { txn_id }) => txn_id,
        other => panic!("expected declared, got {other:?}"),
    };
    assert!(declared.settled);

    let unknown = raw
        .publish(
            0,
            1,
            1,
            &control(0x32, vec![Value::Binary(Bytes::from_static(b"nope"))]),
        )
        .await;
    assert_rejected(&unknown.state, condition::TRANSACTION_UNKNOWN_ID);
    let global = raw
        .publish(
            0,
            1,
            2,
            &control(0x31, vec![Value::Binary(Bytes::from_static(b"g"))]),
        )
        .await;
    assert_rejected(&global.state, condition::NOT_IMPLEMENTED);
    let junk = raw.publish(0, 1, 3, &text_message("declare")).await;
    assert_rejected(&junk.state, condition::DECODE_ERROR);

    // A discharge of the live one commits it (nothing staged).
    let done = raw
        .publish(0, 1, 4, &control(0x32, vec![Value::Binary(txn_id.clone())]))
        .await;
    assert_eq!(done.state, Some(DeliveryState::Accepted));
    // Twice is an unknown id.
    let again = raw
        .publish(0, 1, 5, &control(0x32, vec![Value::Binary(txn_id)]))
        .await;
    assert_rejected(&again.state, condition::TRANSACTION_UNKNOWN_ID);

    raw.send(
        0,
        Performative::Detach(Detach {
            handle: 1,
            closed: true,
            error: None,
        }),
    )
    .await;
    match raw.performative().await {
        (0, Performative::Detach(detach), _) => assert_eq!(detach.handle, 1),
        other => panic!("expected the detach reply, got {other:?}"),
    }
    let disposition = raw.publish(0, 0, 6, &text_message("after")).await;
    assert_eq!(disposition.state, Some(DeliveryState::Accepted));
    stop(broker).await;
}

fn assert_rejected(state: &Option<DeliveryState>, want: &str) {
    match state {
        Some(DeliveryState::Rejected { error: Some(e) }) => {
            assert_eq!(e.condition.as_str(), want, "{e:?}")
        }
        other => panic!("expected rejected with {want}, got {other:?}"),
    }
}
