//! A drain on a deep paged quorum queue hands out every message its credit
//! covers, not only the leader's dispatcher window (about 1,024 messages):
//! raw frames, so the count of transfers before the drain answer is exact.

use crate::common;

use common::*;
use ramqpd_broker::codec::{Performative, Role};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_covers_its_whole_credit_past_the_window() {
    let broker = start_with(|config| {
        config.quorum.resident_budget_bytes = 0;
    })
    .await;
    let texts: Vec<String> = (0..2_000).map(|i| format!("drain {i:05}")).collect();
    assert_eq!(
        publish(broker.local_addr(), "deepdrain", &texts)
            .await
            .len(),
        2_000
    );

    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    let mut attach = attach(1, Role::Receiver, "x");
    if let Some(source) = attach.source.as_mut() {
        source.address = Some("/quorum/deepdrain".into());
    }
    raw.send(0, Performative::Attach(Box::new(attach))).await;
    loop {
        if let (_, Performative::Attach(_), _) = raw.performative().await {
            break;
        }
    }
    raw.send(0, Performative::Flow(credit_flow(1, 0, 1_800, true)))
        .await;
    let mut transfers = 0;
    let flow = loop {
        match raw.performative().await {
            (_, Performative::Transfer(t), _) => {
                assert_eq!(t.handle, 1);
                if !t.more {
                    transfers += 1;
                }
            }
            (_, Performative::Flow(f), _) if f.handle == Some(1) => break f,
            (_, Performative::Flow(_), _) => continue,
            other => panic!("expected transfers then a flow, got {other:?}"),
        }
    };
    assert_eq!(transfers, 1_800, "the whole credit was used by messages");
    assert_eq!(flow.link_credit, Some(0));
    assert_eq!(flow.delivery_count, Some(1_800));
    drop(raw);
    stop(broker).await;
}
