//! The accept loop: one task per AMQP connection on the plain, the TLS and
//! the WebSocket listener, bounded by the connection limit (a connection
//! past it is still served a clean close) and the limit per source
//! address (a connection past that is dropped at once), until the broker
//! shuts down;
//! then a grace period for the connections to close. Each connection task
//! first sets up its transport (`crate::tls::negotiate`, or TLS when
//! configured and then the WebSocket upgrade of `crate::ws`, under the
//! handshake time-out), then hands the byte stream to the engine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::address_slots::AddressSlots;
use crate::engine::{self, ByteStream, ConnectionContext, Transport, TransportKind};
use crate::tls::{negotiate, Negotiated, TlsServer};
use crate::ws;

/// How long a graceful shutdown waits for connections to finish closing.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The AMQP listeners of a node.
pub(crate) struct Listeners {
    /// Plain AMQP (a client may still start TLS with the TLS header when
    /// `tls` is set).
    pub(crate) plain: Option<TcpListener>,
    /// amqps.
    pub(crate) secure: Option<TcpListener>,
    /// AMQP over WebSocket (wss when `tls` is set).
    pub(crate) websocket: Option<TcpListener>,
    /// Largest WebSocket message a client may send.
    pub(crate) ws_max_message_bytes: usize,
    /// The TLS configuration, when TLS is on.
    pub(crate) tls: Option<Arc<TlsServer>>,
}

/// What setting up a connection's transport needs, shared by all.
struct Setup {
    tls: Option<Arc<TlsServer>>,
    ws_max_message_bytes: usize,
}

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    Plain,
    Tls,
    WebSocket,
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
    let per_address = AddressSlots::new(context.limits.max_connections_per_address);
    let setup = Arc::new(Setup {
        tls: listeners.tls.clone(),
        ws_max_message_bytes: listeners.ws_max_message_bytes,
    });
    let mut connections = JoinSet::new();
    loop {
        let (accepted, port) = tokio::select! {
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = accept_on(listeners.plain.as_ref()) => (accepted, Port::Plain),
            accepted = accept_on(listeners.secure.as_ref()) => (accepted, Port::Tls),
            accepted = accept_on(listeners.websocket.as_ref()) => (accepted, Port::WebSocket),
        };
        match accepted {
            Ok((stream, peer)) => {
                let Some(address_slot) = per_address.take(peer.ip()) else {
                    // Dropped before any TLS or protocol work: the limit
                    // is there for peers that open connections in bulk.
                    tracing::debug!(%peer, "connection limit of its address reached: dropped");
                    drop(stream);
                    continue;
                };
                let permit = slots.clone().try_acquire_owned().ok();
                let context = context.clone();
                let shutdown = shutdown.clone();
                let setup = setup.clone();
                connections.spawn(async move {
                    serve(stream, peer, port, setup, context, permit, shutdown).await;
                    drop(address_slot);
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

/// The transport of a WebSocket connection: TLS first when configured,
/// then the upgrade. `None` when it failed (logged).
async fn websocket(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&TlsServer>,
    max_message_bytes: usize,
) -> Option<(Box<dyn ByteStream>, Option<String>, bool)> {
    let upgraded = match tls {
        Some(tls) => {
            let stream = match tls.acceptor().accept(stream).await {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed (wss)");
                    return None;
                }
            };
            let client_name = crate::tls::client_name(&stream);
            ws::upgrade(stream, max_message_bytes)
                .await
                .map(|s| (Box::new(s) as Box<dyn ByteStream>, client_name, true))
        }
        None => ws::upgrade(stream, max_message_bytes)
            .await
            .map(|s| (Box::new(s) as Box<dyn ByteStream>, None, false)),
    };
    match upgraded {
        Ok(upgraded) => Some(upgraded),
        Err(error) => {
            tracing::debug!(%peer, %error, "no WebSocket upgrade");
            None
        }
    }
}

/// One connection: its transport, then the engine.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    port: Port,
    setup: Arc<Setup>,
    context: Arc<ConnectionContext>,
    permit: Option<OwnedSemaphorePermit>,
    shutdown: watch::Receiver<bool>,
) {
    let accepted_at = Instant::now();
    // Latency over batching: frames are already batched per flush.
    let _ = stream.set_nodelay(true);
    let deadline = accepted_at + Duration::from_millis(context.limits.handshake_timeout_ms);
    if port == Port::WebSocket {
        let upgrade = websocket(
            stream,
            peer,
            setup.tls.as_deref(),
            setup.ws_max_message_bytes,
        );
        let Ok(Some((stream, client_name, secure))) =
            tokio::time::timeout_at(deadline, upgrade).await
        else {
            return;
        };
        let transport = Transport {
            stream,
            prefix: Vec::new(),
            peer,
            secure,
            kind: TransportKind::WebSocket,
            client_name,
            accepted_at,
        };
        engine::serve(transport, context, permit, shutdown).await;
        return;
    }
    let negotiated = tokio::time::timeout_at(
        deadline,
        negotiate(stream, setup.tls.as_deref(), port == Port::Tls),
    );
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
        kind: if secure {
            TransportKind::Tls
        } else {
            TransportKind::Tcp
        },
        client_name,
        accepted_at,
    };
    engine::serve(transport, context, permit, shutdown).await;
}
