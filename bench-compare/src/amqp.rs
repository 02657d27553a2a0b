//! The client side of every bench: fe2o3-amqp connections, sessions and
//! links set up for the fastest correct per-message path, and every network
//! step bounded by a timeout so a broker that stalls or drops messages makes
//! a bin fail with a message instead of hanging.
//!
//! What fe2o3-amqp does per message, and the choices made here:
//!
//! * **TCP_NODELAY.** `Connection::open(url)` connects a plain `TcpStream`
//!   without `TCP_NODELAY`, and fe2o3 writes and flushes every frame on its
//!   own. One small frame in flight per direction (closed loop) then meets
//!   Nagle + delayed ACK. [`connect`] dials the socket itself, sets
//!   `TCP_NODELAY`, and hands it to `open_with_stream` (SASL PLAIN from the
//!   URL's user info, ANONYMOUS otherwise, as `open(url)` would).
//! * **Body section.** A single `data` section (`Data(Binary)`), no header,
//!   no properties: the cheapest message fe2o3 can encode and decode (no
//!   `Value` tree, as `AmqpValue<Value>` would build).
//! * **Pre-settled publish.** `SenderSettleMode::Settled` on the link:
//!   `Sender::send` returns as soon as the transfer is handed to the session
//!   (no disposition to wait for, no unsettled-map entry).
//! * **Confirmed publish.** `SenderSettleMode::Unsettled`: `send` waits for
//!   the broker's disposition (one in flight); `send_batchable` returns a
//!   `DeliveryFut` so a window of them can be in flight.
//! * **Consume.** `ReceiverSettleMode::First`: `accept` sends one settled
//!   `disposition` frame and removes the delivery from the local unsettled
//!   map; no second round trip. `CreditMode::Auto(n)` tops the credit back up
//!   with one `flow` per n/2 deliveries, so there is no per-message flow.
//!   `auto_accept` is off: the bench records the receive time before it
//!   accepts, and checks every message.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::link::CreditMode;
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp::types::messaging::{Data, Message, Outcome};
use fe2o3_amqp::types::primitives::Binary;
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use tokio::net::TcpStream;

/// Run `fut` with a deadline; `what` names the step in the error.
pub async fn within<T, E>(
    timeout: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T>
where
    E: std::fmt::Debug,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(anyhow!("{what}: {error:?}")),
        Err(_) => Err(anyhow!("{what}: timed out after {timeout:?}")),
    }
}

/// One AMQP connection with one session: a separate "application".
pub struct Endpoint {
    /// The connection.
    pub connection: ConnectionHandle<()>,
    /// Its one session.
    pub session: SessionHandle<()>,
    /// The deadline used for every step.
    pub timeout: Duration,
}

/// Open a connection (TCP_NODELAY, SASL from the URL) and begin a session.
/// `amqp://` is AMQP over TCP, `amqps://` over TLS (the CA in
/// `RAMQP_BENCH_TLS_CA`); `ws://` is AMQP over WebSocket (the OASIS
/// binding, through fe2o3's `fe2o3-amqp-ws`) on the same kind of socket.
pub async fn connect(url: &str, container_id: &str, timeout: Duration) -> Result<Endpoint> {
    let parsed = url::Url::parse(url).with_context(|| format!("invalid URL {url:?}"))?;
    let (websocket, tls) = match parsed.scheme() {
        "amqp" => (false, false),
        "amqps" => (false, true),
        "ws" => (true, false),
        _ => {
            bail!("only amqp://, amqps:// and ws:// URLs are supported by the bench (got {url:?})")
        }
    };
    let host = parsed
        .host_str()
        .ok_or_else(|| anyhow!("URL {url:?} has no host"))?
        .to_string();
    let port = parsed
        .port_or_known_default()
        .unwrap_or(if tls { 5671 } else { 5672 });
    let stream = within(
        timeout,
        &format!("TCP connect to {host}:{port}"),
        TcpStream::connect((host.as_str(), port)),
    )
    .await?;
    stream.set_nodelay(true).context("set TCP_NODELAY")?;
    let profile = SaslProfile::try_from(&parsed).ok();
    let mut builder = Connection::builder()
        .container_id(container_id)
        .scheme("amqp")
        .hostname(host.as_str());
    if let Some(profile) = profile {
        builder = builder.sasl_profile(profile);
    }
    let mut connection = if websocket {
        // The upgrade request carries no user info (SASL does).
        let mut ws_url = parsed.clone();
        let _ = ws_url.set_username("");
        let _ = ws_url.set_password(None);
        // The client's WebSocket layer: the broker's own RFC 6455 framing
        // in client mode (`broker::ws`) unless RAMQP_BENCH_WS_CLIENT=
        // tungstenite asks for fe2o3-amqp-ws (tungstenite) with a tuned
        // read buffer, or RAMQP_BENCH_WS_DEFAULTS=1 for tungstenite's
        // defaults (a 128 KiB read buffer zero-filled before every read,
        // a frame's header and payload read with two reads). The client's
        // framing costs as much CPU as the broker's on a shared machine,
        // so it shows in the throughput the bench measures.
        let defaults = std::env::var("RAMQP_BENCH_WS_DEFAULTS").is_ok_and(|v| v == "1");
        let tungstenite =
            defaults || std::env::var("RAMQP_BENCH_WS_CLIENT").is_ok_and(|v| v == "tungstenite");
        if !tungstenite {
            let authority = format!("{host}:{port}");
            let ws = within(
                timeout,
                &format!("WebSocket upgrade to {ws_url}"),
                broker::ws::connect(stream, &authority, ws_url.path(), 1 << 30),
            )
            .await?;
            within(
                timeout,
                &format!("AMQP open to {url}"),
                builder.open_with_stream(ws),
            )
            .await?
        } else {
            let (config, capacity) = if defaults {
                (None, 0)
            } else {
                let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
                    .read_buffer_size(4 * 1024);
                (Some(config), 16 * 1024)
            };
            let stream = tokio::io::BufReader::with_capacity(capacity.max(1), stream);
            let ws = within(
                timeout,
                &format!("WebSocket upgrade to {ws_url}"),
                fe2o3_amqp_ws::WebSocketStream::connect_with_stream_and_config(
                    ws_url.as_str(),
                    stream,
                    config,
                ),
            )
            .await?;
            within(
                timeout,
                &format!("AMQP open to {url}"),
                builder.open_with_stream(ws),
            )
            .await?
        }
    } else if tls {
        let stream = within(
            timeout,
            &format!("TLS handshake with {host}"),
            crate::tls_client::handshake(stream, &host),
        )
        .await?;
        within(
            timeout,
            &format!("AMQP open to {url}"),
            builder.open_with_stream(stream),
        )
        .await?
    } else {
        within(
            timeout,
            &format!("AMQP open to {url}"),
            builder.open_with_stream(stream),
        )
        .await?
    };
    let session = match within(timeout, "session begin", Session::begin(&mut connection)).await {
        Ok(session) => session,
        Err(error) => {
            let _ = tokio::time::timeout(timeout, connection.close()).await;
            return Err(error);
        }
    };
    Ok(Endpoint {
        connection,
        session,
        timeout,
    })
}

