//! Shared helpers for the integration tests: bounded waits, an embedded
//! broker with a tweaked config, a real third-party AMQP 1.0 client
//! (fe2o3-amqp) and a raw-socket client that speaks frames through the
//! broker's own public codec.
//!
//! Every wait here is bounded: a hung broker fails a test, never hangs it.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use broker::codec::frame::{decode_frame, encode_amqp_frame, AMQP_HEADER};
use broker::codec::{
    Attach, Begin, Descriptor, Error, Flow, Frame, FrameBody, Open, Performative,
    ReceiverSettleMode, Role, SenderSettleMode, Source, Target, Transfer, Value,
};
use broker::{Broker, BrokerConfig};
use bytes::{Bytes, BytesMut};
use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::messaging::{Body, Message};
use fe2o3_amqp::types::primitives::Value as FeValue;
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Default bound for one protocol step.
pub const STEP: Duration = Duration::from_secs(10);

/// Await `fut`, failing the test if it takes longer than `limit`.
pub async fn within<F: Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(limit, fut).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {limit:?}: {what}"),
    }
}

/// Await `fut` with the default step bound.
pub async fn step<F: Future>(what: &str, fut: F) -> F::Output {
    within(STEP, what, fut).await
}

/// Poll `check` every 20 ms until it holds; fail after `limit`.
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("condition not reached within {limit:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Start a broker on an ephemeral port with the default config.
pub async fn start() -> Broker {
    start_with(|_| {}).await
}

/// Start a broker on an ephemeral port after `tweak` adjusts the config.
pub async fn start_with(tweak: impl FnOnce(&mut BrokerConfig)) -> Broker {
    let mut config = BrokerConfig::default();
    tweak(&mut config);
    step("broker start", Broker::start(config))
        .await
        .expect("broker starts")
}

/// Shut a broker down, bounded.
pub async fn stop(broker: Broker) {
    within(
        Duration::from_secs(15),
        "broker shutdown",
        broker.shutdown(),
    )
    .await;
}

/// (ready, unsettled, consumers) of `/queues/<name>`, if the queue exists.
pub fn depth(broker: &Broker, name: &str) -> Option<(usize, usize, usize)> {
    let address = format!("/queues/{name}");
    broker
        .queues()
        .into_iter()
        .find(|q| q.address == address)
        .map(|q| (q.ready, q.unsettled, q.consumers))
}

// ---------------------------------------------------------------------------
// fe2o3-amqp, the third-party client
// ---------------------------------------------------------------------------

/// A connection of the third-party client.
pub type Conn = ConnectionHandle<()>;
/// A session of the third-party client.
pub type Sess = SessionHandle<()>;
/// The body type every test receives into.
pub type AnyBody = Body<FeValue>;

/// Open an anonymous (no SASL) connection.
pub async fn connect(broker: &Broker, id: &str) -> Conn {
    within(
        Duration::from_secs(5),
        "fe2o3 connection open",
        Connection::open(id.to_string(), broker.url().as_str()),
    )
    .await
    .expect("connection opens")
}

/// Begin a session.
pub async fn begin_session(connection: &mut Conn) -> Sess {
    step("fe2o3 session begin", Session::begin(connection))
        .await
        .expect("session begins")
}

/// Attach a sender to `/queues/<queue>`.
pub async fn attach_sender(session: &mut Sess, name: &str, queue: &str) -> Sender {
    step(
        "fe2o3 sender attach",
        Sender::attach(session, name.to_string(), format!("/queues/{queue}")),
    )
    .await
    .expect("sender attaches")
}

/// Attach a receiver to `/queues/<queue>` with manual credit `credit`
/// (granted right away when non-zero).
pub async fn attach_receiver(session: &mut Sess, name: &str, queue: &str, credit: u32) -> Receiver {
    let mut receiver = step(
        "fe2o3 receiver attach",
        Receiver::builder()
            .name(name.to_string())
            .source(format!("/queues/{queue}"))
            .credit_mode(CreditMode::Manual)
            .attach(session),
    )
    .await
    .expect("receiver attaches");
    if credit > 0 {
        step("set credit", receiver.set_credit(credit))
            .await
            .expect("credit granted");
    }
    receiver
}

/// Send a string body and expect `accepted`.
pub async fn send_text(sender: &mut Sender, text: &str) {
    let outcome = step(
        "send (waits for the outcome)",
        sender.send(text.to_string()),
    )
    .await
    .expect("send succeeds");
    assert!(
        outcome.is_accepted(),
        "expected accepted for {text:?}, got {outcome:?}"
    );
}

/// Receive one delivery (any body), bounded.
pub async fn recv(receiver: &mut Receiver) -> fe2o3_amqp::link::delivery::Delivery<AnyBody> {
    step("receive a delivery", receiver.recv::<AnyBody>())
        .await
        .expect("receive succeeds")
}

/// Receive one delivery whose body is a string.
pub async fn recv_text(
    receiver: &mut Receiver,
) -> (fe2o3_amqp::link::delivery::Delivery<String>, String) {
    let delivery = step("receive a text delivery", receiver.recv::<String>())
        .await
        .expect("receive succeeds");
    let text = delivery.body().clone();
    (delivery, text)
}

/// Assert that nothing arrives on `receiver` for `quiet`.
pub async fn expect_nothing(receiver: &mut Receiver, quiet: Duration, why: &str) {
    if let Ok(result) = tokio::time::timeout(quiet, receiver.recv::<AnyBody>()).await {
        panic!("expected no delivery ({why}), got {result:?}");
    }
}

/// The string inside an amqp-value body, if that is what the body is.
pub fn body_text(message: &Message<AnyBody>) -> Option<String> {
    match &message.body {
        Body::Value(v) => match &v.0 {
            FeValue::String(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// delivery-count of the header (0 when there is no header).
pub fn header_delivery_count<T>(message: &Message<T>) -> u32 {
    message.header.as_ref().map_or(0, |h| h.delivery_count)
}

/// A full round trip on a fresh connection: the broker still serves
/// clients.
pub async fn assert_serves(broker: &Broker, queue: &str) {
    let mut connection = connect(broker, &format!("health-{queue}")).await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "health-tx", queue).await;
    let mut rx = attach_receiver(&mut session, "health-rx", queue, 1).await;
    send_text(&mut tx, "still alive").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "still alive");
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("close sender", tx.close()).await.unwrap();
    step("close receiver", rx.close()).await.unwrap();
    step("end session", session.end()).await.unwrap();
    step("close connection", connection.close()).await.unwrap();
}

/// A client connected before something bad happens, checked afterwards.
pub struct Bystander {
    connection: Conn,
    session: Sess,
    sender: Sender,
    receiver: Receiver,
    sent: usize,
}

impl Bystander {
    /// Connect and attach a sender and receiver on `queue`.
    pub async fn connect(broker: &Broker, queue: &str) -> Bystander {
        let mut connection = connect(broker, &format!("bystander-{queue}")).await;
        let mut session = begin_session(&mut connection).await;
        let sender = attach_sender(&mut session, "bystander-tx", queue).await;
        let receiver = attach_receiver(&mut session, "bystander-rx", queue, 100).await;
        let mut bystander = Bystander {
            connection,
            session,
            sender,
            receiver,
            sent: 0,
        };
        bystander.check().await;
        bystander
    }

    /// One more round trip on the existing connection.
    pub async fn check(&mut self) {
        self.sent += 1;
        let text = format!("bystander {}", self.sent);
        send_text(&mut self.sender, &text).await;
        let (delivery, got) = recv_text(&mut self.receiver).await;
        assert_eq!(got, text, "the bystander's connection still works");
        step("accept", self.receiver.accept(&delivery))
            .await
            .unwrap();
    }

    /// Close everything cleanly.
    pub async fn close(mut self) {
        step("close sender", self.sender.close()).await.unwrap();
        step("close receiver", self.receiver.close()).await.unwrap();
        step("end session", self.session.end()).await.unwrap();
        step("close connection", self.connection.close())
            .await
            .unwrap();
    }
}

// ---------------------------------------------------------------------------
// Raw frames over a socket, through the broker's public codec
// ---------------------------------------------------------------------------

/// What a raw read produced.
#[derive(Debug)]
pub enum Read {
    /// A whole frame.
    Frame(Frame),
    /// The peer closed the socket (EOF, or a reset after close).
    Eof,
}

/// A client that writes and reads raw AMQP frames.
pub struct Raw {
    pub stream: TcpStream,
    buf: BytesMut,
    /// Size (from its header) of the frame `read_within` returned last.
    pub last_frame_size: usize,
}

impl Raw {
    /// Connect a TCP socket to the broker.
    pub async fn connect(addr: SocketAddr) -> Raw {
        let stream = step("tcp connect", TcpStream::connect(addr))
            .await
            .expect("tcp connect");
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
            last_frame_size: 0,
        }
    }

    /// Write raw bytes.
    pub async fn write(&mut self, bytes: &[u8]) {
        step("raw write", self.stream.write_all(bytes))
            .await
            .expect("raw write");
    }

    /// Write raw bytes, tolerating a peer that already closed.
    pub async fn write_lenient(&mut self, bytes: &[u8]) {
        let _ = step("raw write", self.stream.write_all(bytes)).await;
    }

    /// Encode and write one frame with an optional payload.
    pub async fn send_with_payload(
        &mut self,
        channel: u16,
        performative: Performative,
        payload: &[u8],
    ) {
        let mut out = BytesMut::new();
        encode_amqp_frame(&mut out, channel, &performative, payload.len());
        out.extend_from_slice(payload);
        self.write(&out).await;
    }

    /// Encode and write one frame.
    pub async fn send(&mut self, channel: u16, performative: Performative) {
        self.send_with_payload(channel, performative, &[]).await;
    }

    /// Read exactly `n` raw bytes (protocol headers).
    pub async fn read_bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            let read = step("raw read", self.stream.read_buf(&mut self.buf))
                .await
                .expect("raw read");
            assert!(
                read > 0,
                "EOF after {} of {n} expected bytes",
                self.buf.len()
            );
        }
        self.buf.split_to(n).to_vec()
    }

    /// The next frame (heartbeats included), or EOF, within `limit`.
    pub async fn read_within(&mut self, limit: Duration) -> Read {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let size = (self.buf.len() >= 4)
                .then(|| u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]));
            if let Some(frame) =
                decode_frame(&mut self.buf, u32::MAX).expect("broker frames decode")
            {
                self.last_frame_size = size.unwrap_or(0) as usize;
                return Read::Frame(frame);
            }
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(remaining, self.stream.read_buf(&mut self.buf)).await {
                Err(_) => panic!("no frame from the broker within {limit:?}"),
                Ok(Ok(0)) | Ok(Err(_)) => {
                    if self.buf.is_empty() {
                        return Read::Eof;
                    }
                    panic!("EOF inside a frame: {} bytes left over", self.buf.len());
                }
                Ok(Ok(_)) => {}
            }
        }
    }

    /// The next frame that is not a heartbeat; fails on EOF.
    pub async fn frame(&mut self) -> Frame {
        loop {
            match self.read_within(STEP).await {
                Read::Frame(Frame {
                    body: FrameBody::Empty,
                    ..
                }) => continue,
                Read::Frame(frame) => return frame,
                Read::Eof => panic!("the broker closed the socket unexpectedly"),
            }
        }
    }

    /// The next non-heartbeat performative (and its payload).
    pub async fn performative(&mut self) -> (u16, Performative, Bytes) {
        let frame = self.frame().await;
        match frame.body {
            FrameBody::Amqp {
                performative,
                payload,
            } => (frame.channel, performative, payload),
            other => panic!("expected an AMQP performative, got {other:?}"),
        }
    }

    /// Send our AMQP header (no SASL) and check the broker's.
    pub async fn amqp_header(&mut self) {
        self.write(&AMQP_HEADER).await;
        let header = self.read_bytes(8).await;
        assert_eq!(header, AMQP_HEADER, "broker answers with the AMQP header");
    }

    /// Header exchange plus `open` both ways; returns the broker's open.
    /// Our open is pipelined right behind our header (as Qpid Proton does);
    /// the step-by-step handshake is covered by amqp_handshake.rs and by
    /// every fe2o3 connection.
    pub async fn open_with(&mut self, open: Open) -> Open {
        let mut out = BytesMut::new();
        out.extend_from_slice(&AMQP_HEADER);
        encode_amqp_frame(&mut out, 0, &Performative::Open(Box::new(open)), 0);
        self.write(&out).await;
        let header = self.read_bytes(8).await;
        assert_eq!(header, AMQP_HEADER, "broker answers with the AMQP header");
        match self.performative().await {
            (0, Performative::Open(open), _) => *open,
            other => panic!("expected the broker's open, got {other:?}"),
        }
    }

    /// A connection opened with default parameters.
    pub async fn open(&mut self) -> Open {
        self.open_with(open("raw-client")).await
    }

    /// Begin a session on `channel`; returns the broker's begin.
    pub async fn begin(&mut self, channel: u16) -> Begin {
        self.send(channel, Performative::Begin(Box::new(begin())))
            .await;
        match self.performative().await {
            (ch, Performative::Begin(reply), _) if ch == channel => *reply,
            other => panic!("expected begin on channel {channel}, got {other:?}"),
        }
    }

    /// Attach a publishing link; returns the broker's attach and the flow
    /// granting credit (if the broker sent one right away, within 500 ms).
    pub async fn attach_publisher(
        &mut self,
        channel: u16,
        handle: u32,
        queue: &str,
    ) -> (Attach, Option<Flow>) {
        self.send(
            channel,
            Performative::Attach(Box::new(attach(handle, Role::Sender, queue))),
        )
        .await;
        let reply = match self.performative().await {
            (_, Performative::Attach(a), _) => *a,
            other => panic!("expected attach, got {other:?}"),
        };
        let flow = match tokio::time::timeout(Duration::from_millis(500), self.performative()).await
        {
            Ok((_, Performative::Flow(flow), _)) => Some(flow),
            Ok(other) => panic!("expected a flow after the publisher attach, got {other:?}"),
            Err(_) => None,
        };
        (reply, flow)
    }

    /// Attach a consuming link; returns the broker's attach.
    pub async fn attach_consumer(&mut self, channel: u16, handle: u32, queue: &str) -> Attach {
        self.send(
            channel,
            Performative::Attach(Box::new(attach(handle, Role::Receiver, queue))),
        )
        .await;
        match self.performative().await {
            (_, Performative::Attach(a), _) => *a,
            other => panic!("expected attach, got {other:?}"),
        }
    }

    /// Read until the broker's `close`; returns its error. Frames before it
    /// (open, begin, ...) are skipped.
    pub async fn expect_close(&mut self) -> Option<Error> {
        loop {
            match self.read_within(STEP).await {
                Read::Frame(Frame {
                    body:
                        FrameBody::Amqp {
                            performative: Performative::Close(close),
                            ..
                        },
                    channel,
                }) => {
                    assert_eq!(channel, 0, "close travels on channel 0");
                    return close.error;
                }
                Read::Frame(_) => continue,
                Read::Eof => panic!("socket closed without an AMQP close frame"),
            }
        }
    }

    /// Read until the broker's `close` and check its error condition.
    pub async fn expect_close_with(&mut self, condition: &str) {
        let error = self.expect_close().await;
        let got = error.as_ref().map(|e| e.condition.as_str());
        assert_eq!(got, Some(condition), "close error: {error:?}");
    }

    /// The socket reaches EOF within `limit` (any bytes before it are
    /// dropped).
    pub async fn expect_eof_within(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        let mut sink = [0u8; 4096];
        loop {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(remaining, self.stream.read(&mut sink)).await {
                Err(_) => panic!("socket still open after {limit:?}"),
                Ok(Ok(0)) | Ok(Err(_)) => return,
                Ok(Ok(_)) => {}
            }
        }
    }

    /// The socket reaches EOF within 5 s.
    pub async fn expect_eof(&mut self) {
        self.expect_eof_within(Duration::from_secs(5)).await;
    }
}

