//! Boxing a future in place: `Box::pin(future)` builds the future on the
//! stack and then copies all of it into the allocation, although a
//! future not yet polled holds little more than its arguments. The
//! futures boxed on the quorum publish path are 1.4-1.9 KiB (boxed so
//! that the long-lived tasks that await them stay small while idle), and
//! that copy was a `memcpy` of ~230 instructions per call, several per
//! publish. Allocating first and writing the future into the allocation
//! lets the compiler build it there (measured: the copy is gone).
//!
//! Knows nothing of queues or of Raft: a macro over any future.

/// `Box::pin($future)`, with the future written straight into its
/// allocation.
macro_rules! pin_box_in_place {
    ($future:expr) => {{
        let slot = Box::new_uninit();
        let pinned: std::pin::Pin<Box<_>> = Box::into_pin(Box::write(slot, $future));
        pinned
    }};
}

pub(crate) use pin_box_in_place;

#[cfg(test)]
mod tests {
    /// The boxed future runs as the future itself would.
    #[tokio::test]
    async fn a_future_boxed_in_place_runs() {
        let answer = async {
            tokio::task::yield_now().await;
            41 + 1
        };
        assert_eq!(pin_box_in_place!(answer).await, 42);
    }
}
