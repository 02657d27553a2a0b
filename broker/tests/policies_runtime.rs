//! Queue policies as plumbing, on one broker over real sockets: the
//! `[[policies]]` of the configuration reach the queues whose address
//! matches (the first match wins) and no others, on transient and quorum
//! queues; `PUT /api/policies` (administrator only, checked whole) puts a
//! new set on the queues that exist and on those made after it, and
//! `GET /api/policies` shows it; a bad set is refused at start. What each
//! field does to messages is tested with clients in `policies_*.rs`.

use crate::common;

use std::net::SocketAddr;

use common::*;
use ramqpd_broker::auth::{UserRecord, UsersFile, ADMINISTRATOR_TAG};
use ramqpd_broker::config::{Overflow, PolicyConfig};
use ramqpd_broker::{Broker, BrokerConfig, BrokerError};
use serde_json::json;

const ADMIN: Option<(&str, &str)> = Some(("admin", "admin-pw"));
const APP: Option<(&str, &str)> = Some(("app", "app-pw"));

fn policy(pattern: &str, max_length: u64) -> PolicyConfig {
    PolicyConfig {
        pattern: pattern.into(),
        max_length: Some(max_length),
        ..PolicyConfig::default()
    }
}

/// The `max_length` of the policy the queue at `address` has now.
fn limit(broker: &Broker, address: &str) -> Option<u64> {
    broker.queue_policy(address).and_then(|p| p.max_length)
}

async fn declare(addr: SocketAddr, kind: &str, name: &str) {
    let path = format!("/api/queues/{kind}/{name}");
    let answer = call("PUT", &path, ADMIN).send(addr).await;
    assert!(matches!(answer.status, 201 | 204), "{path}: {answer:?}");
}

async fn put_policies(addr: SocketAddr, login: Option<(&str, &str)>, body: &str) -> Answer {
    let mut put = call("PUT", "/api/policies", login);
    put.body = Some(body);
    put.send(addr).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_reach_matching_queues_and_change_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    let mut file = UsersFile::default();
    file.upsert(
        UserRecord::new("admin", "admin-pw", ".*", ".*", ".*")
            .with_tags(vec![ADMINISTRATOR_TAG.into()]),
    );
    file.upsert(UserRecord::new("app", "app-pw", ".*", ".*", ".*"));
    file.save(&users).unwrap();
    let configured = vec![policy("/queues/limited-*", 5), policy("/*/limited-*", 7)];
    let broker = start_with(|c| {
        c.http.listen = Some("127.0.0.1:0".parse().unwrap());
        c.sasl.users_file = Some(users);
        c.policies = configured.clone();
        fast_raft(c);
    })
    .await;
    let addr = broker.http_addr().unwrap();
    declare(addr, "queues", "limited-a").await;
    declare(addr, "queues", "other").await;
    declare(addr, "quorum", "limited-q").await;

    // From the file: first match wins, non-matching queues have none.
    assert_eq!(limit(&broker, "/queues/limited-a"), Some(5));
    assert_eq!(limit(&broker, "/quorum/limited-q"), Some(7));
    assert_eq!(limit(&broker, "/queues/other"), None);
    assert_eq!(broker.policies(), configured);

    // Shown to administrators only; changed by administrators only.
    let shown = call("GET", "/api/policies", ADMIN).send(addr).await;
    assert_eq!(shown.status, 200, "{shown:?}");
    assert_eq!(
        shown.json(),
        json!([
            {"pattern": "/queues/limited-*", "max_length": 5, "overflow": "reject-publish",
             "single_active_consumer": false},
            {"pattern": "/*/limited-*", "max_length": 7, "overflow": "reject-publish",
             "single_active_consumer": false},
        ])
    );
    assert_eq!(
        call("GET", "/api/policies", APP).send(addr).await.status,
        403
    );
    let replacement = r#"[{"pattern": "/queues/other", "max_length": 1, "overflow": "drop-head"},
                          {"pattern": "/quorum/*", "message_ttl_ms": 60000, "delivery_limit": 3,
                           "dead_letter_address": "/quorum/dlq", "single_active_consumer": true}]"#;
    assert_eq!(put_policies(addr, APP, replacement).await.status, 403);

    // A set that does not check out changes nothing.
    for bad in [
        r#"[{"pattern": "other"}]"#,
        r#"[{"pattern": "/queues/*", "max_len": 1}]"#,
        r#"[{"pattern": "/queues/*", "overflow": "drop-tail"}]"#,
        r#"[{"pattern": "/queues/*", "dead_letter_address": "dlq"}]"#,
        r#"{"pattern": "/queues/*"}"#,
    ] {
        let refused = put_policies(addr, ADMIN, bad).await;
        assert_eq!(refused.status, 400, "{bad}: {refused:?}");
        assert!(refused.json()["error"].is_string(), "{refused:?}");
    }
    assert_eq!(broker.policies(), configured);
    assert_eq!(limit(&broker, "/queues/limited-a"), Some(5));

    // A new set reaches the queues that exist, of both kinds.
    let replaced = put_policies(addr, ADMIN, replacement).await;
    assert_eq!(replaced.status, 200, "{replaced:?}");
    assert_eq!(replaced.json().as_array().map(Vec::len), Some(2));
    assert_eq!(limit(&broker, "/queues/limited-a"), None);
    let other = broker.queue_policy("/queues/other").expect("a policy now");
    assert_eq!(
        (other.max_length, other.overflow),
        (Some(1), Overflow::DropHead)
    );
    let quorum = broker
        .queue_policy("/quorum/limited-q")
        .expect("a policy now");
    assert_eq!(quorum.max_length, None);
    assert_eq!(quorum.message_ttl_ms, Some(60_000));
    assert_eq!(quorum.delivery_limit, Some(3));
    assert_eq!(
        quorum.dead_letter_address.as_ref().map(|a| a.to_string()),
        Some("/quorum/dlq".to_owned())
    );
    assert!(quorum.single_active_consumer);

    // ... and the queues made after it.
    declare(addr, "quorum", "later").await;
    assert!(broker.queue_policy("/quorum/later").is_some());
    declare(addr, "queues", "limited-b").await;
    assert_eq!(broker.queue_policy("/queues/limited-b"), None);

    // The embedding API does the same; an empty set removes them all.
    assert_eq!(broker.set_policies(&[]), Ok(0));
    assert_eq!(broker.queue_policy("/queues/other"), None);
    assert_eq!(broker.queue_policy("/quorum/limited-q"), None);
    stop(broker).await;
}

#[tokio::test]
async fn a_bad_policy_is_refused_at_start() {
    let config = BrokerConfig {
        policies: vec![PolicyConfig {
            pattern: "/quorum/orders-*".into(),
            dead_letter_address: Some("/quorum/a b".into()),
            ..PolicyConfig::default()
        }],
        ..BrokerConfig::default()
    };
    match Broker::start(config).await {
        Err(BrokerError::Config(message)) => {
            assert!(message.contains("dead_letter_address"), "{message}")
        }
        Err(other) => panic!("refused, but not as a configuration: {other}"),
        Ok(_) => panic!("a bad dead-letter address must refuse the start"),
    }
}