/// An `open` with the given container-id and permissive limits.
pub fn open(container_id: &str) -> Open {
    Open {
        container_id: container_id.to_string(),
        hostname: None,
        max_frame_size: 1024 * 1024,
        channel_max: 255,
        idle_time_out: None,
        outgoing_locales: Vec::new(),
        incoming_locales: Vec::new(),
        offered_capabilities: Vec::new(),
        desired_capabilities: Vec::new(),
        properties: None,
    }
}

/// A `begin` with large windows.
pub fn begin() -> Begin {
    Begin {
        remote_channel: None,
        next_outgoing_id: 0,
        incoming_window: 1_000_000,
        outgoing_window: 1_000_000,
        handle_max: 1023,
        offered_capabilities: Vec::new(),
        desired_capabilities: Vec::new(),
        properties: None,
    }
}

/// An `attach` for `/queues/<queue>`; `role` is ours.
pub fn attach(handle: u32, role: Role, queue: &str) -> Attach {
    let address = Some(format!("/queues/{queue}"));
    let (source, target) = match role {
        Role::Sender => (
            Some(Source::default()),
            Some(Target {
                address,
                ..Target::default()
            }),
        ),
        Role::Receiver => (
            Some(Source {
                address,
                ..Source::default()
            }),
            Some(Target::default()),
        ),
    };
    Attach {
        name: format!("raw-link-{handle}"),
        handle,
        role,
        snd_settle_mode: SenderSettleMode::Mixed,
        rcv_settle_mode: ReceiverSettleMode::First,
        source,
        target,
        unsettled: None,
        incomplete_unsettled: false,
        initial_delivery_count: (role == Role::Sender).then_some(0),
        max_message_size: None,
        offered_capabilities: Vec::new(),
        desired_capabilities: Vec::new(),
        properties: None,
    }
}

