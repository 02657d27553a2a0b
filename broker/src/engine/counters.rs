//! [`EngineCounters`]: how many AMQP connections and sessions the node's
//! engine serves now and has served, kept with relaxed atomics by guards
//! that count down when the connection task or the session goes, whatever
//! way it goes; a session guard also keeps its connection's own count of
//! sessions (`connections.rs`). Read by the metrics endpoint and the
//! management API; it knows nothing of frames.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The node's connection and session counters.
#[derive(Debug, Default)]
pub(crate) struct EngineCounters {
    connections_open: AtomicU64,
    connections_total: AtomicU64,
    sessions_open: AtomicU64,
    sessions_total: AtomicU64,
}

/// A copy of [`EngineCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EngineCounts {
    /// Connection tasks running (from accept, TLS and SASL included, to
    /// their end).
    pub(crate) connections_open: u64,
    /// Connections accepted since the node started.
    pub(crate) connections_total: u64,
    /// Sessions begun and not yet ended.
    pub(crate) sessions_open: u64,
    /// Sessions begun since the node started.
    pub(crate) sessions_total: u64,
}

/// Which gauge a [`Counted`] holds up.
#[derive(Debug, Clone, Copy)]
enum Gauge {
    Connection,
    Session,
}

/// Holds one connection or session in the open count until dropped.
#[derive(Debug)]
pub(crate) struct Counted {
    counters: Arc<EngineCounters>,
    gauge: Gauge,
    /// A session's connection's count of open sessions.
    connection_sessions: Option<Arc<AtomicU64>>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(sessions) = &self.connection_sessions {
            sessions.fetch_sub(1, Ordering::Relaxed);
        }
        let open = match self.gauge {
            Gauge::Connection => &self.counters.connections_open,
            Gauge::Session => &self.counters.sessions_open,
        };
        open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl EngineCounters {
    /// Count a connection for as long as the guard lives.
    pub(crate) fn connection(self: &Arc<Self>) -> Counted {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
        Counted {
            counters: self.clone(),
            gauge: Gauge::Connection,
            connection_sessions: None,
        }
    }

    /// Count a session for as long as the guard lives, here and in its
    /// connection's `sessions`.
    pub(crate) fn session(self: &Arc<Self>, sessions: &Arc<AtomicU64>) -> Counted {
        self.sessions_open.fetch_add(1, Ordering::Relaxed);
        self.sessions_total.fetch_add(1, Ordering::Relaxed);
        sessions.fetch_add(1, Ordering::Relaxed);
        Counted {
            counters: self.clone(),
            gauge: Gauge::Session,
            connection_sessions: Some(sessions.clone()),
        }
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> EngineCounts {
        EngineCounts {
            connections_open: self.connections_open.load(Ordering::Relaxed),
            connections_total: self.connections_total.load(Ordering::Relaxed),
            sessions_open: self.sessions_open.load(Ordering::Relaxed),
            sessions_total: self.sessions_total.load(Ordering::Relaxed),
        }
    }
}
