//! The HTTP management API (`/api/...`) over real sockets, with a real
//! AMQP client (fe2o3-amqp) on the other side of what it does:
//!
//! - every endpoint: overview, nodes, queues (list, show, declare,
//!   delete, purge, move leadership), connections (list, close);
//! - logins: 401 without or with wrong credentials (counted and slowed by
//!   the login throttle), 403 for a user without the permission or the
//!   administrator tag, the queue list filtered by permission;
//! - effects seen by clients: a deleted queue detaches a fe2o3 receiver
//!   with amqp:resource-deleted, a purge empties what fe2o3 published, a
//!   closed connection ends a fe2o3 connection and a raw one with
//!   amqp:connection:forced "closed by an operator";
//! - where it answers: 403 on a plain non-loopback listener (0.0.0.0)
//!   while /healthz and /metrics stay open, and HTTPS with the AMQP
//!   certificate, verified against a CA made here.
//!
//! The cluster's endpoints (moving leadership, a transient queue declared
//! through the node that holds it) are in `http_api_cluster.rs`.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use ramqpd_broker::auth::login_throttle::BASE_DELAY;
use ramqpd_broker::auth::{UserRecord, UsersFile, ADMINISTRATOR_TAG};
use ramqpd_broker::codec::definitions::condition;
use ramqpd_broker::{Broker, BrokerConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ADMIN: Option<(&str, &str)> = Some(("admin", "admin-pw"));
const APP: Option<(&str, &str)> = Some(("app", "app-pw"));
const READER: Option<(&str, &str)> = Some(("reader", "reader-pw"));

/// admin: everything and the administrator tag; app: all three on
/// `^/queues/app-`; reader: read on `^/queues/app-` only.
fn write_users(path: &Path) {
    let mut file = UsersFile::default();
    file.upsert(
        UserRecord::new("admin", "admin-pw", ".*", ".*", ".*")
            .with_tags(vec![ADMINISTRATOR_TAG.into()]),
    );
    let app = "^/queues/app-";
    file.upsert(UserRecord::new("app", "app-pw", app, app, app));
    file.upsert(UserRecord::new("reader", "reader-pw", "", "", app));
    file.save(path).unwrap();
}

fn http_on(config: &mut BrokerConfig, listen: &str) {
    config.http.listen = Some(listen.parse().unwrap());
}

/// A broker with the HTTP endpoint on loopback and the test's users file
/// (in the returned directory, which must outlive the broker), then
/// `tweak`.
async fn start_with_users(tweak: impl FnOnce(&mut BrokerConfig)) -> (tempfile::TempDir, Broker) {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    write_users(&users);
    let broker = start_with(|c| {
        http_on(c, "127.0.0.1:0");
        c.sasl.users_file = Some(users);
        tweak(c);
    })
    .await;
    (dir, broker)
}

fn http_addr(broker: &Broker) -> SocketAddr {
    let addr = broker.http_addr().expect("the HTTP endpoint is on");
    // A wildcard listener is reached over loopback.
    SocketAddr::from(([127, 0, 0, 1], addr.port()))
}

async fn open_as(broker: &Broker, id: &str, user: &str, password: &str) -> ConnectionHandle<()> {
    within(
        Duration::from_secs(15),
        "fe2o3 open with PLAIN",
        Connection::builder()
            .container_id(id)
            .sasl_profile(SaslProfile::Plain {
                username: user.into(),
                password: password.into(),
            })
            .open(broker.url().as_str()),
    )
    .await
    .expect("logs in")
}

fn addresses(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|q| q["address"].as_str().expect("an address").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_and_permissions() {
    let (_dir, broker) = start_with_users(|_| {}).await;
    let addr = http_addr(&broker);

    // No credentials: asked for them, not counted as a failure.
    let asked = call("GET", "/api/overview", None).send(addr).await;
    assert_eq!(asked.status, 401, "{asked:?}");
    assert!(
        asked
            .head
            .contains("www-authenticate: Basic realm=\"ramqp\""),
        "{asked:?}"
    );
    assert_eq!(broker.login_failures(), 0);
    // A wrong password or an unknown user: 401, counted and slowed.
    let started = Instant::now();
    let wrong = call("GET", "/api/overview", Some(("app", "nope")))
        .send(addr)
        .await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(wrong.json()["error"].is_string(), "{wrong:?}");
    let unknown = call("GET", "/api/overview", Some(("ghost", "x")))
        .send(addr)
        .await;
    assert_eq!(unknown.status, 401, "{unknown:?}");
    assert!(
        started.elapsed() >= BASE_DELAY * 3,
        "slowed: {:?}",
        started.elapsed()
    );
    assert_eq!(broker.login_failures(), 2);

    // The overview is for every user; its queue count is what they see.
    let overview = call("GET", "/api/overview", APP).send(addr).await;
    assert_eq!(overview.status, 200, "{overview:?}");
    let overview = overview.json();
    assert_eq!(overview["node_id"], broker.node_id());
    assert_eq!(overview["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(overview["members"][0]["reachable"], true);
    for field in [
        "cluster_name",
        "metadata_leader",
        "queue_count",
        "connection_count",
    ] {
        assert!(overview.get(field).is_some(), "{field} in {overview}");
    }
    // Nodes and connections: administrators only.
    for path in ["/api/nodes", "/api/connections"] {
        let refused = call("GET", path, APP).send(addr).await;
        assert_eq!(refused.status, 403, "{path}: {refused:?}");
        assert!(refused.json()["error"]
            .as_str()
            .unwrap()
            .contains("administrator"));
    }
    let nodes = call("GET", "/api/nodes", ADMIN).send(addr).await.json();
    assert_eq!(nodes[0]["id"], broker.node_id(), "{nodes}");

    // Declare: configure on the address.
    let path = "/api/queues/queues/app-orders";
    assert_eq!(call("PUT", path, APP).send(addr).await.status, 201);
    assert_eq!(call("PUT", path, APP).send(addr).await.status, 204);
    assert_eq!(call("PUT", path, READER).send(addr).await.status, 403);
    let other = call("PUT", "/api/queues/queues/other", APP)
        .send(addr)
        .await;
    assert_eq!(other.status, 403, "{other:?}");
    assert!(other.json()["error"]
        .as_str()
        .unwrap()
        .contains("configure"));
    for (path, login) in [
        ("/api/queues/queues/other", ADMIN),
        ("/api/queues/quorum/app-replicated", ADMIN),
    ] {
        assert_eq!(
            call("PUT", path, login).send(addr).await.status,
            201,
            "{path}"
        );
    }
    // The list shows what a user may read or configure.
    let all = call("GET", "/api/queues", ADMIN).send(addr).await.json();
    assert_eq!(
        addresses(&all),
        [
            "/queues/app-orders",
            "/queues/other",
            "/quorum/app-replicated"
        ]
    );
    let quorum = &all[2];
    assert_eq!(quorum["kind"], "quorum");
    assert_eq!(quorum["members"], serde_json::json!([broker.node_id()]));
    assert_eq!(all[0]["kind"], "transient");
    for login in [APP, READER] {
        let list = call("GET", "/api/queues", login).send(addr).await.json();
        assert_eq!(addresses(&list), ["/queues/app-orders"], "{list}");
    }
    assert_eq!(
        call("GET", "/api/overview", READER).send(addr).await.json()["queue_count"],
        1
    );
    assert_eq!(
        call("GET", "/api/queues/queues/other", APP)
            .send(addr)
            .await
            .status,
        403
    );
    assert_eq!(
        call("GET", "/api/queues/queues/app-none", APP)
            .send(addr)
            .await
            .status,
        404
    );
    // Bad names and kinds.
    for path in [
        "/api/queues/queues/a%2Fb",
        "/api/queues/topic/x",
        "/api/queues/queues/a%20b",
    ] {
        assert_eq!(
            call("GET", path, ADMIN).send(addr).await.status,
            400,
            "{path}"
        );
    }
    let reserved = call("PUT", "/api/queues/queues/amq.dyn-x", ADMIN)
        .send(addr)
        .await;
    assert_eq!(reserved.status, 400, "{reserved:?}");
    assert_eq!(
        call("POST", "/api/queues", ADMIN).send(addr).await.status,
        405
    );
    assert_eq!(
        call("GET", "/api/nothing", ADMIN).send(addr).await.status,
        404
    );

    // Purge and delete: configure; moving leadership: administrator.
    let purge = "/api/queues/queues/app-orders/purge";
    assert_eq!(call("POST", purge, READER).send(addr).await.status, 403);
    assert_eq!(
        call("DELETE", "/api/queues/queues/app-orders", READER)
            .send(addr)
            .await
            .status,
        403
    );
    let moved = "/api/queues/quorum/app-replicated/move-leadership";
    assert_eq!(call("POST", moved, APP).send(addr).await.status, 403);
    let transient = call("POST", "/api/queues/queues/other/move-leadership", ADMIN)
        .send(addr)
        .await;
    assert_eq!(transient.status, 400, "{transient:?}");
    let mut bad_body = call("POST", moved, ADMIN);
    bad_body.body = Some("{\"to\": \"two\"}");
    assert_eq!(bad_body.send(addr).await.status, 400);
    // One node: nobody to hand the leadership to.
    let alone = call("POST", moved, ADMIN).send(addr).await;
    assert_eq!(alone.status, 409, "{alone:?}");
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_delete_and_close_reach_the_clients() {
    let (_dir, broker) = start_with_users(|c| c.queues.max_messages = 777).await;
    let addr = http_addr(&broker);
    let mut connection = open_as(&broker, "api-client", "app", "app-pw").await;
    let mut session = step("begin", Session::begin(&mut connection))
        .await
        .unwrap();
    let mut sender = step(
        "attach sender",
        Sender::attach(&mut session, "tx", "/queues/app-work"),
    )
    .await
    .unwrap();
    for i in 0..5 {
        send_text(&mut sender, &format!("m{i}")).await;
    }
    let shown = call("GET", "/api/queues/queues/app-work", APP)
        .send(addr)
        .await;
    assert_eq!(shown.status, 200, "{shown:?}");
    let shown = shown.json();
    assert_eq!(
        (shown["ready"].as_u64(), shown["unacknowledged"].as_u64()),
        (Some(5), Some(0))
    );
    assert_eq!(shown["published_total"], 5, "{shown}");
    // Its settings: the transient queues' configured limits.
    assert_eq!(shown["settings"]["max_messages"], 777, "{shown}");
    assert!(shown["settings"]["max_bytes"].as_u64().is_some(), "{shown}");
    assert!(shown["bytes"].as_u64().is_some_and(|b| b > 0), "{shown}");

    // Purged: the five are gone, a consumer gets only what comes after.
    let purged = call("POST", "/api/queues/queues/app-work/purge", APP)
        .send(addr)
        .await;
    assert_eq!(purged.status, 200, "{purged:?}");
    assert_eq!(purged.json()["purged"], 5, "{purged:?}");
    assert_eq!(depth(&broker, "app-work"), Some((0, 0, 0)));
    let mut receiver = step(
        "attach receiver",
        Receiver::attach(&mut session, "rx", "/queues/app-work"),
    )
    .await
    .unwrap();
    send_text(&mut sender, "after").await;
    let (delivery, text) = recv_text(&mut receiver).await;
    assert_eq!(text, "after");
    step("accept", receiver.accept(&delivery)).await.unwrap();

    // The connection, as an administrator sees it.
    let list = call("GET", "/api/connections", ADMIN).send(addr).await;
    assert_eq!(list.status, 200, "{list:?}");
    let list = list.json();
    let ours = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["container_id"] == "api-client")
        .unwrap_or_else(|| panic!("our connection in {list}"))
        .clone();
    assert_eq!(ours["user"], "app");
    assert_eq!(ours["transport"], "tcp");
    assert_eq!(ours["sessions"], 1);
    assert!(
        ours["peer"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{ours}"
    );
    assert!(ours["opened_at"].as_u64().is_some() && ours["age_seconds"].as_u64().is_some());

    // Deleted: the receiver is detached with resource-deleted.
    let deleted = call("DELETE", "/api/queues/queues/app-work", APP)
        .send(addr)
        .await;
    assert_eq!(deleted.status, 200, "{deleted:?}");
    assert!(deleted.json()["summary"]
        .as_str()
        .unwrap()
        .contains("deleted"));
    let detached = step("the receiver hears of it", receiver.recv::<String>()).await;
    let error = format!("{:?}", detached.expect_err("detached"));
    assert!(error.contains("ResourceDeleted"), "{error}");
    assert_eq!(
        call("GET", "/api/queues/queues/app-work", APP)
            .send(addr)
            .await
            .status,
        404
    );
    assert_eq!(
        call("DELETE", "/api/queues/queues/app-work", APP)
            .send(addr)
            .await
            .status,
        404
    );

    // Closed by the operator: the client's connection ends with an error.
    let id = ours["id"].as_u64().unwrap();
    let path = format!("/api/connections/{id}");
    assert_eq!(call("DELETE", &path, APP).send(addr).await.status, 403);
    assert_eq!(call("DELETE", &path, ADMIN).send(addr).await.status, 204);
    let closed = step("fe2o3 sees the close", connection.on_close()).await;
    let error = format!("{:?}", closed.expect_err("closed with an error"));
    assert!(error.contains("ConnectionForced"), "{error}");
    // A send on the closed connection must not be accepted. fe2o3 either
    // fails it or, when the close reached its connection engine before the
    // session engine gave up the link, waits for credit that never comes
    // (seen 6 of 25 runs on a loaded machine): both mean "not accepted".
    let after = tokio::time::timeout(Duration::from_secs(2), sender.send("late".to_string())).await;
    assert!(!matches!(after, Ok(Ok(_))), "{after:?}");
    connections_until(addr, "the connection leaves the list", |list| {
        list.as_array().is_some_and(Vec::is_empty)
    })
    .await;
    assert_eq!(call("DELETE", &path, ADMIN).send(addr).await.status, 404);
    drop(session);
    stop(broker).await;
}

/// GET `/api/connections` as the administrator until `check` holds
/// (a closed connection leaves the list when its task ends, which no
/// client can await); fail after 10 s.
async fn connections_until(addr: SocketAddr, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = call("GET", "/api/connections", ADMIN)
            .send(addr)
            .await
            .json();
        if check(&list) {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 10 s; last {list}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_on_loopback_without_users_and_closes_with_connection_forced() {
    let broker = start_with(|c| http_on(c, "127.0.0.1:0")).await;
    let addr = http_addr(&broker);
    let overview = call("GET", "/api/overview", None).send(addr).await;
    assert_eq!(overview.status, 200, "{overview:?}");
    assert_eq!(overview.json()["connection_count"], 0);

    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    let list = call("GET", "/api/connections", None)
        .send(addr)
        .await
        .json();
    assert_eq!(list[0]["container_id"], "raw-client", "{list}");
    assert_eq!(list[0]["user"], Value::Null, "anonymous");
    let id = list[0]["id"].as_u64().unwrap();
    let closing = call("DELETE", &format!("/api/connections/{id}"), None)
        .send(addr)
        .await;
    assert_eq!(closing.status, 204, "{closing:?}");
    let error = raw.expect_close().await.expect("close carries an error");
    assert_eq!(error.condition.as_str(), condition::CONNECTION_FORCED);
    let description = error.description.unwrap_or_default();
    assert!(
        description.contains("closed by an operator"),
        "{description}"
    );
    raw.expect_eof().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_listener_off_loopback_keeps_the_api_closed() {
    // 0.0.0.0 is not a loopback listener, even when reached over 127.0.0.1.
    let broker = start_with(|c| http_on(c, "0.0.0.0:0")).await;
    let addr = http_addr(&broker);
    let refused = call("GET", "/api/overview", None).send(addr).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    let why = refused.json()["error"].as_str().unwrap().to_owned();
    assert!(why.contains("loopback") && why.contains("TLS"), "{why}");
    assert_eq!(
        call("GET", "/api/queues", ADMIN).send(addr).await.status,
        403
    );
    for open in ["/healthz", "/metrics"] {
        assert_eq!(
            call("GET", open, None).send(addr).await.status,
            200,
            "{open}"
        );
    }
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_the_amqp_certificate() {
    let pki = Pki::new("http-api-ca");
    let (cert, key) = pki.server_files("server");
    let users = pki.dir.path().join("users.toml");
    write_users(&users);
    let tls = |c: &mut BrokerConfig| {
        http_on(c, "0.0.0.0:0");
        c.http.tls = true;
        c.tls.listen = Some("127.0.0.1:0".parse().unwrap());
        c.tls.cert_file = Some(cert.clone());
        c.tls.key_file = Some(key.clone());
    };
    let users_file = users.clone();
    let broker = start_with(|c| {
        tls(c);
        c.sasl.users_file = Some(users_file);
    })
    .await;
    let addr = http_addr(&broker);
    let connector = pki.connector(None);
    let stream = tls_connect(addr, &connector)
        .await
        .expect("TLS with our CA");
    let overview = call("GET", "/api/overview", ADMIN).send_on(stream).await;
    assert_eq!(overview.status, 200, "{overview:?}");
    assert_eq!(overview.json()["node_id"], broker.node_id());
    let stream = tls_connect(addr, &connector).await.unwrap();
    assert_eq!(
        call("GET", "/api/overview", None)
            .send_on(stream)
            .await
            .status,
        401
    );
    let stream = tls_connect(addr, &connector).await.unwrap();
    assert_eq!(
        call("GET", "/healthz", None).send_on(stream).await.status,
        200
    );
    // Plain HTTP on the HTTPS port gets no HTTP answer.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    let _ = plain
        .write_all(call("GET", "/healthz", None).request().as_bytes())
        .await;
    let mut bytes = Vec::new();
    let _ = step("the plain request ends", plain.read_to_end(&mut bytes)).await;
    assert!(!String::from_utf8_lossy(&bytes).contains("200 OK"));
    stop(broker).await;

    // Without users the API stays on loopback, TLS or not.
    let broker = start_with(tls).await;
    let stream = tls_connect(http_addr(&broker), &connector).await.unwrap();
    let refused = call("GET", "/api/overview", None).send_on(stream).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(refused.body.contains("no users"), "{refused:?}");
    stop(broker).await;

    // http.tls needs the AMQP TLS certificate.
    let mut config = BrokerConfig::default();
    http_on(&mut config, "127.0.0.1:0");
    config.http.tls = true;
    let error = Broker::start(config).await.err().expect("refused");
    assert!(error.to_string().contains("http.tls"), "{error}");
}
