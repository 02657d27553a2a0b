//! [`PublishGate`]: bounds a quorum queue's publishes in flight (taken,
//! not yet committed) and wakes the publishers that waited for room. It
//! is the quorum queue's side of credit-based backpressure.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::queue::{QueueEventKind, Sink};

/// Publishes in flight (proposed, not yet committed) and the publishers
/// waiting for room.
pub(super) struct PublishGate {
    pub(super) in_flight: AtomicUsize,
    pub(super) max_in_flight: usize,
    pub(super) waiters: Mutex<Vec<(Sink, u64)>>,
}

impl PublishGate {
    pub(super) fn done(&self) {
        let before = self.in_flight.fetch_sub(1, Ordering::AcqRel);
        if before <= self.max_in_flight {
            let waiters: Vec<(Sink, u64)> =
                std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|p| p.into_inner()));
            for (sink, tag) in waiters {
                sink.send(tag, QueueEventKind::Capacity);
            }
        }
    }
}
