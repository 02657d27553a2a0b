//! The AMQP 1.0 protocol engine: one task per connection runs the
//! handshake (headers, SASL), the open/close exchange, sessions, links,
//! and moves messages between frames and queues.
//!
//! Architecture invariant: the engine reaches queues only through
//! [`crate::queue::Queue`] and the [`crate::queue::Sink`] events; it knows
//! nothing of how a queue stores or replicates messages.

mod attach;
mod connection;
mod deliver;
mod error;
mod handshake;
mod link;
mod outbox;
mod relay;
mod session;
mod state;
mod transfer;
mod unsettled;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::config::{Limits, SaslConfig};
use crate::queue::QueueDirectory;

/// What every connection of a broker shares.
pub(crate) struct ConnectionContext {
    pub(crate) container_id: String,
    pub(crate) limits: Limits,
    pub(crate) sasl: SaslConfig,
    pub(crate) queues: Arc<dyn QueueDirectory>,
}

/// Serve one accepted TCP connection until it closes. `permit` is `None`
/// when the broker is at its connection limit: the peer then gets a clean
/// close with amqp:resource-limit-exceeded.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    context: Arc<ConnectionContext>,
    permit: Option<OwnedSemaphorePermit>,
    shutdown: watch::Receiver<bool>,
) {
    connection::Connection::new(stream, peer, context, permit.is_some(), shutdown)
        .run()
        .await;
    drop(permit);
}
