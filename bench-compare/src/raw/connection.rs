//! The connection: TCP (TCP_NODELAY), SASL PLAIN/ANONYMOUS, open, one
//! session, the frame dispatcher that keeps session and link state, batched
//! writes, heartbeats, and the bounded waits every other call is built on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use broker::codec::frame::{self, AMQP_HEADER, SASL_HEADER};
use broker::codec::{
    Attach, Begin, Close, Detach, End, Error as AmqpError, Frame, FrameBody, Open, Performative,
    SaslCode, SaslFrame, SaslInit, Symbol,
};
use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant as Deadline;

use super::receiver::ReceiverLink;
use super::sender::SenderLink;

/// The max-frame-size we announce (and accept).
const MAX_FRAME: u32 = 1 << 20;
/// Our session incoming window, in transfer frames; re-opened at half.
pub(crate) const INCOMING_WINDOW: u32 = 1 << 16;
/// Write the buffer out once it holds this much.
pub(crate) const FLUSH_AT: usize = 64 * 1024;
/// Bytes reserved in the read buffer before each read.
const READ_CHUNK: usize = 64 * 1024;
/// Links per session we allow ourselves.
const HANDLE_MAX: u32 = 1023;

/// What a link does.
pub(crate) enum LinkKind {
    /// We send.
    Sender(SenderLink),
    /// We receive.
    Receiver(ReceiverLink),
}

/// One link of the session, indexed by our handle.
pub(crate) struct Link {
    pub(crate) name: String,
    pub(crate) remote_attach: Option<Box<Attach>>,
    pub(crate) remote_detach: Option<Detach>,
    pub(crate) detach_sent: bool,
    pub(crate) kind: LinkKind,
}

impl Link {
    /// An error if the peer detached this link.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.remote_detach {
            Some(detach) => bail!(
                "link {:?} detached by the peer: {}",
                self.name,
                describe_error(detach.error.as_ref())
            ),
            None => Ok(()),
        }
    }
}

/// An AMQP connection with one session (see the module docs of `raw`).
pub struct Connection {
    reader: OwnedReadHalf,
    writer: Arc<Mutex<OwnedWriteHalf>>,
    clock: Instant,
    last_write_ms: Arc<AtomicU64>,
    heartbeat: Option<JoinHandle<()>>,
    rbuf: BytesMut,
    pub(crate) wbuf: BytesMut,
    /// Limit on every single wait.
    pub(crate) timeout: Duration,
    pub(crate) channel: u16,
    pub(crate) max_frame_out: u32,
    // Session state (transport 2.5.6).
    pub(crate) next_outgoing_id: u32,
    pub(crate) next_delivery_id: u32,
    pub(crate) remote_incoming_window: u32,
    pub(crate) next_incoming_id: u32,
    pub(crate) incoming_window: u32,
    pub(crate) remote_channel: u16,
    pub(crate) handle_max: u32,
    pub(crate) links: Vec<Option<Link>>,
    pub(crate) by_remote: HashMap<u32, u32>,
    /// Unsettled outgoing deliveries: delivery-id -> our handle.
    pub(crate) unsettled: HashMap<u32, u32>,
    /// Accepted incoming deliveries not yet told: ranges (first, last).
    pub(crate) pending_accepts: Vec<(u32, u32)>,
    /// Outgoing deliveries the peer did not settle: ranges to settle.
    pub(crate) pending_settles: Vec<(u32, u32)>,
    failure: Option<String>,
    pub(crate) closing: bool,
    pub(crate) end_received: bool,
    pub(crate) close_received: bool,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
    }
}

