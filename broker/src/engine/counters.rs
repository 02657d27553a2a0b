//! [`EngineCounters`]: how many AMQP connections and sessions the node's
//! engine serves now and has served, kept with relaxed atomics by guards
//! that count down when the connection task or the session goes, whatever
//! way it goes. Read by the metrics endpoint; it knows nothing of frames.

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
}

impl Drop for Counted {
    fn drop(&mut self) {
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
        }
    }

    /// Count a session for as long as the guard lives.
    pub(crate) fn session(self: &Arc<Self>) -> Counted {
        self.sessions_open.fetch_add(1, Ordering::Relaxed);
        self.sessions_total.fetch_add(1, Ordering::Relaxed);
        Counted {
            counters: self.clone(),
            gauge: Gauge::Session,
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
