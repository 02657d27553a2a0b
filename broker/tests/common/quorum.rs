//! Quorum-queue helpers shared by the cluster tests: fast Raft timings,
//! publish/consume through a node with the third-party client, and the
//! checker that counts lost (accepted, never delivered) and duplicate
//! deliveries.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::{Connection, Receiver, Sender};
use ramqpd_broker::BrokerConfig;

use super::fe2o3::{begin_session, Conn, Sess};
use super::wait::{eventually, step, within, STEP};

/// Raft timings short enough for quick fail-over in tests. Every cluster
/// test starts here, so it also installs the opt-in logs
/// (`RAMQP_TEST_LOG`, see `trace.rs`).
pub fn fast_raft(config: &mut BrokerConfig) {
    super::trace::trace_from_env();
    config.quorum.heartbeat_interval_ms = 100;
    config.quorum.election_timeout_min_ms = 600;
    config.quorum.election_timeout_max_ms = 1200;
    config.quorum.publish_timeout_ms = 3000;
}

/// Open an anonymous connection to the node at `addr`.
pub async fn open_at(addr: std::net::SocketAddr, id: &str) -> Conn {
    within(
        Duration::from_secs(5),
        "fe2o3 connection open",
        Connection::open(id.to_string(), format!("amqp://{addr}").as_str()),
    )
    .await
    .expect("connection opens")
}

/// A connection through `addr` with a session and a sender link to
/// `/quorum/<queue>`, attached within a step.
pub async fn open_sender(addr: std::net::SocketAddr, queue: &str) -> (Conn, Sess, Sender) {
    let mut connection = open_at(addr, "publisher").await;
    let mut session = begin_session(&mut connection).await;
    let sender = step(
        "sender attach",
        Sender::attach(&mut session, "tx", format!("/quorum/{queue}")),
    )
    .await
    .expect("sender attaches");
    (connection, session, sender)
}

/// Close what [`open_sender`] opened. Bounded: a node that never answers
/// a close must fail the test's next step, not hang it.
pub async fn close_sender((mut connection, mut session, sender): (Conn, Sess, Sender)) {
    let _ = tokio::time::timeout(Duration::from_secs(5), sender.close()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), session.end()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), connection.close()).await;
}

/// Publish `texts` to `/quorum/<queue>` through `addr`, each waiting for its
/// outcome; returns the texts that were accepted.
pub async fn publish(addr: std::net::SocketAddr, queue: &str, texts: &[String]) -> Vec<String> {
    let (connection, session, mut sender) = open_sender(addr, queue).await;
    let mut accepted = Vec::new();
    for text in texts {
        let outcome = step("send", sender.send(text.clone())).await.expect("send");
        if let Outcome::Accepted(_) = outcome {
            accepted.push(text.clone());
        }
    }
    close_sender((connection, session, sender)).await;
    accepted
}

/// Consume up to `n` messages from `/quorum/<queue>` through the node at
/// `addr`, accepting each, until a quiet 2 s.
pub async fn consume(addr: std::net::SocketAddr, queue: &str, n: usize) -> Vec<String> {
    receive_accepting(addr, queue, n, 0, Duration::ZERO, Duration::from_secs(2)).await
}

/// Consume from `/quorum/<queue>` through the node at `addr` until at
/// least `want` messages arrived (waiting out an election: up to `limit`),
/// then until a quiet second, so duplicates show too.
pub async fn consume_at_least(
    addr: std::net::SocketAddr,
    queue: &str,
    want: usize,
    limit: Duration,
) -> Vec<String> {
    receive_accepting(addr, queue, usize::MAX, want, limit, Duration::from_secs(1)).await
}

