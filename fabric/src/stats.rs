//! Traffic counters: cheap relaxed atomics updated on the hot path and a
//! plain snapshot ([`FabricStats`]) for tests and metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a node's traffic counters since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Frames (calls, answers, one-way messages) written to any stream.
    pub frames_sent: u64,
    /// `Batch` messages written to any stream; below `frames_sent` when the
    /// writers batched.
    pub batches_sent: u64,
    /// Frames read from any stream.
    pub frames_received: u64,
    /// `Batch` messages read from any stream.
    pub batches_received: u64,
    /// Frames dropped on arrival (from a blocked peer, over the size limit or
    /// malformed).
    pub frames_dropped: u64,
    /// Outbound streams opened (first connections and reconnections).
    pub connects: u64,
    /// Inbound streams refused (wrong cluster, bad node id, blocked peer).
    pub inbound_refused: u64,
    /// Envelope bytes (`meta` + `payload`) of the frames written.
    pub bytes_sent: u64,
    /// Envelope bytes of the frames read.
    pub bytes_received: u64,
    /// Calls this node made that failed: unreachable, timed out, refused as
    /// too large or by backpressure, or answered with an error.
    pub calls_failed: u64,
}

/// The live counters behind [`FabricStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) frames_sent: AtomicU64,
    pub(crate) batches_sent: AtomicU64,
    pub(crate) frames_received: AtomicU64,
    pub(crate) batches_received: AtomicU64,
    pub(crate) frames_dropped: AtomicU64,
    pub(crate) connects: AtomicU64,
    pub(crate) inbound_refused: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) calls_failed: AtomicU64,
}

impl Counters {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one batch read from a stream.
    pub(crate) fn received(&self, frames: &[crate::proto::Frame]) {
        let bytes: usize = frames.iter().map(|f| f.body_size()).sum();
        Self::add(&self.batches_received, 1);
        Self::add(&self.frames_received, frames.len() as u64);
        Self::add(&self.bytes_received, bytes as u64);
    }

    /// A snapshot of the counters.
    pub(crate) fn snapshot(&self) -> FabricStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FabricStats {
            frames_sent: get(&self.frames_sent),
            batches_sent: get(&self.batches_sent),
            frames_received: get(&self.frames_received),
            batches_received: get(&self.batches_received),
            frames_dropped: get(&self.frames_dropped),
            connects: get(&self.connects),
            inbound_refused: get(&self.inbound_refused),
            bytes_sent: get(&self.bytes_sent),
            bytes_received: get(&self.bytes_received),
            calls_failed: get(&self.calls_failed),
        }
    }
}
