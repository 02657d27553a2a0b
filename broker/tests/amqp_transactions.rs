//! Guards against a transaction declaration closing the connection: an
//! attach whose target is the spec's `coordinator` (0x30) used to be a
//! decode error ("unknown descriptor"), which closed the whole connection.
//! Until transactions exist, that link alone is refused (attach with a null
//! target, then a closing detach with amqp:not-implemented) and the
//! connection and its other links go on.

mod common;

use common::*;
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::codec::{DeliveryState, Detach, Performative, Role, Target, TargetKind};

#[tokio::test]
async fn coordinator_link_is_refused_alone() {
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    // A link already working on the session, which must survive.
    raw.attach_publisher(0, 0, "tx-neighbour").await;

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
            assert_eq!(reply.handle, 1);
            assert_eq!(reply.role, Role::Receiver);
            assert!(reply.target.is_none(), "null target: {reply:?}");
        }
        other => panic!("expected the attach reply, got {other:?}"),
    }
    match raw.performative().await {
        (0, Performative::Detach(detach), _) => {
            assert_eq!(detach.handle, 1);
            assert!(detach.closed);
            assert_eq!(
                detach.error.as_ref().map(|e| e.condition.as_str()),
                Some(condition::NOT_IMPLEMENTED),
                "{detach:?}"
            );
        }
        other => panic!("expected the refusing detach, got {other:?}"),
    }
    raw.send(
        0,
        Performative::Detach(Detach {
            handle: 1,
            closed: true,
            error: None,
        }),
    )
    .await;

    // The earlier link still publishes, and a new one consumes.
    let disposition = raw
        .publish(0, 0, 0, &text_message("after the refusal"))
        .await;
    assert_eq!(disposition.state, Some(DeliveryState::Accepted));
    raw.attach_consumer(0, 2, "tx-neighbour").await;
    raw.send(0, Performative::Flow(credit_flow(2, 0, 1, false)))
        .await;
    let delivery = raw.delivery().await;
    assert_eq!(delivery.first.handle, 2);
    assert_eq!(delivery.payload, text_message("after the refusal"));
    stop(broker).await;
}
