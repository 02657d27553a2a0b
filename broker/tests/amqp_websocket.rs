//! Guards AMQP over WebSocket (the OASIS binding): fe2o3-amqp's WebSocket
//! client (`fe2o3-amqp-ws`, subprotocol `amqp`) publishes and consumes on a
//! transient and a quorum queue through `websocket.listen`, logs in with
//! SASL PLAIN against a users file, and does the same over wss with the
//! AMQP port's TLS certificates; requests that are no AMQP WebSocket
//! upgrade get an HTTP error; a text message and an oversized message
//! close the WebSocket with codes 1003 and 1009, and the broker serves on.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::*;
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::{Connection, Receiver, Sender};
use fe2o3_amqp_ws::tokio_tungstenite::client_async;
use fe2o3_amqp_ws::tungstenite::client::IntoClientRequest;
use fe2o3_amqp_ws::tungstenite::protocol::frame::coding::CloseCode;
use fe2o3_amqp_ws::tungstenite::Message as WsMessage;
use fe2o3_amqp_ws::WebSocketStream;
use futures_util::{SinkExt, StreamExt};
use ramqpd_broker::auth::{UserRecord, UsersFile};
use ramqpd_broker::{Broker, BrokerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

fn with_websocket(config: &mut BrokerConfig) {
    config.websocket.listen = Some("127.0.0.1:0".parse().unwrap());
}

fn ws_addr(broker: &Broker) -> SocketAddr {
    broker.ws_addr().expect("the WebSocket listener is bound")
}

fn users_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("users.toml");
    let mut file = UsersFile::default();
    file.upsert(UserRecord::new("carol", "s3cret", ".*", ".*", ".*"));
    file.save(&path).unwrap();
    path
}

/// Publish `count` messages to `address` and consume them back in order,
/// all over one AMQP connection on `stream`.
async fn exchange_over<S>(stream: S, profile: SaslProfile, address: &str, count: usize)
where
    S: AsyncRead + AsyncWrite + std::fmt::Debug + Send + Unpin + 'static,
{
    let mut connection = step(
        "fe2o3 open over WebSocket",
        Connection::builder()
            .container_id("ws-client")
            .sasl_profile(profile)
            .open_with_stream(stream),
    )
    .await
    .expect("AMQP over WebSocket opens");
    let mut session = begin_session(&mut connection).await;
    let mut tx = step(
        "attach sender",
        Sender::attach(&mut session, "ws-tx", address),
    )
    .await
    .expect("sender attaches");
    for i in 0..count {
        let outcome = step("send", tx.send(format!("ws-{i}")))
            .await
            .expect("sent");
        assert!(
            outcome.is_accepted(),
            "message {i} not accepted: {outcome:?}"
        );
    }
    let mut rx = step(
        "attach receiver",
        Receiver::attach(&mut session, "ws-rx", address),
    )
    .await
    .expect("receiver attaches");
    for i in 0..count {
        let delivery = step("recv", rx.recv::<String>()).await.expect("received");
        assert_eq!(delivery.body(), &format!("ws-{i}"));
        step("accept", rx.accept(&delivery)).await.unwrap();
    }
    step("close tx", tx.close()).await.unwrap();
    step("close rx", rx.close()).await.unwrap();
    step("end", session.end()).await.unwrap();
    step("close", connection.close()).await.unwrap();
}

