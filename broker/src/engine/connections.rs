//! [`LiveConnections`]: the node's table of AMQP connections being served,
//! for the operator (the HTTP management API lists them and closes one).
//!
//! A connection task registers once when it starts (peer, transport),
//! fills in its user and container-id once after `open`, and is removed
//! when its [`Registration`] drops, whatever way the task ends. Nothing on
//! the message path touches the table: its one `std::sync::Mutex` is held
//! for a map operation only, never across an await, and never with
//! another lock. The sessions a connection has open are a relaxed atomic
//! beside the table, kept by the session guards (`counters.rs`).
//!
//! Closing one asks its task to end as a graceful shutdown ends every
//! connection: `close` with amqp:connection:forced (here with a
//! description saying an operator closed it). It knows no frame; the
//! connection task does the closing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How a connection's bytes travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportKind {
    /// Plain TCP.
    Tcp,
    /// TLS over TCP (amqps, or the AMQP TLS header).
    Tls,
    /// AMQP over WebSocket (`secure` tells ws from wss).
    WebSocket,
}

impl TransportKind {
    /// Its name in the management API.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Tls => "tls",
            TransportKind::WebSocket => "websocket",
        }
    }
}

/// One connection as the operator sees it.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionInfo {
    /// Unique on this node while it runs (never reused).
    pub(crate) id: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) transport: TransportKind,
    /// Whether the bytes are encrypted (TLS, wss).
    pub(crate) secure: bool,
    /// The logged-in user; `None` before `open` or when anonymous.
    pub(crate) user: Option<String>,
    /// The peer's container-id, once its `open` is in.
    pub(crate) container_id: Option<String>,
    /// Sessions open now.
    pub(crate) sessions: u64,
    /// When the connection was accepted (wall clock, for display).
    pub(crate) opened_at: SystemTime,
    /// The same moment on the monotonic clock (for its age).
    pub(crate) accepted_at: Instant,
}

struct Entry {
    info: ConnectionInfo,
    sessions: Arc<AtomicU64>,
    close: Arc<Notify>,
}

/// The connections a node serves now.
#[derive(Default)]
pub(crate) struct LiveConnections {
    next_id: AtomicU64,
    table: Mutex<HashMap<u64, Entry>>,
}

impl std::fmt::Debug for LiveConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveConnections")
            .field("open", &self.len())
            .finish_non_exhaustive()
    }
}

/// A connection's place in the table, held by its task: removed on drop.
pub(crate) struct Registration {
    id: u64,
    table: Arc<LiveConnections>,
    sessions: Arc<AtomicU64>,
    close: Arc<Notify>,
}

impl LiveConnections {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enter a connection that was just accepted.
    pub(crate) fn register(
        self: &Arc<Self>,
        peer: SocketAddr,
        transport: TransportKind,
        secure: bool,
        accepted_at: Instant,
    ) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let sessions = Arc::new(AtomicU64::new(0));
        let close = Arc::new(Notify::new());
        let age = accepted_at.elapsed();
        let info = ConnectionInfo {
            id,
            peer,
            transport,
            secure,
            user: None,
            container_id: None,
            sessions: 0,
            opened_at: SystemTime::now()
                .checked_sub(age)
                .unwrap_or_else(SystemTime::now),
            accepted_at,
        };
        self.lock().insert(
            id,
            Entry {
                info,
                sessions: sessions.clone(),
                close: close.clone(),
            },
        );
        Registration {
            id,
            table: self.clone(),
            sessions,
            close,
        }
    }

    /// Every connection now, by id.
    pub(crate) fn list(&self) -> Vec<ConnectionInfo> {
        let mut list: Vec<ConnectionInfo> = self
            .lock()
            .values()
            .map(|entry| ConnectionInfo {
                sessions: entry.sessions.load(Ordering::Relaxed),
                ..entry.info.clone()
            })
            .collect();
        list.sort_by_key(|c| c.id);
        list
    }

    /// Ask connection `id` to close with amqp:connection:forced; whether
    /// there is such a connection. Its task closes it (at once when it
    /// serves an open connection; after its `open` when it is still in
    /// its handshake, which the handshake time-out bounds).
    pub(crate) fn close(&self, id: u64) -> bool {
        match self.lock().get(&id) {
            Some(entry) => {
                // Stores a permit if the task is not waiting right now.
                entry.close.notify_one();
                true
            }
            None => false,
        }
    }

    /// Connections served now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Registration {
    /// This connection's id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Record who logged in and the peer's container-id (after `open`).
    pub(crate) fn opened(&self, user: Option<&str>, container_id: &str) {
        if let Some(entry) = self.table.lock().get_mut(&self.id) {
            entry.info.user = user.map(str::to_owned);
            entry.info.container_id = Some(container_id.to_owned());
        }
    }

    /// The count of this connection's open sessions, kept by the session
    /// guards.
    pub(crate) fn sessions(&self) -> Arc<AtomicU64> {
        self.sessions.clone()
    }

    /// Notified (one permit, kept until taken) when an operator asks to
    /// close this connection.
    pub(crate) fn close_requested(&self) -> Arc<Notify> {
        self.close.clone()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.table.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 5672))
    }

    #[tokio::test]
    async fn registered_until_dropped_and_closed_by_id() {
        let table = Arc::new(LiveConnections::default());
        let a = table.register(peer(), TransportKind::Tcp, false, Instant::now());
        let b = table.register(peer(), TransportKind::WebSocket, true, Instant::now());
        assert_ne!(a.id(), b.id());
        a.opened(Some("app"), "client-1");
        a.sessions().fetch_add(2, Ordering::Relaxed);
        let list = table.list();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].user.as_deref(), Some("app"));
        assert_eq!(list[0].container_id.as_deref(), Some("client-1"));
        assert_eq!(list[0].sessions, 2);
        assert_eq!(list[1].transport.name(), "websocket");
        // A close asked before the task waits is not lost.
        assert!(table.close(b.id()));
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            b.close_requested().notified(),
        )
        .await
        .expect("the close request is kept");
        let gone = b.id();
        drop(b);
        assert!(!table.close(gone));
        assert_eq!(table.len(), 1);
        drop(a);
        assert_eq!(table.len(), 0);
    }
}
