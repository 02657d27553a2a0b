//! The HTTP management API of a 3-node embedded cluster: each node
//! answers for itself (members, the queue's leader and replicas), a
//! quorum queue's leadership moves to the node named in
//! `POST .../move-leadership`, and a transient queue is declared only
//! through the node that holds it (another node answers 409 naming it).

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

fn http_addr(broker: &Broker) -> SocketAddr {
    broker.http_addr().expect("the HTTP endpoint is on")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_leadership_in_a_cluster() {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    base.http.listen = Some("127.0.0.1:0".parse().unwrap());
    let cluster = step("cluster start", Cluster::start(3, base))
        .await
        .expect("cluster starts");
    let node1 = http_addr(cluster.node(1).unwrap());
    let declared = call("PUT", "/api/queues/quorum/moving", None)
        .send(node1)
        .await;
    assert_eq!(declared.status, 201, "{declared:?}");
    // Through the log once, so every replica has caught up with it.
    publish(cluster.addr(1).unwrap(), "moving", &["one".to_owned()]).await;
    eventually(Duration::from_secs(30), "the queue has a leader", || {
        cluster.leader_of("moving").is_some()
    })
    .await;
    let leader = cluster.leader_of("moving").expect("a leader");
    let target = if leader == 3 { 2 } else { 3 };
    let at_leader = http_addr(cluster.node(leader).unwrap());
    let shown = call("GET", "/api/queues/quorum/moving", None)
        .send(at_leader)
        .await
        .json();
    assert_eq!(shown["leader"], leader, "{shown}");
    assert_eq!(
        shown["members"].as_array().map(Vec::len),
        Some(3),
        "{shown}"
    );
    let nodes = call("GET", "/api/nodes", None).send(at_leader).await.json();
    assert_eq!(nodes.as_array().map(Vec::len), Some(3), "{nodes}");
    let mut moving = call("POST", "/api/queues/quorum/moving/move-leadership", None);
    let body = format!("{{\"to\": {target}}}");
    moving.body = Some(&body);
    let moved = moving.send(at_leader).await;
    assert_eq!(moved.status, 200, "{moved:?}");
    eventually(Duration::from_secs(30), "the target leads", || {
        cluster.leader_of("moving") == Some(target)
    })
    .await;
    // A transient queue is declared through the node that holds it.
    let mut elsewhere = None;
    for i in 0..32 {
        let path = format!("/api/queues/queues/spread-{i}");
        let answer = call("PUT", &path, None).send(node1).await;
        match answer.status {
            201 => continue,
            409 => {
                let why = answer.json()["error"].as_str().unwrap().to_owned();
                elsewhere = Some((path, why));
                break;
            }
            _ => panic!("{answer:?}"),
        }
    }
    let (path, why) = elsewhere.expect("one of 32 names is held by another node");
    let owner: u64 = why
        .split("node ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("{why}"));
    let at_owner = http_addr(cluster.node(owner).unwrap());
    assert_eq!(call("PUT", &path, None).send(at_owner).await.status, 201);
    within(
        Duration::from_secs(30),
        "cluster shutdown",
        cluster.shutdown(),
    )
    .await;
}
