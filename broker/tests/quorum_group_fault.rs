//! A fault of one quorum group with a healthy log store (fe2o3-amqp, real
//! files): the group's snapshot cannot be written, so openraft stops that
//! group's core, and the node must report it through `Broker::fatal` (a
//! node that silently stops serving one queue is half alive). The store
//! itself stays healthy: another queue on the node still takes publishes.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use fe2o3_amqp::types::messaging::Outcome;
use ramqpd_broker::{Broker, BrokerConfig, FatalError};

fn config(dir: &Path) -> BrokerConfig {
    let mut config = BrokerConfig {
        data_dir: Some(dir.to_path_buf()),
        ..BrokerConfig::default()
    };
    // Snapshots by log bytes only, after a few KiB.
    config.quorum.snapshot_every_entries = 1_000_000;
    config.quorum.snapshot_min_log_bytes = 4 * 1024;
    config
}

/// The replica directories of the node's quorum groups (named by their
/// group id, 16 hex digits).
fn group_dirs(data_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![data_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.len() == 16 && name.chars().all(|c| c.is_ascii_hexdigit()) {
                found.push(path);
            } else {
                stack.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Publish `n` padded messages to `/quorum/<queue>` until one is not
/// accepted (the group may stop part-way); returns how many were.
async fn publish_until_refused(addr: std::net::SocketAddr, queue: &str, n: usize) -> usize {
    let (connection, session, mut sender) = open_sender(addr, queue).await;
    let mut accepted = 0;
    for i in 0..n {
        let text = format!("message {i:05} {}", "z".repeat(200));
        match tokio::time::timeout(Duration::from_secs(10), sender.send(text)).await {
            Ok(Ok(Outcome::Accepted(_))) => accepted += 1,
            _ => break,
        }
    }
    close_sender((connection, session, sender)).await;
    accepted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_snapshot_cannot_be_written_is_reported_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(config(dir.path())).await.unwrap();

    assert_eq!(
        publish_until_refused(broker.local_addr(), "faulty", 1).await,
        1
    );
    let dirs = group_dirs(dir.path());
    assert_eq!(dirs.len(), 1, "one group so far: {dirs:?}");
    // A directory where the snapshot's temp file goes: its create fails
    // (EISDIR), so the group's next snapshot fails and openraft stops the
    // group's core on that storage error. The log store is not touched.
    std::fs::create_dir(dirs[0].join("snapshot.bin.tmp")).unwrap();
    assert_eq!(
        publish_until_refused(broker.local_addr(), "healthy", 1).await,
        1
    );

    // ~200 B each: well past the 4 KiB that asks for a snapshot.
    let fatal = broker.fatal();
    let accepted = publish_until_refused(broker.local_addr(), "faulty", 100).await;
    // Those that made the snapshot due (~4 KiB) were taken; the group
    // stopped before the rest.
    assert!((10..100).contains(&accepted), "accepted {accepted} of 100");
    let fault = tokio::time::timeout(Duration::from_secs(30), fatal)
        .await
        .expect("the group's fault is reported");
    match fault {
        FatalError::RaftGroup { group, reason } => {
            assert_eq!(group, "/quorum/faulty", "reason: {reason}");
        }
        other => panic!("a group fault, not {other}"),
    }

    // The store is healthy: the other group still commits.
    assert_eq!(
        publish_until_refused(broker.local_addr(), "healthy", 3).await,
        3
    );
    broker.shutdown().await;
}
