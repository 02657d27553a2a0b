//! Guards address resolution and clean link refusal: `/queues/<name>` is
//! auto-created on first attach (or, with `queues.auto_create` off, refused
//! with amqp:not-found unless declared); so is an unknown `/quorum/<name>`
//! when auto-create is off; other addresses get amqp:not-found. A refusal is
//! an attach with a null terminus followed by a closing detach carrying the
//! error, and the client's answering detach is accepted: the connection and
//! session carry on.

use crate::common;

use common::*;
use fe2o3_amqp::Sender;
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::codec::{Detach, Performative, Role};

/// Attach with `role` to `address` and expect the refusal with `condition`;
/// answer the detach as a client does, then check the session still works.
async fn refused_on_the_wire(
    broker: &ramqpd_broker::Broker,
    role: Role,
    address: &str,
    expected: &str,
) {
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    let mut request = attach(0, role, "placeholder");
    match role {
        Role::Sender => request.target.as_mut().unwrap().address = Some(address.into()),
        Role::Receiver => request.source.as_mut().unwrap().address = Some(address.into()),
    }
    raw.send(0, Performative::Attach(Box::new(request))).await;
    match raw.performative().await {
        (_, Performative::Attach(reply), _) => {
            assert_eq!(reply.handle, 0);
            match role {
                Role::Sender => assert!(reply.target.is_none(), "null target: {reply:?}"),
                Role::Receiver => assert!(reply.source.is_none(), "null source: {reply:?}"),
            }
        }
        other => panic!("expected attach, got {other:?}"),
    }
    match raw.performative().await {
        (_, Performative::Detach(d), _) => {
            assert_eq!(d.handle, 0);
            assert!(d.closed);
            assert_eq!(
                d.error.as_ref().map(|e| e.condition.as_str()),
                Some(expected),
                "{address}: {d:?}"
            );
        }
        other => panic!("expected detach, got {other:?}"),
    }
    // Answer the detach, as the protocol requires; then reuse the session.
    raw.send(
        0,
        Performative::Detach(Detach {
            handle: 0,
            closed: true,
            error: None,
        }),
    )
    .await;
    raw.attach_consumer(0, 1, "declared").await;
    drop(raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_created_on_first_attach() {
    let broker = start().await;
    assert!(broker.queues().is_empty());
    let mut connection = connect(&broker, "auto").await;
    let mut session = begin_session(&mut connection).await;
    let rx = attach_receiver(&mut session, "rx", "made-by-consumer", 0).await;
    let tx = attach_sender(&mut session, "tx", "made-by-publisher").await;
    let addresses: Vec<String> = broker.queues().into_iter().map(|q| q.address).collect();
    assert_eq!(
        addresses,
        vec![
            "/queues/made-by-consumer".to_string(),
            "/queues/made-by-publisher".to_string()
        ]
    );
    step("close rx", rx.close()).await.unwrap();
    step("close tx", tx.close()).await.unwrap();
    step("end", session.end()).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_on_the_wire() {
    let broker = start_with(|c| {
        c.queues.auto_create = false;
        c.queues.declare = vec!["declared".into()];
    })
    .await;
    // Our role Receiver: the broker would send (consumer); Sender: publisher.
    for role in [Role::Receiver, Role::Sender] {
        refused_on_the_wire(&broker, role, "/queues/unknown", condition::NOT_FOUND).await;
        refused_on_the_wire(&broker, role, "/quorum/orders", condition::NOT_FOUND).await;
        refused_on_the_wire(&broker, role, "/topics/news", condition::NOT_FOUND).await;
    }
    let names: Vec<String> = broker.queues().into_iter().map(|q| q.address).collect();
    assert_eq!(
        names,
        vec!["/queues/declared".to_string()],
        "nothing auto-created"
    );
    stop(broker).await;
}

/// fe2o3 attaches a sender to `address` and is refused with a condition
/// whose name contains `expected`; the same connection then still works.
async fn fe2o3_refused(broker: &ramqpd_broker::Broker, address: &str, expected: &str) {
    let mut connection = connect(broker, "refused").await;
    let mut refused = begin_session(&mut connection).await;
    let attached = step(
        "attach to a refused address",
        Sender::attach(&mut refused, "refused-tx", address),
    )
    .await;
    let error = format!("{:?}", attached.expect_err("the attach is refused"));
    assert!(error.contains(expected), "{address}: {error}");

    // The connection carries on: fe2o3 answered the broker's detach.
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "declared").await;
    let mut rx = attach_receiver(&mut session, "rx", "declared", 1).await;
    send_text(&mut tx, "after a refusal").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "after a refusal");
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("close tx", tx.close()).await.unwrap();
    step("close rx", rx.close()).await.unwrap();
    step("end", session.end()).await.unwrap();
    step("end refused session", refused.end()).await.unwrap();
    step("close", connection.close()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fe2o3_refusals_leave_the_connection_usable() {
    let broker = start_with(|c| {
        c.queues.auto_create = false;
        c.queues.declare = vec!["declared".into()];
    })
    .await;
    fe2o3_refused(&broker, "/quorum/orders", "NotFound").await;
    fe2o3_refused(&broker, "/queues/unknown", "NotFound").await;
    // (A refused consumer is checked on the wire in refusals_on_the_wire.)
    stop(broker).await;
}
