//! The HTTP endpoint (`http.listen`) over real sockets: `/healthz` and
//! `/readyz` (also 503 when the node is not ready: a disk alarm, a cluster
//! node whose metadata has no leader), `/metrics` parsed as Prometheus text
//! with per-queue figures that follow a real AMQP client (fe2o3-amqp)
//! publishing and consuming, and the refusals: an unknown path (404), a
//! method other than GET/HEAD (405), an oversized head (431) and body
//! (413).
//!
//! The ignored `scrape_with_10000_queues` times a scrape of a node with
//! 10,000 transient queues (run it in release, see docs/benchmarks.md);
//! nothing here asserts a time.

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use fe2o3_amqp::Sender;
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

async fn get(addr: SocketAddr, path: &str) -> Answer {
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    exchange(addr, request.as_bytes()).await
}

fn http_addr(broker: &Broker) -> SocketAddr {
    broker.http_addr().expect("the HTTP endpoint is on")
}

fn with_http(config: &mut BrokerConfig) {
    config.http.listen = Some("127.0.0.1:0".parse().expect("an address"));
}

/// GET `path` until `check` holds for the answer; fail after `limit`.
async fn get_until(
    addr: SocketAddr,
    path: &str,
    limit: Duration,
    what: &str,
    check: impl Fn(&Answer) -> bool,
) -> Answer {
    let deadline = Instant::now() + limit;
    loop {
        let answer = get(addr, path).await;
        if check(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {limit:?}; last answer {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The samples of a Prometheus text exposition, by `name{labels}`; fails
/// on any line that is not a comment, a `# HELP`/`# TYPE` line or a valid
/// sample of a family whose `# TYPE` came before.
fn parse_prometheus(text: &str) -> BTreeMap<String, f64> {
    let valid_name = |name: &str| {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut typed: Vec<String> = Vec::new();
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let name = parts.next().unwrap_or_default();
            let kind = parts.next().unwrap_or_default();
            assert!(valid_name(name), "bad family name in {line:?}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "bad type in {line:?}"
            );
            typed.push(name.to_owned());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let name = series.split('{').next().unwrap_or_default();
        assert!(valid_name(name), "bad metric name in {line:?}");
        if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
            let inner = labels
                .strip_prefix('{')
                .and_then(|l| l.strip_suffix('}'))
                .unwrap_or_else(|| panic!("bad labels in {line:?}"));
            for pair in inner.split("\",").filter(|p| !p.is_empty()) {
                let (key, quoted) = pair.split_once("=\"").unwrap_or_else(|| panic!("{line:?}"));
                assert!(valid_name(key), "bad label name in {line:?}");
                assert!(!quoted.trim_end_matches('"').contains('"'), "{line:?}");
            }
        }
        assert!(
            typed.iter().any(|family| name.starts_with(family.as_str())),
            "sample {name} before its # TYPE line"
        );
        assert!(
            samples.insert(series.to_owned(), value).is_none(),
            "sample {series} twice"
        );
    }
    samples
}

async fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let answer = get(addr, "/metrics").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    parse_prometheus(&answer.body)
}

fn queue_figure(samples: &BTreeMap<String, f64>, name: &str, address: &str) -> f64 {
    let series = format!("{name}{{address=\"{address}\"}}");
    *samples
        .get(&series)
        .unwrap_or_else(|| panic!("no {series} in the scrape"))
}

#[tokio::test]
async fn health_and_readiness_answer_and_unknown_paths_are_404() {
    let broker = start_with(with_http).await;
    let addr = http_addr(&broker);
    let health = get(addr, "/healthz").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    get_until(addr, "/readyz", STEP, "single node ready", |a| {
        a.status == 200
    })
    .await;
    // The status page is served at /, its script inline, calling the API.
    let page = get(addr, "/").await;
    assert_eq!(page.status, 200);
    assert!(page.body.starts_with("<!doctype html>"), "{page:?}");
    assert!(page.body.contains("fetch(path"), "{page:?}");
    assert!(page.body.contains("/api/queues"), "{page:?}");
    assert_eq!(get(addr, "/nope").await.status, 404);
    assert_eq!(get(addr, "/metrics/extra").await.status, 404);
    let post = exchange(
        addr,
        b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
    )
    .await;
    assert_eq!(post.status, 405);
    // Two requests on one kept-alive connection are both answered.
    let two = exchange(
        addr,
        b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(two.status, 200);
    assert!(two.body.contains("HTTP/1.1 200"), "{two:?}");
    stop(broker).await;
}

#[tokio::test]
async fn oversized_requests_are_refused() {
    let broker = start_with(with_http).await;
    let addr = http_addr(&broker);
    let big_head = format!(
        "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(16 * 1024)
    );
    assert_eq!(exchange(addr, big_head.as_bytes()).await.status, 431);
    let declared = b"GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 1048576\r\n\r\n";
    assert_eq!(exchange(addr, declared).await.status, 413);
    let chunked = format!(
        "GET /healthz HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
        64 * 1024,
        "b".repeat(64 * 1024)
    );
    assert_eq!(exchange(addr, chunked.as_bytes()).await.status, 413);
    // Still serving.
    assert_eq!(get(addr, "/healthz").await.status, 200);
    stop(broker).await;
}

#[tokio::test]
async fn a_disk_alarm_makes_the_node_not_ready() {
    let broker = start_with(|config| {
        with_http(config);
        // No disk has this much free: the alarm is raised at the first check.
        config.quorum.min_free_disk_bytes = u64::MAX;
    })
    .await;
    let addr = http_addr(&broker);
    // Until the first disk check, /readyz may be 503 for another reason
    // (no metadata leader yet): wait for the alarm's own answer.
    let answer = get_until(addr, "/readyz", STEP, "disk alarm seen", |a| {
        a.status == 503 && a.body.starts_with("disk alarm: ")
    })
    .await;
    assert!(answer.body.starts_with("disk alarm: "), "{answer:?}");
    // Alive all the same.
    assert_eq!(get(addr, "/healthz").await.status, 200);
    let samples = scrape(addr).await;
    assert_eq!(samples.get("ramqp_disk_alarm"), Some(&1.0));
    assert_eq!(samples.get("ramqp_ready"), Some(&0.0));
    stop(broker).await;
}

#[tokio::test]
async fn metrics_follow_a_real_client() {
    let broker = start_with(with_http).await;
    let addr = http_addr(&broker);
    let mut connection = connect(&broker, "metrics-client").await;
    let mut session = begin_session(&mut connection).await;
    let mut sender = attach_sender(&mut session, "tx", "watched").await;
    for i in 0..3 {
        send_text(&mut sender, &format!("message {i}")).await;
    }
    let samples = scrape(addr).await;
    let figure = |s: &BTreeMap<String, f64>, name: &str| queue_figure(s, name, "/queues/watched");
    assert_eq!(figure(&samples, "ramqp_queue_ready_messages"), 3.0);
    assert_eq!(
        figure(&samples, "ramqp_queue_published_messages_total"),
        3.0
    );
    assert!(figure(&samples, "ramqp_queue_bytes") > 3.0 * 9.0);
    assert!(!samples.contains_key("ramqp_queue_paged_bytes{address=\"/queues/watched\"}"));
    assert_eq!(figure(&samples, "ramqp_queue_consumers"), 0.0);
    assert!(samples["ramqp_connections"] >= 1.0);
    assert!(samples["ramqp_sessions"] >= 1.0);

    let mut receiver = attach_receiver(&mut session, "rx", "watched", 10).await;
    for i in 0..2 {
        let (delivery, text) = recv_text(&mut receiver).await;
        assert_eq!(text, format!("message {i}"));
        step("accept", receiver.accept(&delivery))
            .await
            .expect("accepted");
    }
    // The third is out with the consumer, unsettled.
    let (third, _) = recv_text(&mut receiver).await;
    let samples = get_until(addr, "/metrics", STEP, "settlements counted", |a| {
        a.body
            .contains("ramqp_queue_acknowledged_messages_total{address=\"/queues/watched\"} 2")
    })
    .await;
    let samples = parse_prometheus(&samples.body);
    assert_eq!(figure(&samples, "ramqp_queue_ready_messages"), 0.0);
    assert_eq!(figure(&samples, "ramqp_queue_unacknowledged_messages"), 1.0);
    assert_eq!(
        figure(&samples, "ramqp_queue_delivered_messages_total"),
        3.0
    );
    assert_eq!(figure(&samples, "ramqp_queue_consumers"), 1.0);
    step("accept", receiver.accept(&third))
        .await
        .expect("accepted");

    // A quorum queue: its Raft group, the commit latency and the store.
    let mut quorum_sender = step(
        "quorum sender attach",
        Sender::attach(&mut session, "qtx", "/quorum/watched"),
    )
    .await
    .expect("sender attaches");
    for i in 0..5 {
        send_text(&mut quorum_sender, &format!("quorum {i}")).await;
    }
    let samples = scrape(addr).await;
    let quorum = |name: &str| queue_figure(&samples, name, "/quorum/watched");
    assert_eq!(quorum("ramqp_queue_ready_messages"), 5.0);
    assert_eq!(quorum("ramqp_queue_published_messages_total"), 5.0);
    assert_eq!(quorum("ramqp_queue_paged_bytes"), 0.0);
    let group = |name: &str| samples[&format!("{name}{{group=\"/quorum/watched\"}}")];
    assert!(group("ramqp_raft_term") >= 1.0);
    assert!(group("ramqp_raft_applied_index") >= 1.0);
    // The leader's commit index: at least the five accepted publishes, and
    // never behind what was applied.
    assert!(group("ramqp_raft_commit_index") >= 5.0);
    assert!(group("ramqp_raft_commit_index") >= group("ramqp_raft_applied_index"));
    assert_eq!(group("ramqp_raft_leading"), 1.0);
    assert!(group("ramqp_raft_leader_changes_total") >= 1.0);
    assert_eq!(samples["ramqp_raft_leader_known{group=\"$meta\"}"], 1.0);
    assert!(samples["ramqp_raft_commit_latency_seconds_count"] >= 1.0);
    assert!(samples["ramqp_raft_commit_latency_seconds_bucket{le=\"+Inf\"}"] >= 1.0);
    assert!(samples["ramqp_store_commits_total"] >= 1.0);
    assert!(samples["ramqp_store_written_bytes_total"] > 0.0);
    assert!(samples.contains_key("ramqp_store_journal_folds_total"));
    // Direct journal writes only where the file system takes O_DIRECT
    // (not tmpfs); each is one of the store's durable writes.
    assert!(
        samples["ramqp_store_journal_direct_writes_total"] <= samples["ramqp_store_commits_total"]
    );
    assert_eq!(
        samples["ramqp_store_commit_duration_seconds_count"],
        samples["ramqp_store_commits_total"]
    );
    // Idle for a while, the group stops heartbeating; a publish wakes it.
    get_until(addr, "/metrics", STEP, "the idle quorum group quiet", |a| {
        a.body.contains("\nramqp_raft_groups_quiet 1\n")
    })
    .await;
    send_text(&mut quorum_sender, "wakes it").await;
    get_until(
        addr,
        "/metrics",
        STEP,
        "the group awake after a publish",
        |a| a.body.contains("\nramqp_raft_groups_quiet 0\n"),
    )
    .await;
    // The node-wide scrape: the same group counts and store figures, no
    // sample per queue or group.
    let node = get(addr, "/metrics/node").await;
    assert_eq!(node.status, 200, "{node:?}");
    let node = parse_prometheus(&node.body);
    assert_eq!(node["ramqp_raft_groups"], 1.0);
    assert_eq!(node["ramqp_raft_groups_leading"], 1.0);
    assert!(node["ramqp_store_commits_total"] >= samples["ramqp_store_commits_total"]);
    assert!(node["process_open_fds"] > 0.0);
    let labelled: Vec<&String> = node
        .keys()
        .filter(|k| k.contains("address=") || k.contains("group="))
        .collect();
    assert!(
        labelled.is_empty(),
        "per-queue samples in /metrics/node: {labelled:?}"
    );
    assert!(samples.keys().any(|k| k.contains("address=")));
    assert!(samples["process_resident_memory_bytes"] > 0.0);
    assert!(samples["process_open_fds"] > 0.0);
    assert!(samples.contains_key("process_cpu_seconds_total"));
    assert_eq!(samples["ramqp_ready"], 1.0);

    drop(quorum_sender);
    drop(sender);
    drop(receiver);
    let _ = step("close", connection.close()).await;
    let samples = get_until(addr, "/metrics", STEP, "connection gone", |a| {
        a.body.contains("\nramqp_connections 0\n")
    })
    .await;
    let samples = parse_prometheus(&samples.body);
    assert_eq!(samples["ramqp_sessions"], 0.0);
    assert!(samples["ramqp_connections_opened_total"] >= 1.0);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_metadata_has_no_leader_is_not_ready() {
    let mut config = BrokerConfig::default();
    fast_raft(&mut config);
    with_http(&mut config);
    let mut cluster = step("cluster start", Cluster::start(3, config))
        .await
        .expect("cluster starts");
    let slow = Duration::from_secs(30);
    for id in 1..=3 {
        let addr = http_addr(cluster.node(id).expect("running"));
        get_until(addr, "/readyz", slow, "cluster node ready", |a| {
            a.status == 200
        })
        .await;
    }
    // Two of three gone: node 1 cannot keep or elect a metadata leader.
    cluster.stop(2).await;
    cluster.stop(3).await;
    let addr = http_addr(cluster.node(1).expect("running"));
    let answer = get_until(addr, "/readyz", slow, "node 1 not ready", |a| {
        a.status == 503
    })
    .await;
    assert!(answer.body.contains("metadata"), "{answer:?}");
    assert_eq!(get(addr, "/healthz").await.status, 200);
    // A majority again: ready again.
    step("restart node 2", cluster.restart(2))
        .await
        .expect("restarts");
    get_until(addr, "/readyz", slow, "node 1 ready again", |a| {
        a.status == 200
    })
    .await;
    cluster.shutdown().await;
}

/// Times `/metrics` of a node holding 10,000 transient queues (each with
/// one message). A measurement, not a check: run it in release,
/// `cargo test --release -p ramqpd-broker --test operations http_endpoint:: -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run in release, see docs/benchmarks.md"]
async fn scrape_with_10000_queues() {
    const QUEUES: usize = 10_000;
    let broker = start_with(|config| {
        with_http(config);
        config.queues.declare = (0..QUEUES).map(|i| format!("bench-{i:05}")).collect();
    })
    .await;
    let addr = http_addr(&broker);
    let mut connection = connect(&broker, "filler").await;
    let mut session = begin_session(&mut connection).await;
    let mut sender = attach_sender(&mut session, "tx", "bench-00000").await;
    send_text(&mut sender, "one").await;
    let first = scrape(addr).await;
    let queues = first
        .keys()
        .filter(|k| k.starts_with("ramqp_queue_ready_messages{"))
        .count();
    assert_eq!(queues, QUEUES);
    let mut times = Vec::new();
    let mut bytes = 0;
    let request = b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
    for _ in 0..30 {
        let started = Instant::now();
        let answer = exchange_bytes(addr, request).await;
        times.push(started.elapsed());
        assert!(answer.starts_with(b"HTTP/1.1 200"));
        bytes = answer.len();
    }
    times.sort();
    println!(
        "scrape of {QUEUES} queues, {bytes} bytes: min {:?}, median {:?}, max {:?} (30 scrapes, connect to last byte)",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1]
    );
    let _ = step("close", connection.close()).await;
    stop(broker).await;
}
