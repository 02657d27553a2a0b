//! The accept loop: one task per AMQP connection on the plain and the TLS
//! listener, bounded by the connection limit (a connection past it is
//! still served a clean close), until the broker shuts down; then a grace
//! period for the connections to close. Each connection task first sets
//! up its transport (`crate::tls::negotiate`, under the handshake
//! time-out), then hands the byte stream to the engine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::engine::{self, ByteStream, ConnectionContext, Transport};
use crate::tls::{negotiate, Negotiated, TlsServer};

/// How long a graceful shutdown waits for connections to finish closing.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The AMQP listeners of a node.
pub(crate) struct Listeners {
    /// Plain AMQP (a client may still start TLS with the TLS header when
    /// `tls` is set).
    pub(crate) plain: Option<TcpListener>,
    /// amqps.
    pub(crate) secure: Option<TcpListener>,
    /// The TLS configuration, when TLS is on.
    pub(crate) tls: Option<Arc<TlsServer>>,
}

async fn accept_on(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Accept connections until shutdown, then wait for the connection tasks.
pub(crate) async fn accept_loop(
    listeners: Listeners,
    context: Arc<ConnectionContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(context.limits.max_connections));
    let mut connections = JoinSet::new();
    loop {
        let (accepted, tls_port) = tokio::select! {
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = accept_on(listeners.plain.as_ref()) => (accepted, false),
            accepted = accept_on(listeners.secure.as_ref()) => (accepted, true),
        };
        match accepted {
            Ok((stream, peer)) => {
                let permit = slots.clone().try_acquire_owned().ok();
                let context = context.clone();
                let shutdown = shutdown.clone();
                let tls = listeners.tls.clone();
                connections.spawn(async move {
                    serve(stream, peer, tls_port, tls, context, permit, shutdown).await;
                });
            }
            Err(error) => {
                // Running out of file descriptors must not spin the loop.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    drop(listeners);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            remaining = connections.len(),
            "connections did not close in time"
        );
        connections.abort_all();
    }
}

/// One connection: its transport, then the engine.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    tls_port: bool,
    tls: Option<Arc<TlsServer>>,
    context: Arc<ConnectionContext>,
    permit: Option<OwnedSemaphorePermit>,
    shutdown: watch::Receiver<bool>,
) {
    let accepted_at = Instant::now();
    // Latency over batching: frames are already batched per flush.
    let _ = stream.set_nodelay(true);
    let deadline = accepted_at + Duration::from_millis(context.limits.handshake_timeout_ms);
    let negotiated = tokio::time::timeout_at(deadline, negotiate(stream, tls.as_deref(), tls_port));
    let (stream, prefix, client_name, secure): (Box<dyn ByteStream>, _, _, _) =
        match negotiated.await {
            Ok(Ok(Negotiated::Plain { stream, prefix })) => (Box::new(stream), prefix, None, false),
            Ok(Ok(Negotiated::Tls {
                stream,
                client_name,
            })) => (stream, Vec::new(), client_name, true),
            Ok(Ok(Negotiated::Refused)) => {
                tracing::debug!(%peer, "plain AMQP on the TLS listener refused");
                return;
            }
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        };
    let transport = Transport {
        stream,
        prefix,
        peer,
        secure,
        client_name,
        accepted_at,
    };
    engine::serve(transport, context, permit, shutdown).await;
}
