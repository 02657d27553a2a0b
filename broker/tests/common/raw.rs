//! `Raw`: a client that writes and reads raw AMQP frames over a socket,
//! through the broker's public codec (handshake, links, publish, whole
//! deliveries, SASL).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ramqpd_broker::codec::frame::{decode_frame, encode_amqp_frame, AMQP_HEADER};
use ramqpd_broker::codec::{
    Attach, Begin, Error, Flow, Frame, FrameBody, Open, Performative, Role, Transfer,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::frames::{attach, begin, open, transfer};
use super::wait::{step, STEP};

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

    /// Read until the broker's `end` on `channel` (frames before it are
    /// skipped) and check its error condition; a `close` instead fails.
    pub async fn expect_end_with(&mut self, channel: u16, condition: &str) {
        loop {
            match self.read_within(STEP).await {
                Read::Frame(Frame {
                    body:
                        FrameBody::Amqp {
                            performative: Performative::End(end),
                            ..
                        },
                    channel: got,
                }) if got == channel => {
                    let error = end.error;
                    let got = error.as_ref().map(|e| e.condition.as_str());
                    assert_eq!(got, Some(condition), "end error: {error:?}");
                    return;
                }
                Read::Frame(Frame {
                    body:
                        FrameBody::Amqp {
                            performative: Performative::Close(close),
                            ..
                        },
                    ..
                }) => panic!(
                    "the connection closed ({:?}) instead of ending the session",
                    close.error
                ),
                Read::Frame(_) => continue,
                Read::Eof => panic!("socket closed without an AMQP end frame"),
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
    ) -> ramqpd_broker::codec::Disposition {
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
    pub async fn send_sasl(&mut self, frame: ramqpd_broker::codec::SaslFrame) {
        let mut out = BytesMut::new();
        ramqpd_broker::codec::frame::encode_sasl_frame(&mut out, &frame);
        self.write(&out).await;
    }

    /// The next SASL frame.
    pub async fn sasl_frame(&mut self) -> ramqpd_broker::codec::SaslFrame {
        match self.frame().await.body {
            FrameBody::Sasl(sasl) => sasl,
            other => panic!("expected a SASL frame, got {other:?}"),
        }
    }

    /// SASL header out, SASL header and mechanisms back; returns the
    /// offered mechanisms.
    pub async fn sasl_start(&mut self) -> Vec<String> {
        self.write(&ramqpd_broker::codec::frame::SASL_HEADER).await;
        let header = self.read_bytes(8).await;
        assert_eq!(
            header,
            ramqpd_broker::codec::frame::SASL_HEADER,
            "SASL header answered"
        );
        match self.sasl_frame().await {
            ramqpd_broker::codec::SaslFrame::Mechanisms(m) => {
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
    ) -> ramqpd_broker::codec::SaslCode {
        self.send_sasl(ramqpd_broker::codec::SaslFrame::Init(
            ramqpd_broker::codec::SaslInit {
                mechanism: ramqpd_broker::codec::Symbol::from(mechanism),
                initial_response: response.map(Bytes::copy_from_slice),
                hostname: None,
            },
        ))
        .await;
        match self.sasl_frame().await {
            ramqpd_broker::codec::SaslFrame::Outcome(o) => o.code,
            other => panic!("expected sasl-outcome, got {other:?}"),
        }
    }
}