/// An AMQP error for humans.
pub(crate) fn describe_error(error: Option<&AmqpError>) -> String {
    match error {
        Some(e) => format!(
            "{} ({})",
            e.condition.as_str(),
            e.description.as_deref().unwrap_or("no description")
        ),
        None => "no error".to_string(),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Connection {
    /// Dial `url` (`amqp://[user:pass@]host[:port]`), authenticate (SASL
    /// PLAIN with the URL's user info, else ANONYMOUS), open, and begin one
    /// session. `timeout` bounds every wait of this connection from now on.
    pub async fn connect(url: &str, container_id: &str, timeout: Duration) -> Result<Connection> {
        let parsed = url::Url::parse(url).with_context(|| format!("invalid URL {url:?}"))?;
        if parsed.scheme() != "amqp" {
            bail!("only amqp:// URLs are supported (got {url:?})");
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| anyhow!("URL {url:?} has no host"))?
            .to_string();
        let port = parsed.port().unwrap_or(5672);
        let stream =
            match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port))).await {
                Ok(stream) => stream.with_context(|| format!("TCP connect to {host}:{port}"))?,
                Err(_) => bail!("TCP connect to {host}:{port}: timed out after {timeout:?}"),
            };
        stream.set_nodelay(true).context("set TCP_NODELAY")?;
        let (reader, writer) = stream.into_split();
        let mut conn = Connection {
            reader,
            writer: Arc::new(Mutex::new(writer)),
            clock: Instant::now(),
            last_write_ms: Arc::new(AtomicU64::new(0)),
            heartbeat: None,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: BytesMut::with_capacity(FLUSH_AT + READ_CHUNK),
            timeout,
            channel: 0,
            max_frame_out: frame::MIN_MAX_FRAME_SIZE,
            next_outgoing_id: 0,
            next_delivery_id: 0,
            remote_incoming_window: 0,
            next_incoming_id: 0,
            incoming_window: INCOMING_WINDOW,
            remote_channel: 0,
            handle_max: HANDLE_MAX,
            links: Vec::new(),
            by_remote: HashMap::new(),
            unsettled: HashMap::new(),
            pending_accepts: Vec::new(),
            pending_settles: Vec::new(),
            failure: None,
            closing: false,
            end_received: false,
            close_received: false,
        };
        let user = (!parsed.username().is_empty()).then(|| {
            (
                percent_decode(parsed.username()),
                percent_decode(parsed.password().unwrap_or("")),
            )
        });
        let deadline = Deadline::now() + timeout;
        conn.sasl(user, &host, deadline).await.context("SASL")?;
        conn.open(container_id, &host, deadline)
            .await
            .context("open")?;
        conn.begin(deadline).await.context("begin")?;
        Ok(conn)
    }

    async fn read_header(&mut self, deadline: Deadline) -> Result<[u8; 8]> {
        while self.rbuf.len() < 8 {
            self.read_more(deadline, "protocol header").await?;
        }
        let mut header = [0u8; 8];
        header.copy_from_slice(&self.rbuf.split_to(8));
        Ok(header)
    }

    async fn read_frame(&mut self, deadline: Deadline, what: &str) -> Result<Frame> {
        loop {
            if let Some(frame) = frame::decode_frame(&mut self.rbuf, MAX_FRAME)
                .map_err(|e| anyhow!("{what}: undecodable frame: {e}"))?
            {
                return Ok(frame);
            }
            self.read_more(deadline, what).await?;
        }
    }

    async fn sasl(
        &mut self,
        user: Option<(String, String)>,
        host: &str,
        deadline: Deadline,
    ) -> Result<()> {
        self.wbuf.put_slice(&SASL_HEADER);
        self.flush().await?;
        let header = self.read_header(deadline).await?;
        if header != SASL_HEADER {
            bail!("the peer answered the SASL header with {header:?}");
        }
        let offered = match self.read_frame(deadline, "sasl-mechanisms").await?.body {
            FrameBody::Sasl(SaslFrame::Mechanisms(m)) => m.mechanisms,
            other => bail!("expected sasl-mechanisms, got {other:?}"),
        };
        let offers = |name: &str| offered.iter().any(|m| m.as_str() == name);
        let (mechanism, response) = match &user {
            Some((user, pass)) if offers("PLAIN") => {
                let mut response = Vec::with_capacity(user.len() + pass.len() + 2);
                response.push(0);
                response.extend_from_slice(user.as_bytes());
                response.push(0);
                response.extend_from_slice(pass.as_bytes());
                ("PLAIN", Some(Bytes::from(response)))
            }
            None if offers("ANONYMOUS") => ("ANONYMOUS", None),
            _ => bail!(
                "no usable SASL mechanism (credentials given: {}; offered: {:?})",
                user.is_some(),
                offered.iter().map(Symbol::as_str).collect::<Vec<_>>()
            ),
        };
        let init = SaslInit {
            mechanism: Symbol::from(mechanism),
            initial_response: response,
            hostname: Some(host.to_string()),
        };
        frame::encode_sasl_frame(&mut self.wbuf, &SaslFrame::Init(init));
        self.flush().await?;
        match self.read_frame(deadline, "sasl-outcome").await?.body {
            FrameBody::Sasl(SaslFrame::Outcome(o)) if o.code == SaslCode::Ok => Ok(()),
            FrameBody::Sasl(SaslFrame::Outcome(o)) => {
                bail!("SASL {mechanism} refused: {:?}", o.code)
            }
            other => bail!("expected sasl-outcome ({mechanism}), got {other:?}"),
        }
    }

    async fn open(&mut self, container_id: &str, host: &str, deadline: Deadline) -> Result<()> {
        self.wbuf.put_slice(&AMQP_HEADER);
        let open = Open {
            container_id: container_id.to_string(),
            hostname: Some(host.to_string()),
            max_frame_size: MAX_FRAME,
            channel_max: 0,
            idle_time_out: None,
            outgoing_locales: Vec::new(),
            incoming_locales: Vec::new(),
            offered_capabilities: Vec::new(),
            desired_capabilities: Vec::new(),
            properties: None,
        };
        frame::encode_amqp_frame(&mut self.wbuf, 0, &Performative::Open(Box::new(open)), 0);
        self.flush().await?;
        let header = self.read_header(deadline).await?;
        if header != AMQP_HEADER {
            bail!("the peer answered the AMQP header with {header:?}");
        }
        let open = loop {
            match self.read_frame(deadline, "open").await?.body {
                FrameBody::Amqp {
                    performative: Performative::Open(open),
                    ..
                } => break open,
                FrameBody::Empty => continue,
                other => bail!("expected open, got {other:?}"),
            }
        };
        if open.max_frame_size < frame::MIN_MAX_FRAME_SIZE {
            bail!("peer's max-frame-size {} is too small", open.max_frame_size);
        }
        self.max_frame_out = open.max_frame_size.min(MAX_FRAME);
        if let Some(idle) = open.idle_time_out.filter(|ms| *ms > 0) {
            self.start_heartbeat(idle);
        }
        Ok(())
    }

    async fn begin(&mut self, deadline: Deadline) -> Result<()> {
        let begin = Begin {
            remote_channel: None,
            next_outgoing_id: self.next_outgoing_id,
            incoming_window: INCOMING_WINDOW,
            outgoing_window: u32::MAX,
            handle_max: HANDLE_MAX,
            offered_capabilities: Vec::new(),
            desired_capabilities: Vec::new(),
            properties: None,
        };
        frame::encode_amqp_frame(
            &mut self.wbuf,
            self.channel,
            &Performative::Begin(Box::new(begin)),
            0,
        );
        self.flush().await?;
        loop {
            let frame = self.read_frame(deadline, "begin").await?;
            match frame.body {
                FrameBody::Amqp {
                    performative: Performative::Begin(begin),
                    ..
                } if begin.remote_channel == Some(self.channel) => {
                    self.remote_channel = frame.channel;
                    self.next_incoming_id = begin.next_outgoing_id;
                    self.remote_incoming_window = begin.incoming_window;
                    self.handle_max = begin.handle_max.min(HANDLE_MAX);
                    return Ok(());
                }
                FrameBody::Empty => continue,
                FrameBody::Amqp {
                    performative: Performative::Close(close),
                    ..
                } => bail!(
                    "connection closed: {}",
                    describe_error(close.error.as_ref())
                ),
                other => bail!("expected begin, got {other:?}"),
            }
        }
    }

    /// Send an empty frame whenever nothing was written for a quarter of
    /// the peer's idle-time-out (so never more than half of it goes by).
    fn start_heartbeat(&mut self, idle_ms: u32) {
        let tick = Duration::from_millis(u64::from(idle_ms / 4).max(1));
        let tick_ms = tick.as_millis() as u64;
        let writer = self.writer.clone();
        let last = self.last_write_ms.clone();
        let clock = self.clock;
        self.heartbeat = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(tick).await;
                let now = clock.elapsed().as_millis() as u64;
                if now.saturating_sub(last.load(Ordering::Relaxed)) < tick_ms {
                    continue;
                }
                let mut writer = writer.lock().await;
                if writer.write_all(&[0, 0, 0, 8, 2, 0, 0, 0]).await.is_err() {
                    return;
                }
                last.store(clock.elapsed().as_millis() as u64, Ordering::Relaxed);
            }
        }));
    }

    /// Write everything buffered (frames and pending dispositions) with
    /// one `write_all`.
    pub async fn flush(&mut self) -> Result<()> {
        self.put_pending_dispositions();
        if self.wbuf.is_empty() {
            return Ok(());
        }
        let mut writer = self.writer.lock().await;
        let written = tokio::time::timeout(self.timeout, writer.write_all(&self.wbuf)).await;
        drop(writer);
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(self.fail(format!("write failed: {e}"))),
            Err(_) => return Err(self.fail(format!("write timed out after {:?}", self.timeout))),
        }
        self.wbuf.clear();
        self.last_write_ms
            .store(self.clock.elapsed().as_millis() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn fail(&mut self, message: String) -> anyhow::Error {
        if self.failure.is_none() {
            self.failure = Some(message.clone());
        }
        anyhow!(message)
    }

    /// Flush, then read whatever the socket has (waiting until `deadline`).
    async fn read_more(&mut self, deadline: Deadline, what: &str) -> Result<()> {
        self.flush().await?;
        self.rbuf.reserve(READ_CHUNK);
        match tokio::time::timeout_at(deadline, self.reader.read_buf(&mut self.rbuf)).await {
            Ok(Ok(0)) => Err(self.fail(format!("{what}: connection closed by the peer"))),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.fail(format!("{what}: read failed: {e}"))),
            Err(_) => bail!("{what}: timed out after {:?}", self.timeout),
        }
    }

    /// Read what the socket has without waiting, and process it.
    pub(crate) fn poll(&mut self) -> Result<()> {
        self.rbuf.reserve(READ_CHUNK);
        match self.reader.try_read_buf(&mut self.rbuf) {
            Ok(0) => return Err(self.fail("connection closed by the peer".into())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(self.fail(format!("read failed: {e}"))),
        }
        self.pump()
    }

    /// Wait, without a time limit, until the peer has sent something, then
    /// process it. Writes nothing (call [`Connection::flush`] first) and is
    /// cancel safe: for `tokio::select!` against other events, e.g. an
    /// open-loop publisher waiting for its next send time.
    pub async fn input(&mut self) -> Result<()> {
        if let Err(e) = self.reader.readable().await {
            return Err(self.fail(format!("read failed: {e}")));
        }
        self.poll()
    }

    /// Process every whole frame in the read buffer.
    pub(crate) fn pump(&mut self) -> Result<()> {
        loop {
            let frame = match frame::decode_frame(&mut self.rbuf, MAX_FRAME) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => return Err(self.fail(format!("undecodable frame from the peer: {e}"))),
            };
            if let Err(e) = self.on_frame(frame) {
                return Err(self.fail(format!("{e:#}")));
            }
        }
        match &self.failure {
            Some(failure) => bail!("{failure}"),
            None => Ok(()),
        }
    }

    /// Process frames until `ready` holds; false if `deadline` passed first.
    pub(crate) async fn wait_until<F>(
        &mut self,
        deadline: Deadline,
        what: &str,
        mut ready: F,
    ) -> Result<bool>
    where
        F: FnMut(&mut Connection) -> Result<bool>,
    {
        loop {
            self.pump()?;
            if ready(self)? {
                return Ok(true);
            }
            if Deadline::now() >= deadline {
                return Ok(false);
            }
            match self.read_more(deadline, what).await {
                Ok(()) => {}
                Err(_) if self.failure.is_none() && Deadline::now() >= deadline => {
                    return Ok(false)
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Process frames until `ready` holds, within the connection's timeout.
    pub(crate) async fn wait<F>(&mut self, what: &str, ready: F) -> Result<()>
    where
        F: FnMut(&mut Connection) -> Result<bool>,
    {
        let deadline = Deadline::now() + self.timeout;
        if self.wait_until(deadline, what, ready).await? {
            Ok(())
        } else {
            bail!("{what}: timed out after {:?}", self.timeout)
        }
    }

    pub(crate) fn link_mut(&mut self, handle: u32) -> Result<&mut Link> {
        self.links
            .get_mut(handle as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| anyhow!("no link with handle {handle}"))
    }

    /// End the session and close the connection, waiting (bounded) for the
    /// peer's end and close. Links still attached are detached by the end.
    pub async fn close(mut self) -> Result<()> {
        let failed = self.failure.clone();
        self.closing = true;
        if failed.is_none() {
            self.put_pending_dispositions();
            self.put(&Performative::End(End::default()));
            self.wait("session end", |c| Ok(c.end_received)).await?;
        }
        if !self.close_received {
            self.put_channel0(&Performative::Close(Close::default()));
            self.failure = None;
            self.wait("connection close", |c| Ok(c.close_received))
                .await?;
        }
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        let _ = self.writer.lock().await.shutdown().await;
        match failed {
            Some(failure) => bail!("connection had failed: {failure}"),
            None => Ok(()),
        }
    }
}
