//! The AMQP 1.0 protocol engine: one task per connection runs the
//! handshake (headers, SASL), the open/close exchange, sessions, links,
//! and moves messages between frames and queues.
//!
//! Architecture invariant: the engine reaches queues only through
//! [`crate::queue::Queue`] and the [`crate::queue::Sink`] events; it knows
//! nothing of how a queue stores or replicates messages.

mod attach;
mod authorize;
mod connection;
mod connections;
mod consumer_priority;
mod counters;
mod deliver;
mod error;
mod handshake;
mod keepalive;
mod link;
mod outbox;
mod relay;
mod sasl;
mod session;
mod state;
mod transaction;
mod transactional_work;
mod transfer;
mod transport;
mod unsettled;
mod wake_gate;

use std::sync::Arc;

use tokio::sync::{watch, OwnedSemaphorePermit};

pub(crate) use connections::{ConnectionInfo, LiveConnections, TransportKind};
pub(crate) use counters::Counted;
pub(crate) use counters::{EngineCounters, EngineCounts};
pub(crate) use transport::{ByteStream, Transport};

use crate::auth::Authenticator;
use crate::config::Limits;
use crate::queue::QueueDirectory;

/// What every connection of a broker shares.
pub(crate) struct ConnectionContext {
    pub(crate) container_id: String,
    pub(crate) limits: Limits,
    pub(crate) auth: Arc<Authenticator>,
    pub(crate) queues: Arc<dyn QueueDirectory>,
    /// Connections and sessions served, for metrics.
    pub(crate) counters: Arc<EngineCounters>,
    /// The connections served now, for the operator.
    pub(crate) connections: Arc<LiveConnections>,
}

/// Serve one accepted connection (TCP or TLS, see [`Transport`]) until it
/// closes. `permit` is `None` when the broker is at its connection limit:
/// the peer then gets a clean close with amqp:resource-limit-exceeded.
pub(crate) async fn serve(
    transport: Transport,
    context: Arc<ConnectionContext>,
    permit: Option<OwnedSemaphorePermit>,
    shutdown: watch::Receiver<bool>,
) {
    let _counted = context.counters.connection();
    let registration = context.connections.register(
        transport.peer,
        transport.kind,
        transport.secure,
        transport.accepted_at,
    );
    connection::Connection::new(transport, context, permit.is_some(), shutdown, registration)
        .run()
        .await;
    drop(permit);
}
