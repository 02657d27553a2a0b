//! Guards the users file with a real client (fe2o3-amqp): SCRAM-SHA-256
//! logs in with the right password (and fe2o3 checks the server's
//! signature, so the broker proves it knows the credential too), a wrong
//! password or unknown user gets SASL outcome `auth`; PLAIN is checked
//! against the same salted credential; anonymous is off with a users file
//! and, enabled explicitly, gets the file's `anonymous` user's
//! permissions; failed logins are counted and slowed per address;
//! `Broker::reload` applies an edited file.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use fe2o3_amqp::connection::OpenError;
use fe2o3_amqp::sasl_profile::{SaslProfile, SaslScramSha256};
use fe2o3_amqp::types::sasl::SaslCode as FeSaslCode;
use fe2o3_amqp::{Connection, Sender};
use ramqpd_broker::auth::login_throttle::BASE_DELAY;
use ramqpd_broker::auth::{UserRecord, UsersFile};
use ramqpd_broker::codec::SaslCode;
use ramqpd_broker::{Broker, BrokerConfig};

fn write_users(path: &Path, users: &[(&str, &str, &str)]) {
    let mut file = UsersFile::default();
    for (name, password, pattern) in users {
        file.upsert(UserRecord::new(name, password, pattern, pattern, pattern));
    }
    file.save(path).unwrap();
}

fn with_users(path: PathBuf) -> impl FnOnce(&mut BrokerConfig) {
    move |config| config.sasl.users_file = Some(path)
}

async fn open(broker: &Broker, profile: SaslProfile) -> Result<Conn, OpenError> {
    within(
        Duration::from_secs(15),
        "fe2o3 open",
        Connection::builder()
            .container_id("users-client")
            .sasl_profile(profile)
            .open(broker.url().as_str()),
    )
    .await
}

fn scram(user: &str, password: &str) -> SaslProfile {
    SaslProfile::ScramSha256(SaslScramSha256::new(user, password))
}

fn plain(user: &str, password: &str) -> SaslProfile {
    SaslProfile::Plain {
        username: user.into(),
        password: password.into(),
    }
}

fn assert_auth_failure(result: Result<Conn, OpenError>, what: &str) {
    match result {
        Err(OpenError::SaslError { code, .. }) => assert_eq!(code, FeSaslCode::Auth, "{what}"),
        Err(other) => panic!("{what}: expected SASL auth failure, got {other:?}"),
        Ok(_) => panic!("{what}: must not connect"),
    }
}

