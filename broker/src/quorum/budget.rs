//! How many message bodies a node keeps in memory: one node-wide budget
//! shared by every quorum queue on the node, and a cap per queue. A body
//! that does not fit is paged (written to the queue's segment files).
//!
//! It must not know what a body is or where paged ones go.

use std::sync::atomic::{AtomicU64, Ordering};

/// The node-wide part: bytes of resident bodies across every queue.
#[derive(Debug)]
pub(crate) struct NodeBudget {
    limit: u64,
    used: AtomicU64,
}

impl NodeBudget {
    pub(crate) fn new(limit: u64) -> NodeBudget {
        NodeBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// Take `bytes` if they fit under the limit.
    pub(crate) fn try_take(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let next = used.checked_add(bytes)?;
                (next <= self.limit).then_some(next)
            })
            .is_ok()
    }

    /// Take `bytes` even past the limit (bodies restored from a snapshot
    /// are already in memory).
    pub(crate) fn take(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Give back what [`try_take`](Self::try_take) or
    /// [`take`](Self::take) took.
    pub(crate) fn give_back(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// Bytes in use now.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_up_to_the_limit_and_gives_back() {
        let budget = NodeBudget::new(100);
        assert!(budget.try_take(60));
        assert!(!budget.try_take(41));
        assert!(budget.try_take(40));
        budget.give_back(50);
        assert_eq!(budget.used(), 50);
        budget.take(80);
        assert_eq!(budget.used(), 130);
        assert!(!budget.try_take(1));
        budget.give_back(1_000);
        assert_eq!(budget.used(), 0);
    }
}
