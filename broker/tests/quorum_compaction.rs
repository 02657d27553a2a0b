//! Reclaiming sparse segments (fe2o3-amqp, real files): once two of every
//! three messages of a deep paged queue are consumed while the rest stay
//! unsettled, the next snapshot compacts the sealed segments (new files,
//! old ones deleted only after the snapshot names the new locations), and
//! after a restart every remaining message is read from its new place.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::Receiver;
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::{Broker, BrokerConfig};

fn config(dir: &Path) -> BrokerConfig {
    let mut config = BrokerConfig {
        data_dir: Some(dir.to_path_buf()),
        ..BrokerConfig::default()
    };
    config.quorum.resident_budget_bytes = 0;
    config.quorum.segment_max_bytes = 16 * 1024;
    config.quorum.snapshot_every_entries = 1_000_000;
    config.quorum.snapshot_min_log_bytes = 4 * 1024;
    config.quorum.log_entries_kept_after_snapshot = 5;
    config
}

fn padded(range: std::ops::Range<usize>) -> Vec<String> {
    range
        .map(|i| format!("message {i:05} {}", "y".repeat(80)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparse_segments_are_compacted_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(config(dir.path())).await.unwrap();
    let first = padded(0..600);
    assert_eq!(publish(broker.local_addr(), "sparse", &first).await, first);
    let before = segment_files(dir.path());
    assert!(before.len() >= 3, "several sealed segments: {before:?}");

    // Take all 600; accept two of every three, keep the third unsettled.
    let mut connection = open_at(broker.local_addr(), "sparse-reader").await;
    let mut session = begin_session(&mut connection).await;
    let mut receiver = step(
        "receiver attach",
        Receiver::builder()
            .name("rx")
            .source("/quorum/sparse")
            .credit_mode(CreditMode::Manual)
            .attach(&mut session),
    )
    .await
    .expect("receiver attaches");
    step("credit", receiver.set_credit(600)).await.unwrap();
    let mut kept = Vec::new();
    for (i, sent) in first.iter().enumerate() {
        let delivery = step("receive", receiver.recv::<String>()).await.unwrap();
        assert_eq!(delivery.body(), sent);
        if i % 3 == 2 {
            kept.push(delivery.body().clone());
        } else {
            step("accept", receiver.accept(&delivery)).await.unwrap();
        }
    }

    // More log (publishes to the same queue) brings the next snapshots,
    // which compact the sparse sealed segments.
    let second = padded(600..700);
    assert_eq!(
        publish(broker.local_addr(), "sparse", &second).await,
        second
    );
    eventually(Duration::from_secs(20), "the old segments replaced", || {
        let now = segment_files(dir.path());
        before.iter().filter(|p| now.contains(p)).count() < before.len() - 1
    })
    .await;

    // The unsettled third comes back, then the newer messages, in order,
    // read from where compaction put them, also after a restart.
    let _ = receiver.close().await;
    let _ = connection.close().await;
    broker.shutdown().await;
    let broker = Broker::start(config(dir.path())).await.unwrap();
    let address = QueueAddress::parse("/quorum/sparse").unwrap();
    assert!(broker.quorum().get(&address).is_some());
    let mut expected = kept;
    expected.extend(second);
    assert_eq!(
        consume(broker.local_addr(), "sparse", 10_000).await,
        expected
    );
    broker.shutdown().await;
}
