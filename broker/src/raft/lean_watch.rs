//! openraft's watch channels for the quorum groups: one value, a version
//! and one `Notify`, where tokio's watch keeps eight `Notify`s (spread
//! for contention) and more. openraft makes about a dozen per group (its
//! metrics, I/O progress, replication and tick watches), so tokio's
//! ~330 bytes of shared state apart from the value was ~4 KiB of every
//! idle group; this one is ~80. Few tasks ever wait on one of them, which
//! is where eight `Notify`s would pay. Used by every group through
//! [`super::LeanRuntime`].
//!
//! The rules are tokio's (openraft-rt's conformance suite checks them): a
//! receiver starts having seen the current value; `changed` returns once
//! the version moved past the last one it saw, and an error once every
//! sender is gone and it saw the last value; `send` with no receiver left
//! fails and keeps the old value; `send_if_modified` wakes only if the
//! closure says it modified.
//!
//! Must not know: what the values are.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use openraft::rt::watch::{RecvError, SendError, Watch, WatchReceiver, WatchSender};
use openraft::rt::{OptionalSend, OptionalSync};
use tokio::sync::Notify;

/// The lowest bit of `state`: every sender is gone.
const CLOSED: u64 = 1;
/// What one change adds to `state` (the version lives above `CLOSED`).
const STEP: u64 = 2;

/// The channel family.
pub struct LeanWatch;

struct Shared<T> {
    value: RwLock<T>,
    /// The version times `STEP`, plus `CLOSED`; written under `value`'s
    /// write lock, so a reader holding the read lock sees the version of
    /// the value it reads.
    state: AtomicU64,
    senders: AtomicUsize,
    receivers: AtomicUsize,
    changed: Notify,
}

impl<T> Shared<T> {
    fn read(&self) -> RwLockReadGuard<'_, T> {
        // A panic while a value was being modified leaves the value as the
        // closure left it, as tokio's watch does.
        self.value.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.value.write().unwrap_or_else(|p| p.into_inner())
    }

    fn version(&self) -> u64 {
        self.state.load(Ordering::Acquire) & !CLOSED
    }
}

/// A sending half.
pub struct LeanWatchSender<T>(Arc<Shared<T>>);

/// A receiving half, with the version it saw last.
pub struct LeanWatchReceiver<T> {
    shared: Arc<Shared<T>>,
    seen: u64,
}

impl<T> Clone for LeanWatchSender<T> {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        LeanWatchSender(self.0.clone())
    }
}

impl<T> Drop for LeanWatchSender<T> {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.state.fetch_or(CLOSED, Ordering::AcqRel);
            self.0.changed.notify_waiters();
        }
    }
}

impl<T> Clone for LeanWatchReceiver<T> {
    fn clone(&self) -> Self {
        self.shared.receivers.fetch_add(1, Ordering::Relaxed);
        LeanWatchReceiver {
            shared: self.shared.clone(),
            seen: self.seen,
        }
    }
}

