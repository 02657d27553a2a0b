//! `ramqpd-fabric`: the inter-node gRPC fabric.
//!
//! Generic infrastructure that carries opaque byte [`Envelope`]s between
//! numbered nodes. It knows nothing of queues, AMQP or Raft: the broker puts an
//! adapter on top that carries the Raft RPCs of many groups (the envelope's
//! `channel` is the group id) and forwarded client traffic.
//!
//! Wire shape: every node dials ONE HTTP/2 connection to each peer and opens
//! ONE long-lived bidirectional stream on it (`Exchange`). Calls, their
//! answers and one-way messages of every channel are multiplexed on it with
//! correlation ids, and each writer drains whatever is queued into one
//! `Batch` message, so many small frames under load become one HTTP/2 write.
//! Requests from A to B travel on A's outbound stream and B's answers come
//! back on the response side of that same stream.
//!
//! Payloads travel as `bytes::Bytes` end to end: the receiver's envelopes are
//! slices of the decode buffer (no copy); the sender copies once, into the
//! HTTP/2 frame buffer.
//!
//! Entry points: [`Fabric::start`] for a cluster node, [`Client::connect`] for
//! a client-only connection (node id 0, e.g. an admin CLI).
//!
//! ```no_run
//! use std::sync::Arc;
//! use ramqpd_fabric::{BoxFuture, Bytes, Envelope, Fabric, FabricConfig, Handler, NodeId};
//!
//! struct Echo;
//! impl Handler for Echo {
//!     fn call(self: Arc<Self>, _from: NodeId, e: Envelope) -> BoxFuture<'static, Result<Bytes, String>> {
//!         Box::pin(async move { Ok(e.payload) })
//!     }
//!     fn message(&self, _from: NodeId, _e: Envelope) {}
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let config = FabricConfig::new(1, "prod", "0.0.0.0:7000".parse()?)
//!     .with_peer(2, "10.0.0.2:7000".parse()?);
//! let fabric = Fabric::start(config, Arc::new(Echo)).await?;
//! let answer = fabric.call(2, Envelope::new(42, 1, Bytes::from_static(b"hi"))).await?;
//! fabric.send(2, Envelope::new(42, 2, answer))?;
//! fabric.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Security: with [`FabricTls`] set (on every node and client of a cluster)
//! connections are mutual TLS against one cluster CA, and a dialler without
//! a certificate from it is refused in the handshake; without it the fabric
//! is plaintext and trusts the cluster name, for a private network only.
//!
//! Limits: a node does not reach itself through the
//! fabric; one-way delivery is at most once (frames queued on a stream that
//! breaks are lost) and a call that fails with `Unreachable` may or may not
//! have run on the peer.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod batch;
mod client;
mod config;
mod error;
mod fabric;
#[doc(hidden)]
pub mod fuzz_checks;
mod peer;
mod proto;
mod server;
mod stats;
mod tls;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use bytes::Bytes;

pub use client::Client;
pub use config::{ClientConfig, FabricConfig, DEFAULT_MAX_MESSAGE_BYTES};
pub use error::{CallError, FabricError};
pub use fabric::Fabric;
pub use peer::LinkState;
pub use proto::FABRIC_PROTOCOL_VERSION;
pub use stats::FabricStats;
pub use tls::{FabricTls, DEFAULT_FABRIC_SERVER_NAME};

/// Locks a mutex, ignoring poisoning: every critical section in this crate is
/// a single map or option update, so the data stays consistent.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The number of a node in the cluster. `0` is reserved for a client-only
/// connection (see [`Client`]) and must not be used as a cluster node id.
pub type NodeId = u64;

/// The node id a [`Client`] presents: a connection that only makes calls.
pub const CLIENT_NODE_ID: NodeId = 0;

/// A boxed, sendable future, as returned by [`Handler::call`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One opaque unit of traffic: the fabric never looks inside `meta` or
/// `payload`; `channel` and `kind` are for the layer above to route by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    /// Routing number chosen by the layer above (e.g. a Raft group id).
    pub channel: u64,
    /// Message kind chosen by the layer above (e.g. vote / append / snapshot).
    pub kind: u32,
    /// Small opaque header.
    pub meta: Bytes,
    /// Opaque body; carried without copying where the stack allows.
    pub payload: Bytes,
}

impl Envelope {
    /// An envelope with an empty `meta`.
    pub fn new(channel: u64, kind: u32, payload: impl Into<Bytes>) -> Self {
        Envelope {
            channel,
            kind,
            meta: Bytes::new(),
            payload: payload.into(),
        }
    }

    /// The same envelope with `meta` set.
    pub fn with_meta(mut self, meta: impl Into<Bytes>) -> Self {
        self.meta = meta.into();
        self
    }

    /// The bytes this envelope counts against the message size limit
    /// (`meta` plus `payload`).
    pub fn size(&self) -> usize {
        self.meta.len() + self.payload.len()
    }
}

/// What a node does with the traffic that reaches it.
pub trait Handler: Send + Sync + 'static {
    /// A request from `from`; the answer (or the error text) goes back to the
    /// caller. Each incoming call's future then runs in its own task, so
    /// calls of one peer are handled concurrently and may finish in any
    /// order.
    ///
    /// Ordering guarantee: `call` itself (making the future, and whatever
    /// the handler does before returning it) runs on the task reading
    /// `from`'s stream, in the order `from` queued its calls, like
    /// [`Handler::message`]. A handler that needs the calls of one peer in
    /// order (e.g. to hand them to a pipeline) takes them in that
    /// synchronous part; like `message`, it must not block there.
    fn call(
        self: Arc<Self>,
        from: NodeId,
        envelope: Envelope,
    ) -> BoxFuture<'static, Result<Bytes, String>>;

    /// A one-way message. Called in the order `from` sent them (per-peer
    /// ordering) from the task reading that peer's stream, so it must not
    /// block: hand heavy work to another task.
    fn message(&self, from: NodeId, envelope: Envelope);
}
