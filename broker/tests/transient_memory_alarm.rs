//! The memory alarm holds back publishers to transient queues too: with
//! `memory_high_watermark_bytes` a little above the process's resident
//! memory, a real allocation in this (the broker's) process raises the
//! alarm; the publisher then gets no new credit (no refusal, nothing
//! lost); when the memory is freed it finishes by itself and every
//! message is there, in order.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::Sender;
use ramqpd_broker::process::resident_bytes;
use ramqpd_broker::{Broker, BrokerConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_memory_holds_transient_publishers_back_until_it_is_freed() {
    let Some(rss) = resident_bytes() else {
        eprintln!("SKIP high_memory_holds...: no /proc/self/statm");
        return;
    };
    let mut config = BrokerConfig::default();
    config.quorum.memory_high_watermark_bytes = rss + 192 * 1024 * 1024;
    let broker = Broker::start(config).await.unwrap();
    assert_eq!(broker.quorum().resource_alarm(), None);

    let accepted = Arc::new(AtomicUsize::new(0));
    let total = 5_000usize;
    // The publisher sends 100, then waits for the alarm before going on:
    // free-running, it could finish all 5,000 before the alarm's next
    // check (every 500 ms) and leave nothing to hold back.
    let (alarm_raised, mut alarm_seen) = tokio::sync::watch::channel(false);
    let publisher = {
        let accepted = accepted.clone();
        let addr = broker.local_addr();
        tokio::spawn(async move {
            let mut connection = open_at(addr, "memory-publisher").await;
            let mut session = begin_session(&mut connection).await;
            let mut sender = Sender::attach(&mut session, "tx", "/queues/memory-alarm")
                .await
                .expect("sender attaches");
            for i in 0..total {
                let outcome = sender.send(format!("m{i:05}")).await.expect("send");
                assert!(
                    matches!(outcome, Outcome::Accepted(_)),
                    "message {i}: {outcome:?}"
                );
                accepted.fetch_add(1, Ordering::SeqCst);
                if i == 99 {
                    alarm_seen.wait_for(|raised| *raised).await.expect("gate");
                }
            }
            let _ = sender.close().await;
            let _ = connection.close().await;
        })
    };
    eventually(Duration::from_secs(20), "some publishes accepted", || {
        accepted.load(Ordering::SeqCst) >= 100
    })
    .await;

    // 512 MiB written (so resident), well above the watermark.
    let ballast = vec![1u8; 512 * 1024 * 1024];
    eventually(Duration::from_secs(10), "the memory alarm", || {
        broker.quorum().resource_alarm().is_some()
    })
    .await;
    let reason = broker.quorum().resource_alarm().unwrap();
    assert!(reason.contains("memory_high_watermark_bytes"), "{reason}");
    alarm_raised.send_replace(true);

    // Publishing stops within the credit already granted (1,000 a link):
    // no accept for a whole second.
    publishing_is_held_back(&accepted, total, 1_000, "memory is high").await;

    // The memory goes back to the system: the publisher finishes.
    // (Read it, so the allocation cannot be optimized away.)
    assert!(ballast.iter().step_by(4096).all(|b| *b == 1));
    drop(ballast);
    within(Duration::from_secs(30), "the publisher finishes", publisher)
        .await
        .expect("publisher task");
    assert_eq!(broker.quorum().resource_alarm(), None);
    let mut connection = open_at(broker.local_addr(), "memory-consumer").await;
    let mut session = begin_session(&mut connection).await;
    let mut receiver = attach_receiver(&mut session, "rx", "memory-alarm", total as u32).await;
    for i in 0..total {
        let (delivery, text) = recv_text(&mut receiver).await;
        assert_eq!(text, format!("m{i:05}"), "every message, in order");
        step("accept", receiver.accept(&delivery)).await.unwrap();
    }
    let _ = receiver.close().await;
    let _ = connection.close().await;
    broker.shutdown().await;
}