impl<T> Drop for LeanWatchReceiver<T> {
    fn drop(&mut self) {
        self.shared.receivers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Watch for LeanWatch {
    type Sender<T: OptionalSend + OptionalSync> = LeanWatchSender<T>;
    type Receiver<T: OptionalSend + OptionalSync> = LeanWatchReceiver<T>;
    type Ref<'a, T: OptionalSend + 'a> = RwLockReadGuard<'a, T>;

    fn channel<T: OptionalSend + OptionalSync>(init: T) -> (Self::Sender<T>, Self::Receiver<T>) {
        let shared = Arc::new(Shared {
            value: RwLock::new(init),
            state: AtomicU64::new(0),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            changed: Notify::new(),
        });
        let receiver = LeanWatchReceiver {
            shared: shared.clone(),
            seen: 0,
        };
        (LeanWatchSender(shared), receiver)
    }
}

impl<T: OptionalSend + OptionalSync> WatchSender<LeanWatch, T> for LeanWatchSender<T> {
    fn send(&self, value: T) -> Result<(), SendError<T>> {
        if self.0.receivers.load(Ordering::Acquire) == 0 {
            return Err(SendError(value));
        }
        {
            let mut current = self.0.write();
            *current = value;
            self.0.state.fetch_add(STEP, Ordering::AcqRel);
        }
        self.0.changed.notify_waiters();
        Ok(())
    }

    fn send_if_modified<F>(&self, modify: F) -> bool
    where
        F: FnOnce(&mut T) -> bool,
    {
        {
            let mut current = self.0.write();
            if !modify(&mut current) {
                return false;
            }
            self.0.state.fetch_add(STEP, Ordering::AcqRel);
        }
        self.0.changed.notify_waiters();
        true
    }

    fn borrow_watched(&self) -> RwLockReadGuard<'_, T> {
        self.0.read()
    }

    fn subscribe(&self) -> LeanWatchReceiver<T> {
        self.0.receivers.fetch_add(1, Ordering::Relaxed);
        let guard = self.0.read();
        let seen = self.0.version();
        drop(guard);
        LeanWatchReceiver {
            shared: self.0.clone(),
            seen,
        }
    }
}

impl<T: OptionalSend + OptionalSync> WatchReceiver<LeanWatch, T> for LeanWatchReceiver<T> {
    async fn changed(&mut self) -> Result<(), RecvError> {
        loop {
            // Made before the state is read: `notify_waiters` wakes a
            // `Notified` from its creation on, so a change between the read
            // and the await is not missed.
            let notified = self.shared.changed.notified();
            let state = self.shared.state.load(Ordering::Acquire);
            if state & !CLOSED != self.seen {
                self.seen = state & !CLOSED;
                return Ok(());
            }
            if state & CLOSED != 0 {
                return Err(RecvError(()));
            }
            notified.await;
        }
    }

    fn borrow_watched(&self) -> RwLockReadGuard<'_, T> {
        self.shared.read()
    }

    fn borrow_and_update(&mut self) -> RwLockReadGuard<'_, T> {
        let guard = self.shared.read();
        self.seen = self.shared.version();
        guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What it is for: far less shared state than tokio's watch.
    #[test]
    fn shares_less_than_tokios_watch() {
        let lean = std::mem::size_of::<Shared<u64>>();
        assert!(lean <= 96, "{lean} bytes");
    }

    /// No wake-up is lost under contention: receivers on other threads
    /// waiting while the sender races through changes each end having
    /// seen the last value, then the close (a lost wake-up hangs one, and
    /// the time-out fails the test).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_receivers_all_see_the_last_value() {
        const LAST: u32 = 20_000;
        let (tx, rx) = LeanWatch::channel(0u32);
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let mut rx = rx.clone();
                tokio::spawn(async move {
                    let mut last = *rx.borrow_and_update();
                    while rx.changed().await.is_ok() {
                        last = *rx.borrow_and_update();
                    }
                    last
                })
            })
            .collect();
        drop(rx);
        for v in 1..=LAST {
            assert!(tx.send(v).is_ok());
            if v % 64 == 0 {
                tokio::task::yield_now().await;
            }
        }
        drop(tx);
        for waiter in waiters {
            let seen = tokio::time::timeout(std::time::Duration::from_secs(20), waiter).await;
            assert_eq!(seen.ok().and_then(|r| r.ok()), Some(LAST));
        }
    }

    #[tokio::test]
    async fn a_waiting_receiver_sees_a_change_then_the_close() {
        let (tx, mut rx) = LeanWatch::channel(1u32);
        let waiter = tokio::spawn(async move { rx.changed().await.map(|()| *rx.borrow_watched()) });
        tokio::task::yield_now().await;
        assert!(tx.send(2).is_ok());
        assert_eq!(waiter.await.ok(), Some(Ok(2)));
        let mut rx = tx.subscribe();
        drop(tx);
        assert_eq!(rx.changed().await, Err(RecvError(())));
    }
}