/// A link flow granting `credit` on `handle` (session fields permissive).
pub fn credit_flow(handle: u32, delivery_count: u32, credit: u32, drain: bool) -> Flow {
    Flow {
        next_incoming_id: Some(0),
        incoming_window: 1_000_000,
        next_outgoing_id: 0,
        outgoing_window: 1_000_000,
        handle: Some(handle),
        delivery_count: Some(delivery_count),
        link_credit: Some(credit),
        drain,
        ..Flow::default()
    }
}

/// The first transfer of a one-frame delivery.
pub fn transfer(handle: u32, delivery_id: u32, settled: bool) -> Transfer {
    Transfer {
        handle,
        delivery_id: Some(delivery_id),
        delivery_tag: Some(Bytes::from(delivery_id.to_be_bytes().to_vec())),
        message_format: Some(0),
        settled: Some(settled),
        ..Transfer::default()
    }
}

/// A described section value (0x70 header ... 0x78 footer).
pub fn section(code: u64, value: Value) -> Value {
    Value::Described(Box::new((Descriptor::Code(code), value)))
}

/// Encode values back to back.
pub fn encode(values: &[Value]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for value in values {
        value.encode(&mut out);
    }
    out.to_vec()
}

/// A minimal message: one amqp-value section holding `text`.
pub fn text_message(text: &str) -> Vec<u8> {
    encode(&[section(0x77, Value::String(text.to_string()))])
}

