//! The unbounded queue from a quorum queue to one of its tasks (the
//! proposer, the settlement batcher): a `VecDeque` under a mutex and the
//! task's waker. tokio's unbounded channel shares ~512 bytes of cache-padded
//! state and keeps a block of 32 slots (2 KiB of 64-byte proposals) for as
//! long as it lives, and every queue led with a publisher or a consumer
//! holds one of each kind; this one is ~100 bytes, and a drained queue
//! keeps a buffer of at most 256 bytes (the rule of openraft's channels,
//! `crate::raft::pop_trimmed`). Unbounded here as tokio's
//! was: what goes in is bounded before it (the publish gate's in-flight
//! limit, the consumers' credit).
//!
//! One sender, one receiver: `recv` returns `None` once the sender is
//! gone and the queue drained; `send` fails, handing the message back,
//! once the receiver is gone.
//!
//! Must not know: what the messages are.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use futures_util::task::AtomicWaker;

use crate::raft::pop_trimmed;

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes the receiver: a message came, or the sender went.
    ready: AtomicWaker,
}

struct State<T> {
    items: VecDeque<T>,
    sender_gone: bool,
    receiver_gone: bool,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing panics under the lock but an allocation failure; the
        // queue is whole either way.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The sending half, held by the quorum queue.
pub(super) struct TaskSender<T>(Arc<Shared<T>>);

/// The receiving half, held by the task.
pub(super) struct TaskReceiver<T>(Arc<Shared<T>>);

/// A new queue.
pub(super) fn channel<T>() -> (TaskSender<T>, TaskReceiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            sender_gone: false,
            receiver_gone: false,
        }),
        ready: AtomicWaker::new(),
    });
    (TaskSender(shared.clone()), TaskReceiver(shared))
}

impl<T> TaskSender<T> {
    /// Queues `msg`; hands it back if the task has ended.
    pub(super) fn send(&self, msg: T) -> Result<(), T> {
        {
            let mut state = self.0.lock();
            if state.receiver_gone {
                return Err(msg);
            }
            state.items.push_back(msg);
        }
        self.0.ready.wake();
        Ok(())
    }
}

impl<T> Drop for TaskSender<T> {
    fn drop(&mut self) {
        self.0.lock().sender_gone = true;
        self.0.ready.wake();
    }
}

impl<T> TaskReceiver<T> {
    /// The next message; `None` once the sender is gone and all is taken.
    pub(super) async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| {
            if let Some(taken) = self.look() {
                return Poll::Ready(taken);
            }
            // Registered before the last look: a send or the sender's drop
            // after it wakes this task.
            self.0.ready.register(cx.waker());
            match self.look() {
                Some(taken) => Poll::Ready(taken),
                None => Poll::Pending,
            }
        })
        .await
    }

    /// `Some(Some(msg))`, `Some(None)` once nothing more can come, or
    /// `None` to wait.
    fn look(&mut self) -> Option<Option<T>> {
        let mut state = self.0.lock();
        match pop_trimmed(&mut state.items) {
            Some(msg) => Some(Some(msg)),
            None if state.sender_gone => Some(None),
            None => None,
        }
    }

    /// The next message if one is queued.
    pub(super) fn try_recv(&mut self) -> Option<T> {
        pop_trimmed(&mut self.0.lock().items)
    }
}

impl<T> Drop for TaskReceiver<T> {
    fn drop(&mut self) {
        let unread = {
            let mut state = self.0.lock();
            state.receiver_gone = true;
            std::mem::take(&mut state.items)
        };
        // Outside the lock: a message's drop may answer a publisher.
        drop(unread);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn delivers_in_order_then_ends_when_the_sender_goes() {
        let (tx, mut rx) = channel::<u32>();
        let task = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(n) = rx.recv().await {
                got.push(n);
            }
            got
        });
        for n in 0..1_000 {
            tx.send(n).map_err(|_| "task gone").unwrap();
            if n % 100 == 0 {
                tokio::task::yield_now().await;
            }
        }
        drop(tx);
        let got = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the receiver never saw the sender go")
            .expect("the receiver panicked");
        assert_eq!(got, (0..1_000).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_send_after_the_task_ended_hands_the_message_back() {
        let (tx, rx) = channel::<String>();
        tx.send("queued".into()).map_err(|_| "task gone").unwrap();
        drop(rx);
        assert_eq!(tx.send("late".into()), Err("late".to_string()));
    }

    #[test]
    fn a_drained_queue_keeps_a_small_buffer_and_gives_a_large_one_back() {
        use std::mem::size_of;
        // Four 64-byte proposals fit the 256 bytes a drained queue keeps.
        let (tx, mut rx) = channel::<[u8; 64]>();
        tx.send([1; 64]).map_err(|_| "task gone").unwrap();
        assert!(rx.try_recv().is_some());
        assert!(
            rx.0.lock().items.capacity() > 0,
            "one at a time allocates once"
        );
        for _ in 0..100 {
            tx.send([2; 64]).map_err(|_| "task gone").unwrap();
        }
        while rx.try_recv().is_some() {}
        assert_eq!(rx.0.lock().items.capacity(), 0);
        assert!(size_of::<Shared<[u8; 64]>>() <= 96);
    }
}