async fn round_trip(connection: &mut Conn, queue: &str) {
    let mut session = begin_session(connection).await;
    let mut tx = attach_sender(&mut session, "tx", queue).await;
    let mut rx = attach_receiver(&mut session, "rx", queue, 1).await;
    send_text(&mut tx, "logged in").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "logged in");
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("end", session.end()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha256_and_plain_check_the_stored_credential() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.toml");
    write_users(&path, &[("alice", "wonder land", ".*")]);
    let broker = start_with(with_users(path)).await;

    let mut connection = open(&broker, scram("alice", "wonder land"))
        .await
        .expect("SCRAM-SHA-256 with the right password connects");
    round_trip(&mut connection, "scram").await;
    step("close", connection.close()).await.unwrap();
    let mut connection = open(&broker, plain("alice", "wonder land"))
        .await
        .expect("PLAIN against the SCRAM credential connects");
    round_trip(&mut connection, "plain").await;
    step("close", connection.close()).await.unwrap();
    assert_eq!(broker.login_failures(), 0);

    assert_auth_failure(
        open(&broker, scram("alice", "wonder")).await,
        "wrong SCRAM password",
    );
    assert_auth_failure(
        open(&broker, scram("bob", "wonder land")).await,
        "unknown SCRAM user",
    );
    assert_auth_failure(
        open(&broker, plain("alice", "Wonder land")).await,
        "wrong PLAIN password",
    );
    assert_eq!(broker.login_failures(), 3, "every failure is counted");

    // With a users file: SCRAM and PLAIN offered, ANONYMOUS neither offered
    // nor accepted.
    let mut raw = Raw::connect(broker.local_addr()).await;
    let offered = raw.sasl_start().await;
    assert_eq!(offered, vec!["SCRAM-SHA-256", "PLAIN"]);
    assert_eq!(raw.sasl_init("ANONYMOUS", None).await, SaslCode::Auth);
    raw.expect_eof().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_slowed_more_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.toml");
    write_users(&path, &[("alice", "pw", ".*")]);
    let broker = start_with(with_users(path)).await;
    let mut waits = Vec::new();
    for _ in 0..3 {
        let mut raw = Raw::connect(broker.local_addr()).await;
        raw.sasl_start().await;
        let started = Instant::now();
        assert_eq!(
            raw.sasl_init("PLAIN", Some(b"\0alice\0guess")).await,
            SaslCode::Auth
        );
        waits.push(started.elapsed());
        raw.expect_eof().await;
    }
    // 200 ms, 400 ms, 800 ms at least: lower bounds only, a loaded machine
    // may add to them.
    for (n, wait) in waits.iter().enumerate() {
        let floor = BASE_DELAY * (1 << n);
        assert!(
            *wait >= floor,
            "failure {n} answered after {wait:?}, before {floor:?}"
        );
    }
    assert_eq!(broker.login_failures(), 3);
    // The right password is not slowed down by the earlier failures.
    let started = Instant::now();
    let mut connection = open(&broker, plain("alice", "pw")).await.expect("connects");
    assert!(
        started.elapsed() < BASE_DELAY * 8,
        "a good login waited {:?}",
        started.elapsed()
    );
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_enabled_with_a_users_file_gets_the_anonymous_users_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.toml");
    write_users(&path, &[("alice", "pw", ".*")]);
    let broker = start_with(|c| {
        c.sasl.users_file = Some(path.clone());
        c.sasl.allow_anonymous = Some(true);
    })
    .await;
    // No `anonymous` user yet: anonymous may connect, and attach nowhere.
    let mut connection = open(&broker, SaslProfile::Anonymous)
        .await
        .expect("anonymous connects when enabled");
    let mut session = begin_session(&mut connection).await;
    let refused = step(
        "attach",
        Sender::attach(&mut session, "anon-tx", "/queues/public-x"),
    )
    .await;
    assert!(refused.is_err(), "anonymous without permissions attached");
    step("close", connection.close()).await.ok();

    // Give `anonymous` the public queues; a reload applies it.
    write_users(
        &path,
        &[
            ("alice", "pw", ".*"),
            ("anonymous", "unused", "^/queues/public-"),
        ],
    );
    let reloaded = broker.reload();
    assert!(matches!(reloaded.users, Some(Ok(2))), "{reloaded:?}");
    assert!(reloaded.tls.is_none());
    let mut connection = open(&broker, SaslProfile::Anonymous).await.unwrap();
    round_trip(&mut connection, "public-x").await;
    step("close", connection.close()).await.unwrap();

    // Remove alice: she can no longer log in; a broken file keeps the
    // users in force.
    write_users(&path, &[("anonymous", "unused", "^/queues/public-")]);
    assert!(matches!(broker.reload().users, Some(Ok(1))));
    assert_auth_failure(open(&broker, scram("alice", "pw")).await, "deleted user");
    std::fs::write(&path, "[[user]]\nname = \"x\"\npassword = \"plaintext\"\n").unwrap();
    assert!(matches!(broker.reload().users, Some(Err(_))));
    let mut connection = open(&broker, SaslProfile::Anonymous).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_bad_users_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::default();
    config.sasl.users_file = Some(dir.path().join("missing.toml"));
    assert!(matches!(
        Broker::start(config).await,
        Err(ramqpd_broker::BrokerError::Auth(_))
    ));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[user]]\nname = \"x\"\nscram_sha256 = \"hunter2\"\n").unwrap();
    let mut config = BrokerConfig::default();
    config.sasl.users_file = Some(bad);
    assert!(matches!(
        Broker::start(config).await,
        Err(ramqpd_broker::BrokerError::Auth(_))
    ));
}
