//! Guards authorization with a real client (fe2o3-amqp): per user, regexes
//! on the address for configure (creating a queue), write (publishing)
//! and read (consuming). A refused attach gets amqp:unauthorized-access on
//! that link only, while the connection, the session and the other links
//! go on; a refused creation creates nothing; the anonymous relay checks
//! the same permissions per message; in a cluster the node the client is
//! attached to decides, also for a queue led by another node.
//!
//! fe2o3-amqp 0.18 cannot attach a new link on a session whose earlier
//! attach was refused (it answers the refusal's detach twice, and its
//! next attach on that session fails locally with IllegalState, whatever
//! the broker answers), so new links after a refusal go on a new session
//! of the same connection; Proton (tests/interop/test_users.py) attaches
//! on the same session. The broker side of that quirk is checked on the
//! wire below.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::link::{ReceiverAttachError, SenderAttachError};
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::types::definitions::{AmqpError, ErrorCondition};
use fe2o3_amqp::types::messaging::{Message, Outcome, Properties, Target};
use fe2o3_amqp::{Connection, Receiver, Sender};
use ramqpd_broker::auth::{UserRecord, UsersFile};
use ramqpd_broker::{BrokerConfig, Cluster};

/// (name, configure, write, read); every password is "pw".
fn write_users(path: &Path, users: &[(&str, &str, &str, &str)]) {
    let mut file = UsersFile::default();
    for (name, configure, write, read) in users {
        file.upsert(UserRecord::new(name, "pw", configure, write, read));
    }
    file.save(path).unwrap();
}

async fn login(addr: std::net::SocketAddr, user: &str) -> Conn {
    within(
        Duration::from_secs(15),
        "fe2o3 open",
        Connection::builder()
            .container_id(format!("perm-{user}"))
            .sasl_profile(SaslProfile::Plain {
                username: user.into(),
                password: "pw".into(),
            })
            .open(format!("amqp://{addr}").as_str()),
    )
    .await
    .expect("login")
}

fn unauthorized(condition: Option<&ErrorCondition>) -> bool {
    matches!(
        condition,
        Some(ErrorCondition::AmqpError(AmqpError::UnauthorizedAccess))
    )
}

async fn refused_sender(session: &mut Sess, name: &str, address: &str) -> String {
    match step("sender attach", Sender::attach(session, name, address)).await {
        Err(SenderAttachError::RemoteClosedWithError(error)) => {
            assert!(unauthorized(Some(&error.condition)), "{error:?}");
            error.description.unwrap_or_default()
        }
        Err(other) => panic!("{address}: expected unauthorized-access, got {other:?}"),
        Ok(_) => panic!("{address}: the sender must be refused"),
    }
}

