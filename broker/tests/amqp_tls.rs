//! Guards TLS on the AMQP port: fe2o3-amqp over TLS verifies the broker's
//! certificate against a CA made in the test and exchanges messages; a
//! client trusting another CA fails the handshake; the AMQP TLS protocol
//! header (spec 5.2.1) upgrades the plain port, and a plain header on the
//! TLS port is answered with the TLS header and closed; a client
//! certificate logs in with SASL EXTERNAL as its CN (a user of the users
//! file), a stranger's certificate is refused; `Broker::reload` (SIGHUP)
//! swaps the certificate for new connections while an open one goes on.

use crate::common;

use std::path::Path;
use std::time::Duration;

use bytes::BytesMut;
use common::*;
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::Connection;
use ramqpd_broker::auth::{UserRecord, UsersFile};
use ramqpd_broker::codec::frame::{decode_frame, encode_sasl_frame, SASL_HEADER, TLS_HEADER};
use ramqpd_broker::codec::{FrameBody, SaslCode, SaslFrame, SaslInit, Symbol};
use ramqpd_broker::BrokerConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

fn with_tls(config: &mut BrokerConfig, pki: &Pki) {
    let (cert, key) = pki.server_files("server");
    config.tls.listen = Some("127.0.0.1:0".parse().unwrap());
    config.tls.cert_file = Some(cert);
    config.tls.key_file = Some(key);
}

/// Open fe2o3 over an established stream (TLS here) and exchange one
/// message.
async fn round_trip_over<S>(stream: S, queue: &str, profile: SaslProfile)
where
    S: AsyncRead + AsyncWrite + std::fmt::Debug + Send + Unpin + 'static,
{
    let mut connection = step(
        "fe2o3 open over TLS",
        Connection::builder()
            .container_id("tls-client")
            .sasl_profile(profile)
            .open_with_stream(stream),
    )
    .await
    .expect("AMQP over TLS opens");
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "tx", queue).await;
    let mut rx = attach_receiver(&mut session, "rx", queue, 1).await;
    send_text(&mut tx, "over tls").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "over tls");
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("close tx", tx.close()).await.unwrap();
    step("close rx", rx.close()).await.unwrap();
    step("end", session.end()).await.unwrap();
    step("close", connection.close()).await.unwrap();
}

async fn read_sasl<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut BytesMut) -> SaslFrame {
    loop {
        if let Some(frame) = decode_frame(buf, 65536).unwrap() {
            match frame.body {
                FrameBody::Sasl(sasl) => return sasl,
                other => panic!("expected a SASL frame, got {other:?}"),
            }
        }
        let n = step("read", stream.read_buf(buf)).await.unwrap();
        assert!(n > 0, "EOF in the SASL exchange");
    }
}

