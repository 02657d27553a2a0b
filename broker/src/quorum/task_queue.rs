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
//! A [`TaskSlot`] starts the task at the first message and lets it end
//! while it is idle (`park_if_idle`: waiting in `recv` on an empty queue,
//! so done with everything it took): a quiet queue's leader keeps neither
//! the task nor the queue, and the next message starts a new one, which
//! cannot overtake the old: that one had finished.
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
    /// The receiver found the queue empty and waits in `recv`.
    idle: bool,
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
            idle: false,
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

/// The sending end of a task started on demand; see the module's doc.
pub(super) struct TaskSlot<T>(Mutex<Option<TaskSender<T>>>);

impl<T> Default for TaskSlot<T> {
    fn default() -> Self {
        TaskSlot(Mutex::new(None))
    }
}

impl<T> TaskSlot<T> {
    fn lock(&self) -> MutexGuard<'_, Option<TaskSender<T>>> {
        // Nothing panics under the lock but an allocation failure.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `msg`, first handing a new queue's receiver to `start` (which
    /// spawns the task) if no task runs; hands `msg` back if the task ended
    /// by itself.
    pub(super) fn send(&self, msg: T, start: impl FnOnce(TaskReceiver<T>)) -> Result<(), T> {
        let mut slot = self.lock();
        let tx = slot.get_or_insert_with(|| {
            let (tx, rx) = channel();
            start(rx);
            tx
        });
        tx.send(msg)
    }

    /// Queues `msg` if a task runs; hands it back if none does.
    pub(super) fn send_if_running(&self, msg: T) -> Result<(), T> {
        match self.lock().as_ref() {
            Some(tx) => tx.send(msg),
            None => Err(msg),
        }
    }

    /// Lets the task end if it is idle (the sender dropped: its `recv`
    /// returns `None`). Sends go through this slot's lock, so none can
    /// come between the look and the drop.
    pub(super) fn park_if_idle(&self) {
        let mut slot = self.lock();
        let idle = slot.as_ref().is_some_and(|tx| {
            let state = tx.0.lock();
            state.idle && state.items.is_empty() && !state.receiver_gone
        });
        if idle {
            *slot = None;
        }
    }

    /// Whether a task runs (or ended by itself and was not parked).
    pub(super) fn started(&self) -> bool {
        self.lock().is_some()
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
            Some(msg) => {
                state.idle = false;
                Some(Some(msg))
            }
            None if state.sender_gone => Some(None),
            None => {
                state.idle = true;
                None
            }
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

    #[tokio::test]
    async fn an_idle_task_is_parked_and_the_next_message_starts_another() {
        let slot = TaskSlot::<u32>::default();
        let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
        let start = |mut rx: TaskReceiver<u32>| {
            let done_tx = done_tx.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(n) = rx.recv().await {
                    got.push(n);
                }
                let _ = done_tx.send(got);
            });
        };
        slot.send(1, start).unwrap();
        slot.send(2, start).unwrap();
        // Not idle before the task took everything: not parked.
        slot.park_if_idle();
        assert!(slot.started(), "a task with messages queued was parked");
        let wait = Duration::from_secs(10);
        let idle = || {
            let guard = slot.lock();
            let state = guard.as_ref().unwrap().0.lock();
            state.idle && state.items.is_empty()
        };
        tokio::time::timeout(wait, async {
            while !idle() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the task never went idle");
        slot.park_if_idle();
        assert!(!slot.started());
        let first = tokio::time::timeout(wait, done.recv()).await.unwrap();
        assert_eq!(first, Some(vec![1, 2]), "the parked task ended");
        assert_eq!(slot.send_if_running(9), Err(9), "no task runs");
        slot.send(3, start).unwrap();
        drop(slot);
        let second = tokio::time::timeout(wait, done.recv()).await.unwrap();
        assert_eq!(second, Some(vec![3]), "a new task took the next message");
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