/// Receive and accept at most `max` messages: while fewer than `want`
/// arrived, wait for the next until `limit` from now; after that, until
/// a gap of `quiet`.
async fn receive_accepting(
    addr: std::net::SocketAddr,
    queue: &str,
    max: usize,
    want: usize,
    limit: Duration,
    quiet: Duration,
) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut connection = open_at(addr, "consumer").await;
    let mut session = begin_session(&mut connection).await;
    // The attach answers once the queue's leader serves, which after an
    // election (and its entry of its own term applied) may take longer
    // than one step: it too may wait out an election, up to `limit`.
    let mut receiver = within(
        limit.max(STEP),
        "receiver attach",
        Receiver::attach(&mut session, "rx", format!("/quorum/{queue}")),
    )
    .await
    .expect("receiver attaches");
    let mut got = Vec::new();
    while got.len() < max {
        let wait = if got.len() < want {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        } else {
            quiet
        };
        let Ok(delivery) = tokio::time::timeout(wait, receiver.recv::<String>()).await else {
            break;
        };
        let delivery = delivery.expect("receive");
        got.push(delivery.body().clone());
        step("accept", receiver.accept(&delivery))
            .await
            .expect("accept");
    }
    let _ = receiver.close().await;
    let _ = session.end().await;
    let _ = connection.close().await;
    got
}

/// The checker: accepted texts never received (lost) and how many
/// deliveries repeated an earlier one (duplicates).
pub fn check_delivered<'a>(
    accepted: &'a [String],
    received: &[String],
) -> (Vec<&'a String>, usize) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for text in received {
        *seen.entry(text).or_default() += 1;
    }
    let lost = accepted
        .iter()
        .filter(|t| !seen.contains_key(t.as_str()))
        .collect();
    let duplicates = seen.values().map(|n| n - 1).sum();
    (lost, duplicates)
}

pub fn texts(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("m-{i}")).collect()
}

/// Live counts of a steady publisher and consumer, for waiting on
/// progress while they run.
#[derive(Default)]
pub struct Counts {
    pub accepted: AtomicUsize,
    pub released: AtomicUsize,
    pub received: AtomicUsize,
}

impl Counts {
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    pub fn released(&self) -> usize {
        self.released.load(Ordering::Relaxed)
    }

    pub fn received(&self) -> usize {
        self.received.load(Ordering::Relaxed)
    }
}

/// Publish unique texts to `/quorum/<queue>` on one link until `stop`;
/// `released` ones are counted and sent again. The accepted texts, or why
/// the link ended.
pub async fn keep_publishing(
    addr: std::net::SocketAddr,
    queue: &'static str,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> Result<Vec<String>, String> {
    let mut connection = open_at(addr, "steady-pub").await;
    let mut session = begin_session(&mut connection).await;
    let mut sender = step(
        "sender attach",
        Sender::attach(&mut session, "tx", format!("/quorum/{queue}")),
    )
    .await
    .map_err(|e| format!("{e:?}"))?;
    let mut accepted = Vec::new();
    let mut next = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let text = format!("m-{next}");
        match tokio::time::timeout(Duration::from_secs(20), sender.send(text.clone())).await {
            Ok(Ok(Outcome::Accepted(_))) => {
                accepted.push(text);
                counts.accepted.fetch_add(1, Ordering::Relaxed);
                next += 1;
            }
            Ok(Ok(_)) => {
                counts.released.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(Err(e)) => return Err(format!("publisher link failed: {e:?}")),
            Err(_) => return Err("a publish got no outcome within 20 s".into()),
        }
    }
    let _ = sender.close().await;
    let _ = connection.close().await;
    Ok(accepted)
}

/// Consume from `/quorum/<queue>` on one link, accepting, until `stop`
/// and a quiet 3 s.
pub async fn keep_consuming(
    addr: std::net::SocketAddr,
    queue: &'static str,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> Result<Vec<String>, String> {
    let mut connection = open_at(addr, "steady-sub").await;
    let mut session = begin_session(&mut connection).await;
    let mut receiver = step(
        "receiver attach",
        Receiver::attach(&mut session, "rx", format!("/quorum/{queue}")),
    )
    .await
    .map_err(|e| format!("{e:?}"))?;
    let mut received = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(3), receiver.recv::<String>()).await {
            Ok(Ok(delivery)) => {
                received.push(delivery.body().clone());
                counts.received.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = receiver.accept(&delivery).await {
                    return Err(format!("accept failed: {e:?}"));
                }
            }
            Ok(Err(e)) => return Err(format!("consumer link failed: {e:?}")),
            Err(_) if stop.load(Ordering::Relaxed) => break,
            Err(_) => {}
        }
    }
    let _ = receiver.close().await;
    let _ = connection.close().await;
    Ok(received)
}

