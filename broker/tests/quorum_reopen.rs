//! A restarted node opens every quorum queue it finds on disk, several at
//! once (`quorum/reopen.rs`): each one is open when the broker has
//! started, before any client names it, and holds its messages; one that
//! cannot be opened fails the start, which lets go of the node's files so
//! a start after the repair succeeds.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use ramqpd_broker::queue::Queue;
use ramqpd_broker::{Broker, BrokerConfig};

/// More queues than are opened at once, so several rounds of opens run.
const QUEUES: usize = 12;

fn name(i: usize) -> String {
    format!("reopen-{i}")
}

/// Queue `i`'s messages: a different number per queue, so a queue served
/// with another's state shows.
fn messages(i: usize) -> Vec<String> {
    (0..=i % 4).map(|n| format!("{}-m{n}", name(i))).collect()
}

/// The names of the quorum queues the node has open.
fn open_names(broker: &Broker) -> BTreeSet<String> {
    broker
        .quorum()
        .queues()
        .iter()
        .map(|q| q.address().name().to_owned())
        .collect()
}

/// The directory of the group of queue `queue` under the data directory.
fn group_dir(data: &Path, queue: &str) -> PathBuf {
    let quorum = data.join("quorum");
    std::fs::read_dir(&quorum)
        .expect("quorum directory")
        .map(|entry| entry.expect("directory entry").path())
        .find(|dir| {
            std::fs::read_to_string(dir.join("queue-name"))
                .ok()
                .as_deref()
                == Some(queue)
        })
        .unwrap_or_else(|| panic!("no group directory names {queue}"))
}

async fn start(config: &BrokerConfig) -> Broker {
    within(
        Duration::from_secs(30),
        "broker start",
        Broker::start(config.clone()),
    )
    .await
    .expect("broker starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_opens_every_queue_on_disk_with_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..BrokerConfig::default()
    };
    let broker = start(&config).await;
    for i in 0..QUEUES {
        let accepted = publish(broker.local_addr(), &name(i), &messages(i)).await;
        assert_eq!(
            accepted,
            messages(i),
            "every publish to {} is accepted",
            name(i)
        );
    }
    let all: BTreeSet<String> = (0..QUEUES).map(name).collect();
    assert_eq!(open_names(&broker), all);
    broker.shutdown().await;

    let broker = start(&config).await;
    assert_eq!(
        open_names(&broker),
        all,
        "every queue on disk is open once the node has started"
    );
    for i in 0..QUEUES {
        let got = consume(broker.local_addr(), &name(i), 100).await;
        assert_eq!(got, messages(i), "{} came back with its messages", name(i));
    }
    broker.shutdown().await;

    // One queue's snapshot file is garbage: the start fails (it does not
    // skip the queue, nor hang), and lets go of the node's files.
    let bad = group_dir(dir.path(), &name(7)).join("snapshot.bin");
    let good = std::fs::read(&bad).ok();
    std::fs::write(&bad, b"not a snapshot").unwrap();
    let failed = within(
        Duration::from_secs(30),
        "failing broker start",
        Broker::start(config.clone()),
    )
    .await;
    assert!(
        failed.is_err(),
        "a queue that cannot be opened fails the start"
    );
    match good {
        Some(bytes) => std::fs::write(&bad, bytes).unwrap(),
        None => std::fs::remove_file(&bad).unwrap(),
    }
    let broker = within(
        Duration::from_secs(5),
        "start after the repair (the failed one let go of the log store)",
        Broker::start(config.clone()),
    )
    .await
    .expect("broker starts after the repair");
    assert_eq!(open_names(&broker), all);
    broker.shutdown().await;
}