/// The SASL layer by hand over `stream`: the mechanisms offered and the
/// outcome of `mechanism`.
async fn sasl_over<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    mechanism: &str,
    response: Option<&[u8]>,
) -> (Vec<String>, SaslCode) {
    step("write", stream.write_all(&SASL_HEADER)).await.unwrap();
    let mut header = [0u8; 8];
    step("read header", stream.read_exact(&mut header))
        .await
        .unwrap();
    assert_eq!(header, SASL_HEADER);
    let mut buf = BytesMut::new();
    let SaslFrame::Mechanisms(offered) = read_sasl(stream, &mut buf).await else {
        panic!("expected sasl-mechanisms");
    };
    let mut out = BytesMut::new();
    encode_sasl_frame(
        &mut out,
        &SaslFrame::Init(SaslInit {
            mechanism: Symbol::from(mechanism),
            initial_response: response.map(bytes::Bytes::copy_from_slice),
            hostname: None,
        }),
    );
    step("write", stream.write_all(&out)).await.unwrap();
    let SaslFrame::Outcome(outcome) = read_sasl(stream, &mut buf).await else {
        panic!("expected sasl-outcome");
    };
    let offered = offered.mechanisms.into_iter().map(|s| s.0).collect();
    (offered, outcome.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fe2o3_over_tls_verifies_the_server_and_exchanges_messages() {
    let pki = Pki::new("ramqp test CA");
    let broker = start_with(|c| with_tls(c, &pki)).await;
    let tls_addr = broker.tls_addr().expect("a TLS listener");
    assert_ne!(tls_addr, broker.local_addr(), "the plain listener stays");

    let stream = tls_connect(tls_addr, &pki.connector(None))
        .await
        .expect("the broker's certificate verifies against the test CA");
    round_trip_over(stream, "tls", SaslProfile::Anonymous).await;

    // A client that trusts another CA refuses the broker's certificate.
    let stranger = Pki::new("another CA");
    assert!(
        tls_connect(tls_addr, &stranger.connector(None))
            .await
            .is_err(),
        "the handshake must fail against the wrong CA"
    );

    // Plain AMQP (a SASL header) on the TLS port: told to use TLS, closed.
    let mut raw = Raw::connect(tls_addr).await;
    raw.write(&SASL_HEADER).await;
    assert_eq!(raw.read_bytes(8).await, TLS_HEADER);
    raw.expect_eof().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_header_starts_tls_on_either_port() {
    let pki = Pki::new("ramqp test CA");
    let broker = start_with(|c| with_tls(c, &pki)).await;
    for addr in [broker.local_addr(), broker.tls_addr().unwrap()] {
        let mut tcp = step("connect", TcpStream::connect(addr)).await.unwrap();
        step("write", tcp.write_all(&TLS_HEADER)).await.unwrap();
        let mut header = [0u8; 8];
        step("read", tcp.read_exact(&mut header)).await.unwrap();
        assert_eq!(header, TLS_HEADER, "the TLS header is answered on {addr}");
        let stream = tls_over(tcp, &pki.connector(None))
            .await
            .expect("TLS after the TLS header");
        round_trip_over(stream, "tls-header", SaslProfile::Anonymous).await;
    }
    stop(broker).await;

    // Without TLS configured the header is refused as before: our SASL
    // header, then the socket closes.
    let broker = start().await;
    let mut raw = Raw::connect(broker.local_addr()).await;
    raw.write(&TLS_HEADER).await;
    assert_eq!(raw.read_bytes(8).await, SASL_HEADER);
    raw.expect_eof().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_only_broker_has_no_plain_listener() {
    let pki = Pki::new("ramqp test CA");
    let mut plain_port = None;
    let broker = start_with(|c| {
        with_tls(c, &pki);
        c.listen_plain = false;
        // A port that would be plain if the listener existed.
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        c.listen = addr;
        plain_port = Some(addr);
    })
    .await;
    assert_eq!(Some(broker.local_addr()), broker.tls_addr());
    assert!(
        TcpStream::connect(plain_port.unwrap()).await.is_err(),
        "nothing listens on the plain address"
    );
    let stream = tls_connect(broker.local_addr(), &pki.connector(None))
        .await
        .unwrap();
    round_trip_over(stream, "tls-only", SaslProfile::Anonymous).await;
    stop(broker).await;
}

fn users_file(dir: &Path, users: &[&str]) -> std::path::PathBuf {
    let path = dir.join("users.toml");
    let mut file = UsersFile::default();
    for name in users {
        file.upsert(UserRecord::new(name, "pw", ".*", ".*", ".*"));
    }
    file.save(&path).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_logs_in_with_external_as_its_cn() {
    let pki = Pki::new("ramqp test CA");
    let users = users_file(pki.dir.path(), &["alice"]);
    let broker = start_with(|c| {
        with_tls(c, &pki);
        c.tls.client_ca_file = Some(pki.ca_file());
        c.sasl.users_file = Some(users.clone());
    })
    .await;
    let tls_addr = broker.tls_addr().unwrap();

    let mut alice = tls_connect(tls_addr, &pki.connector(Some(pki.client("alice"))))
        .await
        .unwrap();
    let (offered, code) = sasl_over(&mut alice, "EXTERNAL", Some(b"")).await;
    assert_eq!(offered[0], "EXTERNAL", "{offered:?}");
    assert!(!offered.contains(&"ANONYMOUS".to_string()), "{offered:?}");
    assert_eq!(code, SaslCode::Ok, "alice's certificate logs her in");

    // Asking for another identity than the certificate's is refused.
    let mut alice = tls_connect(tls_addr, &pki.connector(Some(pki.client("alice"))))
        .await
        .unwrap();
    let (_, code) = sasl_over(&mut alice, "EXTERNAL", Some(b"root")).await;
    assert_eq!(code, SaslCode::Auth);

    // A valid certificate whose CN is no user of the file.
    let mut mallory = tls_connect(tls_addr, &pki.connector(Some(pki.client("mallory"))))
        .await
        .unwrap();
    let (_, code) = sasl_over(&mut mallory, "EXTERNAL", None).await;
    assert_eq!(code, SaslCode::Auth, "a CN that is no user is refused");

    // Without a certificate: no EXTERNAL, but PLAIN still works.
    let mut anonymous = tls_connect(tls_addr, &pki.connector(None)).await.unwrap();
    let (offered, code) = sasl_over(&mut anonymous, "PLAIN", Some(b"\0alice\0pw")).await;
    assert!(!offered.contains(&"EXTERNAL".to_string()), "{offered:?}");
    assert_eq!(code, SaslCode::Ok);

    // A certificate from a stranger's CA does not get through TLS.
    let stranger = Pki::new("stranger CA");
    let refused = async {
        let mut stream = tls_connect(
            tls_addr,
            &stranger.connector(Some(stranger.client("alice"))),
        )
        .await?;
        // TLS 1.3 reports the server's refusal on the first read.
        stream.write_all(&SASL_HEADER).await?;
        let mut header = [0u8; 8];
        stream.read_exact(&mut header).await.map(|_| ())
    };
    assert!(
        within(Duration::from_secs(10), "stranger", refused)
            .await
            .is_err(),
        "a client certificate from another CA must be refused"
    );
    assert!(broker.login_failures() >= 2);
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_swaps_the_certificate_for_new_connections() {
    let first = Pki::new("first CA");
    let second = Pki::new("second CA");
    let broker = start_with(|c| with_tls(c, &first)).await;
    let tls_addr = broker.tls_addr().unwrap();
    let open = tls_connect(tls_addr, &first.connector(None)).await.unwrap();

    // Replace the files in place (as certbot would) and reload.
    let (cert, key) = second.server_files("next");
    std::fs::copy(&cert, first.dir.path().join("server.pem")).unwrap();
    std::fs::copy(&key, first.dir.path().join("server.key")).unwrap();
    let reloaded = broker.reload();
    assert!(matches!(reloaded.tls, Some(Ok(()))), "{reloaded:?}");
    assert!(reloaded.users.is_none(), "no users file to reload");

    assert!(
        tls_connect(tls_addr, &first.connector(None)).await.is_err(),
        "new connections get the new certificate"
    );
    let stream = tls_connect(tls_addr, &second.connector(None))
        .await
        .expect("the new certificate verifies against the second CA");
    round_trip_over(stream, "reloaded", SaslProfile::Anonymous).await;
    // The connection made before the reload goes on.
    round_trip_over(open, "before-reload", SaslProfile::Anonymous).await;

    // A broken file is refused and the certificate in force stays.
    std::fs::write(first.dir.path().join("server.pem"), "not a certificate").unwrap();
    assert!(matches!(broker.reload().tls, Some(Err(_))));
    let stream = tls_connect(tls_addr, &second.connector(None))
        .await
        .expect("still the second certificate");
    round_trip_over(stream, "after-bad-reload", SaslProfile::Anonymous).await;
    stop(broker).await;
}
