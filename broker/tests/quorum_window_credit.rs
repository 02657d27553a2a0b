//! Regression test: a consumer of a quorum queue that grants more credit
//! than about twice the leader's dispatcher window (1,024 messages,
//! `quorum/feed.rs`) and settles nothing until all of it has arrived
//! stalled for good. Fixed in `feed.rs` `refill`, which now loads the next
//! window while consumers have credit left.
//!
//! Found by `quorum_model.rs` (proptest), minimal sequence: publish 1,030
//! messages, publish 1,030 more, then one receiver with credit 2,060: 2,048
//! arrive, then nothing, although the link has credit 12 and the queue 12
//! ready messages. The leader topped its window up (at most 1,024 messages,
//! or 4 MiB of bodies) only on a flow, a settlement or an apply: a flow
//! refilled before and after handing out, so one flow yields two windows,
//! and with nothing settled and nothing published nothing refills again.
//! Nothing in AMQP 1.0 flow control (2.6.7) makes a receiver settle before
//! its credit is used, and a client that takes a batch of N before
//! acknowledging it waits here forever with credit and ready messages.
//!
//! Not specific to paging: the same with the default resident budget.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::messaging::Message;
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::queue::{Queue, QueueAddress};

const QUEUE: &str = "/quorum/window";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_past_two_windows_is_all_used_without_settling() {
    let broker = start_with(|config| config.quorum.resident_budget_bytes = 0).await;
    let mut connection = connect(&broker, "window").await;
    let mut session = begin_session(&mut connection).await;
    let mut sender = step("sender attach", Sender::attach(&mut session, "tx", QUEUE))
        .await
        .expect("sender attaches");
    let n = 2 * 1_030;
    let mut outcomes = Vec::new();
    for i in 0..n {
        let message = Message::builder().value(format!("m{i:05}")).build();
        let sent = step("publish", sender.send_batchable(message)).await;
        outcomes.push(sent.expect("send"));
    }
    for outcome in outcomes {
        let outcome = step("outcome", outcome).await.expect("outcome");
        assert!(outcome.is_accepted());
    }

    let attach = Receiver::builder()
        .name("rx")
        .source(QUEUE)
        .credit_mode(CreditMode::Manual)
        .attach(&mut session);
    let mut receiver = step("receiver attach", attach).await.expect("attaches");
    step("credit", receiver.set_credit(n as u32))
        .await
        .expect("credit");
    let mut deliveries = Vec::new();
    while deliveries.len() < n {
        let next = tokio::time::timeout(Duration::from_secs(5), receiver.recv::<AnyBody>()).await;
        let Ok(delivery) = next else {
            let address = QueueAddress::parse(QUEUE).unwrap();
            let stats = broker.quorum().get(&address).map(|q| q.stats());
            panic!(
                "stalled after {} of {n} deliveries with credit left (queue: {stats:?})",
                deliveries.len()
            );
        };
        let delivery = delivery.expect("receive");
        assert_eq!(
            body_text(delivery.message()),
            Some(format!("m{:05}", deliveries.len())),
            "in publish order"
        );
        deliveries.push(delivery);
    }
    for delivery in &deliveries {
        step("accept", receiver.accept(delivery)).await.unwrap();
    }
    let _ = connection.close().await;
    stop(broker).await;
}