async fn refused_receiver(session: &mut Sess, name: &str, address: &str) {
    let attach = Receiver::builder()
        .name(name)
        .source(address)
        .credit_mode(CreditMode::Manual)
        .attach(session);
    match step("receiver attach", attach).await {
        Err(ReceiverAttachError::RemoteClosedWithError(error)) => {
            assert!(unauthorized(Some(&error.condition)), "{error:?}")
        }
        Err(other) => panic!("{address}: expected unauthorized-access, got {other:?}"),
        Ok(_) => panic!("{address}: the receiver must be refused"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_link_leaves_the_connection_and_its_other_links() {
    trace_from_env();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.toml");
    write_users(
        &path,
        &[
            ("app", "^/queues/app-", "^/queues/app-", "^/queues/app-"),
            // May publish to app queues that exist; may not create or read.
            ("feeder", "", "^/queues/app-", ""),
        ],
    );
    let broker = start_with(|c| c.sasl.users_file = Some(path.clone())).await;
    let mut connection = login(broker.local_addr(), "app").await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", "app-orders").await;
    let mut rx = attach_receiver(&mut session, "rx", "app-orders", 10).await;

    refused_sender(&mut session, "other-tx", "/queues/payroll").await;
    let mut other_session = begin_session(&mut connection).await;
    refused_receiver(&mut other_session, "other-rx", "/queues/payroll").await;
    assert!(
        !broker
            .queues()
            .iter()
            .any(|q| q.address == "/queues/payroll"),
        "a refused attach creates no queue"
    );

    // Same session, same links: still served.
    send_text(&mut tx, "after the refusals").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "after the refusals");
    step("accept", rx.accept(&delivery)).await.unwrap();

    // feeder: write to the existing queue, but neither read it nor create.
    let mut feeder = login(broker.local_addr(), "feeder").await;
    let mut feeder_session = begin_session(&mut feeder).await;
    let mut feed = attach_sender(&mut feeder_session, "feed", "app-orders").await;
    send_text(&mut feed, "from feeder").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "from feeder");
    step("accept", rx.accept(&delivery)).await.unwrap();
    refused_receiver(&mut feeder_session, "peek", "/queues/app-orders").await;
    let mut feeder_session = begin_session(&mut feeder).await;
    let why = refused_sender(&mut feeder_session, "new", "/queues/app-new").await;
    assert!(why.contains("configure"), "{why}");
    assert!(!broker
        .queues()
        .iter()
        .any(|q| q.address == "/queues/app-new"));
    // Quorum queues: the creation is refused before any Raft group exists.
    let mut feeder_session = begin_session(&mut feeder).await;
    let why = refused_sender(&mut feeder_session, "new-q", "/quorum/app-new").await;
    assert!(why.contains("write") || why.contains("configure"), "{why}");
    assert!(
        broker.quorum().queues().is_empty(),
        "no quorum queue created"
    );

    step("close feeder", feeder.close()).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anonymous_relay_checks_each_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.toml");
    write_users(
        &path,
        &[("app", "^/queues/app-", "^/queues/app-", "^/queues/app-")],
    );
    let broker = start_with(|c| c.sasl.users_file = Some(path.clone())).await;
    let mut connection = login(broker.local_addr(), "app").await;
    let mut session = begin_session(&mut connection).await;
    let mut relay = step(
        "anonymous sender attach",
        Sender::builder()
            .name("relay")
            .target(Target::builder().build())
            .attach(&mut session),
    )
    .await
    .expect("an anonymous sender attaches");
    let mut rx = attach_receiver(&mut session, "rx", "app-relayed", 10).await;
    let to = |address: &str, text: &str| {
        Message::builder()
            .properties(Properties::builder().to(address).build())
            .value(text.to_string())
            .build()
    };
    let outcome: Outcome = step("send", relay.send(to("/queues/payroll", "no")))
        .await
        .unwrap();
    assert!(
        matches!(&outcome, Outcome::Rejected(r) if unauthorized(r.error.as_ref().map(|e| &e.condition))),
        "{outcome:?}"
    );
    assert!(!broker
        .queues()
        .iter()
        .any(|q| q.address == "/queues/payroll"));
    // The link goes on: an allowed address right after.
    let outcome = step("send", relay.send(to("/queues/app-relayed", "yes")))
        .await
        .unwrap();
    assert!(outcome.is_accepted(), "{outcome:?}");
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "yes");
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_node_decides_for_a_queue_led_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.toml");
    write_users(
        &path,
        &[
            ("admin", ".*", ".*", ".*"),
            ("reader", "", "", "^/quorum/perm-fwd$"),
        ],
    );
    let mut config = BrokerConfig::default();
    fast_raft(&mut config);
    config.quorum.leader_wait_ms = 5000;
    config.sasl.users_file = Some(path.clone());
    let cluster = Cluster::start(3, config).await.unwrap();

    let mut admin = login(cluster.addr(1).unwrap(), "admin").await;
    let mut admin_session = begin_session(&mut admin).await;
    let mut tx = step(
        "admin sender",
        Sender::attach(&mut admin_session, "tx", "/quorum/perm-fwd"),
    )
    .await
    .expect("admin creates the queue");
    let outcome = step("send", tx.send("for the reader".to_string()))
        .await
        .unwrap();
    assert!(outcome.is_accepted(), "{outcome:?}");
    let leader = wait_for_leader(&cluster, "perm-fwd", None, Duration::from_secs(10)).await;
    let follower = cluster
        .running()
        .into_iter()
        .find(|n| *n != leader)
        .expect("a follower");

    // On a node that does not lead the queue: reading is forwarded to the
    // leader, writing is refused right here.
    let mut reader = login(cluster.addr(follower).unwrap(), "reader").await;
    let mut session = begin_session(&mut reader).await;
    refused_sender(&mut session, "w", "/quorum/perm-fwd").await;
    let mut session = begin_session(&mut reader).await;
    let mut rx = step(
        "reader attach",
        Receiver::builder()
            .name("rx")
            .source("/quorum/perm-fwd")
            .attach(&mut session),
    )
    .await
    .expect("the reader may consume");
    let delivery = step("recv", rx.recv::<String>()).await.unwrap();
    assert_eq!(delivery.body(), "for the reader");
    step("accept", rx.accept(&delivery)).await.unwrap();
    let mut session = begin_session(&mut reader).await;
    refused_receiver(&mut session, "other", "/quorum/perm-other").await;
    step("close reader", reader.close()).await.unwrap();
    step("close admin", admin.close()).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_answer_to_a_refusal_leaves_the_session_usable() {
    use ramqpd_broker::codec::{Detach, Performative};
    let broker = start_with(|c| {
        c.queues.auto_create = false;
        c.queues.declare = vec!["known".into()];
    })
    .await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.open().await;
    raw.begin(0).await;
    let reply = raw.attach_consumer(0, 1, "unknown").await;
    assert!(reply.source.is_none(), "refused: {reply:?}");
    match raw.performative().await {
        (0, Performative::Detach(d), _) => assert!(d.error.is_some(), "{d:?}"),
        other => panic!("expected the refusal's detach, got {other:?}"),
    }
    // Answered twice, as fe2o3-amqp does.
    for _ in 0..2 {
        raw.send(
            0,
            Performative::Detach(Detach {
                handle: 1,
                closed: true,
                error: None,
            }),
        )
        .await;
    }
    // The same handle attaches again, on the same session.
    let reply = raw.attach_consumer(0, 1, "known").await;
    assert_eq!(
        reply.source.and_then(|s| s.address).as_deref(),
        Some("/queues/known")
    );
    // A detach of a handle never attached is still an error.
    raw.send(
        0,
        Performative::Detach(Detach {
            handle: 7,
            closed: true,
            error: None,
        }),
    )
    .await;
    raw.expect_end_with(0, "amqp:session:unattached-handle")
        .await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_node_needs_configure_on_its_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.toml");
    write_users(
        &path,
        &[
            ("app", "^/queues/app-", ".*", ".*"),
            ("rpc", r"^/queues/amq\.dyn-", ".*", ".*"),
        ],
    );
    let broker = start_with(|c| c.sasl.users_file = Some(path.clone())).await;
    let mut app = login(broker.local_addr(), "app").await;
    let mut session = begin_session(&mut app).await;
    match step("dynamic attach", dynamic(&mut session)).await {
        Err(ReceiverAttachError::RemoteClosedWithError(error)) => {
            assert!(unauthorized(Some(&error.condition)), "{error:?}")
        }
        Err(other) => panic!("expected unauthorized-access, got {other:?}"),
        Ok(_) => panic!("app may not create dynamic nodes"),
    }
    // fe2o3 may report its own IllegalState closing a connection whose
    // session saw a refusal (see the header); the broker is not involved.
    let _ = step("close app", app.close()).await;
    let mut rpc = login(broker.local_addr(), "rpc").await;
    let mut session = begin_session(&mut rpc).await;
    let receiver = step("dynamic attach", dynamic(&mut session))
        .await
        .expect("rpc may create dynamic nodes");
    // Detach, end and close in order: a dropped receiver detaches from a
    // task of its own, and a connection closed meanwhile made fe2o3
    // report IllegalState in 3 of 6 runs.
    step("detach the dynamic receiver", receiver.close())
        .await
        .expect("detach");
    step("end the session", session.end()).await.expect("end");
    step("close rpc", rpc.close()).await.unwrap();
    stop(broker).await;
}

async fn dynamic(session: &mut Sess) -> Result<Receiver, ReceiverAttachError> {
    Receiver::builder()
        .name("replies")
        .source(
            fe2o3_amqp::types::messaging::Source::builder()
                .dynamic(true)
                .build(),
        )
        .attach(session)
        .await
}