/// One delivery as a raw consumer saw it.
#[derive(Debug)]
pub struct RawDelivery {
    /// The first transfer of the delivery.
    pub first: Transfer,
    /// All payload bytes joined.
    pub payload: Vec<u8>,
    /// Number of transfer frames it took.
    pub frames: usize,
    /// Largest of those frames, in bytes.
    pub largest_frame: usize,
}

impl Raw {
    /// Publish one message on an attached publishing link and return the
    /// broker's disposition for it.
    pub async fn publish(
        &mut self,
        channel: u16,
        handle: u32,
        delivery_id: u32,
        message: &[u8],
    ) -> broker::codec::Disposition {
        self.send_with_payload(
            channel,
            Performative::Transfer(transfer(handle, delivery_id, false)),
            message,
        )
        .await;
        loop {
            match self.performative().await {
                (_, Performative::Disposition(d), _) => return d,
                (_, Performative::Flow(_), _) => continue,
                other => panic!("expected a disposition, got {other:?}"),
            }
        }
    }

    /// Read one whole delivery (all its transfer frames); flows in between
    /// are skipped.
    pub async fn delivery(&mut self) -> RawDelivery {
        let mut first: Option<Transfer> = None;
        let mut payload = Vec::new();
        let mut frames = 0;
        let mut largest_frame = 0;
        loop {
            let (_, performative, bytes) = self.performative().await;
            match performative {
                Performative::Transfer(t) => {
                    frames += 1;
                    largest_frame = largest_frame.max(self.last_frame_size);
                    payload.extend_from_slice(&bytes);
                    let more = t.more;
                    if first.is_none() {
                        first = Some(t);
                    }
                    if !more {
                        return RawDelivery {
                            first: first.unwrap(),
                            payload,
                            frames,
                            largest_frame,
                        };
                    }
                }
                Performative::Flow(_) => continue,
                other => panic!("expected a transfer, got {other:?}"),
            }
        }
    }
}

