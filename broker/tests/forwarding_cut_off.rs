//! A node cut off from a quorum queue's live leader sends its clients
//! away (detaches their links with an error) well before the leader wait,
//! so they can dial another node; a node watching an ordinary fail-over
//! keeps its clients' links. In-process 3-node clusters, fe2o3-amqp
//! clients; the leader wait is set long (20 s) so that only the early
//! give-up can detach within the bounds asserted here.

use crate::common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fe2o3_amqp::Receiver;
use ramqpd_broker::{BrokerConfig, Cluster};

const LEADER_WAIT: Duration = Duration::from_secs(20);
/// What a detach for a cut may take at most: check-quorum's window or the
/// hold (election time-out max, 1.2 s here), a few searches with 1 s
/// probe time-outs, and slack for a loaded machine; well under the wait.
const CUT_BOUND: Duration = Duration::from_secs(12);

fn config() -> BrokerConfig {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    base.quorum.leader_wait_ms = LEADER_WAIT.as_millis() as u64;
    base
}

/// A receiver on `/quorum/<queue>` at node `node`, attached (with its
/// connection and session, which must outlive it).
async fn receiver_at(cluster: &Cluster, node: u64, queue: &str) -> (Conn, Sess, Receiver) {
    let mut connection = open_at(cluster.addr(node).unwrap(), "cut-rx").await;
    let mut session = begin_session(&mut connection).await;
    let receiver = step(
        "receiver attach",
        Receiver::attach(&mut session, "rx", format!("/quorum/{queue}")),
    )
    .await
    .unwrap();
    (connection, session, receiver)
}

/// Wait for `receiver`'s link to fail (the broker detaches it); how long
/// that took. Panics if it delivers something or outlives `bound`.
async fn detached_within(receiver: &mut Receiver, bound: Duration, what: &str) -> Duration {
    let started = Instant::now();
    match tokio::time::timeout(bound, receiver.recv::<String>()).await {
        Ok(Err(e)) => {
            eprintln!("{what}: detached after {:?}: {e:?}", started.elapsed());
            started.elapsed()
        }
        Ok(Ok(d)) => panic!("{what}: a delivery instead of a detach: {:?}", d.body()),
        Err(_) => panic!("{what}: still attached after {bound:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_cut_from_a_live_leader_detaches_its_clients_early() {
    trace_from_env();
    let cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "bridge", &[]).await;
    let leader = wait_for_leader(&cluster, "bridge", None, Duration::from_secs(10)).await;
    let mut others = cluster.running().into_iter().filter(|n| *n != leader);
    let (cut, bridge) = (others.next().unwrap(), others.next().unwrap());
    let (mut connection, _session, mut receiver) = receiver_at(&cluster, cut, "bridge").await;

    // Leader and `cut` cannot talk; both still talk to `bridge`.
    cluster.set_partitioned(leader, cut, true);
    let took = detached_within(&mut receiver, CUT_BOUND, "consumer on the cut follower").await;
    assert!(took < LEADER_WAIT);
    // The queue itself is fine: same leader, served through the bridge.
    let accepted = publish(cluster.addr(bridge).unwrap(), "bridge", &texts(0..5)).await;
    assert_eq!(
        accepted,
        texts(0..5),
        "the leader serves on through the bridge node"
    );
    assert_eq!(cluster.leader_of("bridge"), Some(leader));
    // A new link on the cut node is answered within the grace, not the
    // whole leader wait (a publish there is never accepted).
    let started = Instant::now();
    let refused = publish(cluster.addr(cut).unwrap(), "bridge", &texts(5..6)).await;
    assert!(refused.is_empty(), "accepted on the cut node: {refused:?}");
    assert!(
        started.elapsed() < CUT_BOUND,
        "took {:?}",
        started.elapsed()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;

    // After the heal the cut node serves its clients again.
    cluster.set_partitioned(leader, cut, false);
    let mut got = Vec::new();
    within(
        Duration::from_secs(30),
        "consuming on the healed node",
        async {
            while got.len() < 5 {
                got.extend(consume(cluster.addr(cut).unwrap(), "bridge", 5 - got.len()).await);
            }
        },
    )
    .await;
    assert_eq!(got, texts(0..5));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_stops_serving_and_detaches_its_clients() {
    let cluster = Cluster::start(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "alone", &[]).await;
    let leader = wait_for_leader(&cluster, "alone", None, Duration::from_secs(10)).await;
    let (mut connection, _session, mut receiver) = receiver_at(&cluster, leader, "alone").await;
    let followers: Vec<u64> = cluster
        .running()
        .into_iter()
        .filter(|n| *n != leader)
        .collect();
    for f in &followers {
        cluster.set_partitioned(leader, *f, true);
    }
    // Without check-quorum the isolated leader kept this link until the heal.
    detached_within(&mut receiver, CUT_BOUND, "consumer on the isolated leader").await;
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.close()).await;
    // The majority elects another leader and serves through either node.
    let accepted = publish(cluster.addr(followers[0]).unwrap(), "alone", &texts(0..3)).await;
    assert_eq!(accepted, texts(0..3));
    for f in &followers {
        cluster.set_partitioned(leader, *f, false);
    }
    let got = consume_at_least(
        cluster.addr(leader).unwrap(),
        "alone",
        3,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        got,
        texts(0..3),
        "the healed node serves the majority's messages"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_a_fail_over_not_a_cut() {
    // The survivors name the dead leader for a while; that must not look
    // like a leader that is alive but unreachable.
    let mut cluster = Cluster::start_lossy(3, config()).await.unwrap();
    publish(cluster.addr(1).unwrap(), "failover", &[]).await;
    let leader = wait_for_leader(&cluster, "failover", None, Duration::from_secs(10)).await;
    let follower = cluster
        .running()
        .into_iter()
        .find(|n| *n != leader)
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let at = cluster.addr(follower).unwrap();
    let publisher = tokio::spawn(keep_publishing(
        at,
        "failover",
        stop.clone(),
        counts.clone(),
    ));
    let consumer = tokio::spawn(keep_consuming(at, "failover", stop.clone(), counts.clone()));
    eventually(Duration::from_secs(20), "publishing starts", || {
        counts.accepted() >= 50
    })
    .await;
    cluster.crash(leader).await.unwrap();
    let before = counts.accepted();
    eventually(Duration::from_secs(30), "publishing resumes", || {
        counts.accepted() >= before + 50
    })
    .await;
    let (accepted, received) = stop_steady_clients(&stop, publisher, consumer).await;
    let (lost, _) = check_delivered(&accepted, &received);
    assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    cluster.shutdown().await;
}