/// Stop a steady publisher and consumer (`keep_publishing`,
/// `keep_consuming`) and collect what each saw: the accepted texts and
/// the received ones. Panics if either link was detached on the way.
pub async fn stop_steady_clients(
    stop: &AtomicBool,
    publisher: tokio::task::JoinHandle<Result<Vec<String>, String>>,
    consumer: tokio::task::JoinHandle<Result<Vec<String>, String>>,
) -> (Vec<String>, Vec<String>) {
    stop.store(true, Ordering::Relaxed);
    let accepted = within(Duration::from_secs(30), "publisher ends", publisher)
        .await
        .unwrap()
        .expect("the publisher's link was never detached");
    let received = within(Duration::from_secs(60), "consumer ends", consumer)
        .await
        .unwrap()
        .expect("the consumer's link was never detached");
    (accepted, received)
}

/// The leader of `queue` once some running node of `cluster` reports one
/// (other than `not`, when given), within `limit`.
pub async fn wait_for_leader(
    cluster: &ramqpd_broker::Cluster,
    queue: &str,
    not: Option<u64>,
    limit: Duration,
) -> u64 {
    let mut leader = None;
    eventually(limit, "a leader", || {
        leader = cluster.leader_of(queue).filter(|l| Some(*l) != not);
        leader.is_some()
    })
    .await;
    leader.expect("eventually returned with a leader")
}

/// The leader of `/quorum/<queue>` as node `node`'s replica knows it.
pub fn leader_seen_by(cluster: &ramqpd_broker::Cluster, node: u64, queue: &str) -> Option<u64> {
    let address = ramqpd_broker::queue::QueueAddress::parse(&format!("/quorum/{queue}")).ok()?;
    cluster.node(node)?.quorum().get(&address)?.leader()
}

/// The stats of node `node`'s replica of `/quorum/<queue>`, if that node
/// runs and holds one.
pub fn replica_stats(
    cluster: &ramqpd_broker::Cluster,
    node: u64,
    queue: &str,
) -> Option<ramqpd_broker::queue::QueueStats> {
    let address = ramqpd_broker::queue::QueueAddress::parse(&format!("/quorum/{queue}"))
        .expect("a quorum queue address");
    let replica = cluster.node(node)?.quorum().get(&address)?;
    Some(ramqpd_broker::queue::Queue::stats(replica.as_ref()))
}

/// Waits up to `limit` until every running node of `cluster` holds a
/// replica of `/quorum/<queue>` with `ready` messages: the declaration
/// and the log reached all of them. A test that stops a node right after
/// its first publishes needs this: the third node may not have applied
/// the declaration yet (the metadata leader can be the node stopped), and
/// then stopping one node leaves the queue's leader without a quorum.
pub async fn wait_replicated(
    cluster: &ramqpd_broker::Cluster,
    queue: &str,
    ready: usize,
    limit: Duration,
) {
    eventually(limit, "every node holds the queue's messages", || {
        cluster
            .running()
            .into_iter()
            .all(|n| replica_stats(cluster, n, queue).map(|s| s.ready) == Some(ready))
    })
    .await;
}

/// The leader of `queue` (awaited up to `limit`) and the two other
/// running nodes of a 3-node `cluster`.
pub async fn roles(
    cluster: &ramqpd_broker::Cluster,
    queue: &str,
    limit: Duration,
) -> (u64, u64, u64) {
    let leader = wait_for_leader(cluster, queue, None, limit).await;
    let others: Vec<u64> = cluster
        .running()
        .into_iter()
        .filter(|n| *n != leader)
        .collect();
    (leader, others[0], others[1])
}

/// Every segment file (`*.seg`, paged message bodies) under a node's data
/// dir, sorted.
pub fn segment_files(data_dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![data_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "seg") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