/// The client side of the broker's own framing (`ramqpd_broker::ws::connect`,
/// the bench's WebSocket client) carries fe2o3's AMQP to the broker: the
/// same exchange as above, on a quorum and a transient queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crates_own_websocket_client_talks_to_the_broker() {
    trace_from_env();
    let broker = start_with(with_websocket).await;
    let addr = ws_addr(&broker);
    for address in ["/queues/ws-own", "/quorum/ws-own"] {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let ws = step(
            "own ws connect",
            ramqpd_broker::ws::connect(tcp, &addr.to_string(), "/", 1 << 20),
        )
        .await
        .expect("the upgrade succeeds");
        exchange_over(ws, SaslProfile::Anonymous, address, 50).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fe2o3_over_websocket_uses_transient_and_quorum_queues() {
    trace_from_env();
    let broker = start_with(with_websocket).await;
    let url = format!("ws://{}", ws_addr(&broker));
    for address in ["/queues/ws-transient", "/quorum/ws-quorum"] {
        let ws = step("ws connect", WebSocketStream::connect(&url))
            .await
            .expect("the upgrade succeeds");
        exchange_over(ws, SaslProfile::Anonymous, address, 50).await;
    }
    // Large messages cross several WebSocket messages and AMQP frames.
    let ws = step("ws connect", WebSocketStream::connect(&url))
        .await
        .unwrap();
    let mut connection = step(
        "open",
        Connection::builder()
            .container_id("ws-big")
            .open_with_stream(ws),
    )
    .await
    .unwrap();
    let mut session = begin_session(&mut connection).await;
    let mut tx = step(
        "attach",
        Sender::attach(&mut session, "big-tx", "/queues/ws-big"),
    )
    .await
    .unwrap();
    let body = "x".repeat(3 * 1024 * 1024);
    let outcome = step("send 3 MiB", tx.send(body.clone())).await.unwrap();
    assert!(outcome.is_accepted());
    let mut rx = step(
        "attach",
        Receiver::attach(&mut session, "big-rx", "/queues/ws-big"),
    )
    .await
    .unwrap();
    let delivery = step("recv 3 MiB", rx.recv::<String>()).await.unwrap();
    assert_eq!(delivery.body().len(), body.len());
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("close", connection.close()).await.unwrap();
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_over_websocket_checks_the_users_file() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let broker = start_with(|c| {
        with_websocket(c);
        c.sasl.users_file = Some(users.clone());
    })
    .await;
    let url = format!("ws://{}", ws_addr(&broker));
    let ws = step("ws connect", WebSocketStream::connect(&url))
        .await
        .unwrap();
    let plain = SaslProfile::Plain {
        username: "carol".into(),
        password: "s3cret".into(),
    };
    exchange_over(ws, plain, "/queues/ws-plain", 3).await;
    let ws = step("ws connect", WebSocketStream::connect(&url))
        .await
        .unwrap();
    let wrong = SaslProfile::Plain {
        username: "carol".into(),
        password: "wrong".into(),
    };
    let refused = step(
        "open with a wrong password",
        Connection::builder()
            .container_id("ws-wrong")
            .sasl_profile(wrong)
            .open_with_stream(ws),
    )
    .await;
    assert!(
        refused.is_err(),
        "a wrong password must not open a connection"
    );
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_uses_the_amqp_ports_certificates() {
    let pki = Pki::new("ws");
    let (cert, key) = pki.server_files("server");
    let broker = start_with(|c| {
        with_websocket(c);
        c.tls.listen = Some("127.0.0.1:0".parse().unwrap());
        c.tls.cert_file = Some(cert.clone());
        c.tls.key_file = Some(key.clone());
    })
    .await;
    let addr = ws_addr(&broker);
    let tls = tls_connect(addr, &pki.connector(None))
        .await
        .expect("TLS on the WebSocket port, the server verified against the test CA");
    // The WebSocket handshake inside the TLS stream we verified.
    let ws = step(
        "wss upgrade",
        WebSocketStream::connect_with_stream(format!("ws://localhost:{}", addr.port()), tls),
    )
    .await
    .expect("the upgrade over TLS succeeds");
    exchange_over(ws, SaslProfile::Anonymous, "/quorum/wss", 5).await;
    // Plain ws on that port is refused: the TLS handshake fails.
    let plain = WebSocketStream::connect(format!("ws://{addr}")).await;
    assert!(plain.is_err(), "plain ws on the wss port must fail");
    stop(broker).await;
}

/// Send a raw HTTP request; the status line and the whole answer.
async fn http_answer(addr: SocketAddr, request: &str) -> (String, String) {
    let mut socket = step("tcp connect", TcpStream::connect(addr)).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    step(
        "read the answer to its end",
        socket.read_to_end(&mut answer),
    )
    .await
    .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.lines().next().unwrap_or_default().to_string();
    (status, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_upgrades_get_an_http_error() {
    trace_from_env();
    let broker = start_with(with_websocket).await;
    let addr = ws_addr(&broker);
    let upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
    let cases = [
        ("GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_string(), "426"),
        (format!("POST / HTTP/1.1\r\nHost: x\r\n{upgrade}\r\n"), "405"),
        // No amqp subprotocol.
        (format!("GET / HTTP/1.1\r\nHost: x\r\n{upgrade}\r\n"), "400"),
        (
            format!("GET / HTTP/1.1\r\nHost: x\r\n{upgrade}Sec-WebSocket-Protocol: mqtt\r\n\r\n"),
            "400",
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Protocol: amqp\r\n\r\n".to_string(),
            "426",
        ),
        ("\x00\x01garbage\r\n\r\n".to_string(), "400"),
        (format!("GET / HTTP/1.1\r\nX-Long: {}\r\n\r\n", "a".repeat(9000)), "431"),
    ];
    for (request, status) in cases {
        let (line, answer) = http_answer(addr, &request).await;
        assert!(
            line.starts_with(&format!("HTTP/1.1 {status} ")),
            "expected {status} for {request:?}, got {answer:?}"
        );
    }
    // A real AMQP client is still served.
    let ws = step(
        "ws connect",
        WebSocketStream::connect(format!("ws://{addr}")),
    )
    .await
    .unwrap();
    exchange_over(ws, SaslProfile::Anonymous, "/queues/after-bad", 1).await;
    stop(broker).await;
}

/// A raw WebSocket client with the amqp subprotocol: what it gets back
/// after sending `message` instead of AMQP bytes.
async fn close_code_after(addr: SocketAddr, message: WsMessage) -> Option<CloseCode> {
    let mut request = format!("ws://{addr}/").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "amqp".parse().unwrap());
    let tcp = step("tcp connect", TcpStream::connect(addr)).await.unwrap();
    let (mut ws, response) = step("raw upgrade", client_async(request, tcp))
        .await
        .expect("the upgrade succeeds");
    assert_eq!(
        response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .map(|v| v.as_bytes()),
        Some(&b"amqp"[..])
    );
    // A failed send is fine: the broker may close before the whole of a
    // large message has gone.
    let _ = step("send", ws.send(message)).await;
    let mut code = None;
    while let Some(next) = within(Duration::from_secs(10), "the broker's close", ws.next()).await {
        match next {
            Ok(WsMessage::Close(frame)) => code = frame.map(|f| f.code),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_oversized_messages_close_the_websocket_cleanly() {
    let broker = start_with(|c| {
        with_websocket(c);
        c.websocket.max_message_bytes = 512 * 1024;
    })
    .await;
    let addr = ws_addr(&broker);
    let text = close_code_after(addr, WsMessage::Text("AMQP\x00\x01\x00\x00".into())).await;
    assert_eq!(text, Some(CloseCode::Unsupported));
    let big = close_code_after(addr, WsMessage::Binary(vec![0u8; 600 * 1024].into())).await;
    assert_eq!(big, Some(CloseCode::Size));
    // The broker goes on serving.
    let ws = step(
        "ws connect",
        WebSocketStream::connect(format!("ws://{addr}")),
    )
    .await
    .unwrap();
    exchange_over(ws, SaslProfile::Anonymous, "/queues/after-close", 1).await;
    stop(broker).await;
}

#[tokio::test]
async fn a_message_limit_below_the_frame_size_is_refused_at_start() {
    let mut config = BrokerConfig::default();
    with_websocket(&mut config);
    config.websocket.max_message_bytes = 1024;
    let refused = Broker::start(config).await;
    assert!(
        refused.is_err(),
        "a WebSocket message limit below max-frame-size must be refused"
    );
}