impl Raw {
    /// Write one SASL frame.
    pub async fn send_sasl(&mut self, frame: broker::codec::SaslFrame) {
        let mut out = BytesMut::new();
        broker::codec::frame::encode_sasl_frame(&mut out, &frame);
        self.write(&out).await;
    }

    /// The next SASL frame.
    pub async fn sasl_frame(&mut self) -> broker::codec::SaslFrame {
        match self.frame().await.body {
            FrameBody::Sasl(sasl) => sasl,
            other => panic!("expected a SASL frame, got {other:?}"),
        }
    }

    /// SASL header out, SASL header and mechanisms back; returns the
    /// offered mechanisms.
    pub async fn sasl_start(&mut self) -> Vec<String> {
        self.write(&broker::codec::frame::SASL_HEADER).await;
        let header = self.read_bytes(8).await;
        assert_eq!(
            header,
            broker::codec::frame::SASL_HEADER,
            "SASL header answered"
        );
        match self.sasl_frame().await {
            broker::codec::SaslFrame::Mechanisms(m) => {
                m.mechanisms.into_iter().map(|s| s.0).collect()
            }
            other => panic!("expected sasl-mechanisms, got {other:?}"),
        }
    }

    /// Send sasl-init and return the outcome's code.
    pub async fn sasl_init(
        &mut self,
        mechanism: &str,
        response: Option<&[u8]>,
    ) -> broker::codec::SaslCode {
        self.send_sasl(broker::codec::SaslFrame::Init(broker::codec::SaslInit {
            mechanism: broker::codec::Symbol::from(mechanism),
            initial_response: response.map(Bytes::copy_from_slice),
            hostname: None,
        }))
        .await;
        match self.sasl_frame().await {
            broker::codec::SaslFrame::Outcome(o) => o.code,
            other => panic!("expected sasl-outcome, got {other:?}"),
        }
    }
}