impl Endpoint {
    /// Attach a sending link to `address`: pre-settled (`presettled`) or
    /// unsettled (the broker's disposition confirms each message).
    pub async fn sender(&mut self, name: &str, address: &str, presettled: bool) -> Result<Sender> {
        let mode = if presettled {
            SenderSettleMode::Settled
        } else {
            SenderSettleMode::Unsettled
        };
        within(
            self.timeout,
            &format!("attach sender to {address}"),
            Sender::builder()
                .name(name)
                .target(address)
                .sender_settle_mode(mode)
                .attach(&mut self.session),
        )
        .await
    }

    /// Attach a receiving link on `address` with `credit` kept topped up
    /// (`CreditMode::Auto`), settling on the first disposition.
    pub async fn receiver(&mut self, name: &str, address: &str, credit: u32) -> Result<Receiver> {
        within(
            self.timeout,
            &format!("attach receiver to {address}"),
            Receiver::builder()
                .name(name)
                .source(address)
                .receiver_settle_mode(ReceiverSettleMode::First)
                .credit_mode(CreditMode::Auto(credit))
                .auto_accept(false)
                .attach(&mut self.session),
        )
        .await
    }

    /// End the session and close the connection, each within the timeout.
    /// Errors are returned but the connection is always dropped.
    pub async fn close(mut self) -> Result<()> {
        let ended = within(self.timeout, "session end", self.session.end()).await;
        let closed = within(self.timeout, "connection close", self.connection.close()).await;
        ended.and(closed)
    }
}

/// Close a sender link within `timeout`.
pub async fn close_sender(sender: Sender, timeout: Duration) -> Result<()> {
    within(timeout, "detach sender", sender.close()).await
}

/// Close a receiver link within `timeout`.
pub async fn close_receiver(receiver: Receiver, timeout: Duration) -> Result<()> {
    within(timeout, "detach receiver", receiver.close()).await
}

/// The message for a body: one `data` section, nothing else.
pub fn message(body: Vec<u8>) -> Message<Data> {
    Message::builder().data(Binary::from(body)).build()
}

/// A broker outcome that is not `accepted` is a failed publish.
pub fn expect_accepted(outcome: Outcome) -> Result<()> {
    match outcome {
        Outcome::Accepted(_) => Ok(()),
        other => Err(anyhow!("broker did not accept a message: {other:?}")),
    }
}

/// The settlement of an unsettled publish (`Sender::send_batchable`).
pub type Confirm =
    fe2o3_amqp::link::delivery::DeliveryFut<Result<Outcome, fe2o3_amqp::link::SendError>>;

/// Wait (within `timeout`) for a publish's settlement and require `accepted`.
pub async fn confirmed<F>(
    fut: F,
    timeout: Duration,
    what: &(dyn Fn() -> String + Sync),
) -> Result<()>
where
    F: std::future::Future<Output = Result<Outcome, fe2o3_amqp::link::SendError>>,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(outcome)) => expect_accepted(outcome).with_context(what),
        Ok(Err(error)) => Err(anyhow!("{}: publish failed: {error:?}", what())),
        Err(_) => Err(anyhow!(
            "{}: no settlement from the broker within {timeout:?}",
            what()
        )),
    }
}

/// Parse a body size: `256`, `1k`, `1KiB`, `8kb`, `1m`.
pub fn parse_size(text: &str) -> Result<usize> {
    let lower = text.trim().to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits_end);
    let number: usize = number
        .parse()
        .with_context(|| format!("invalid size {text:?}"))?;
    let multiplier = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        other => bail!("invalid size unit {other:?} in {text:?}"),
    };
    Ok(number * multiplier)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64").ok(), Some(64));
        assert_eq!(parse_size("1k").ok(), Some(1024));
        assert_eq!(parse_size("8KiB").ok(), Some(8192));
        assert_eq!(parse_size(" 256B ").ok(), Some(256));
        assert!(parse_size("x").is_err());
        assert!(parse_size("1q").is_err());
    }
}
