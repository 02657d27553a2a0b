//! The accept loop: one task per AMQP connection, bounded by the connection
//! limit (a connection past it is still served a clean close), until the
//! broker shuts down; then a grace period for the connections to close.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::engine::{self, ConnectionContext};

/// How long a graceful shutdown waits for connections to finish closing.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Accept connections until shutdown, then wait for the connection tasks.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    context: Arc<ConnectionContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(context.limits.max_connections));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let permit = slots.clone().try_acquire_owned().ok();
                    let context = context.clone();
                    let shutdown = shutdown.clone();
                    connections.spawn(async move {
                        engine::serve(stream, peer, context, permit, shutdown).await;
                    });
                }
                Err(error) => {
                    // Running out of file descriptors must not spin the loop.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    drop(listener);
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
