//! openraft's bounded channels for the quorum groups: a queue under a
//! mutex, the receiver's waker, and a `Notify` for senders that found it
//! full.
//! openraft makes four per group (API, snapshot installs, notifications,
//! state-machine commands). tokio's channel shares ~512 bytes of
//! cache-padded state and reserves a first block of 32 slots when it is
//! made (~780 bytes a channel with boxed messages, ~3 KiB of every idle
//! group); this one is ~150 bytes, and its queue holds no buffer while it
//! is empty. Messages stay boxed (160-288 bytes each), so a task awaiting
//! a `send` holds a pointer, not the message: every resident task's future
//! is as large as its largest await, and most of openraft's tasks send.
//! Used by every group through [`super::LeanRuntime`].
//!
//! The rules are tokio's (openraft-rt's conformance suite checks them):
//! `send` waits for a free slot and fails, handing the message back, once
//! the receiver is gone; `recv` drains what was sent and then returns
//! `None` once every strong sender is gone; weak senders do not keep the
//! channel open and upgrade only while a strong one lives.
//!
//! Must not know: what the messages are; it only carries them.

use std::collections::VecDeque;
use std::future::Future;
use std::mem::size_of;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use futures_util::task::AtomicWaker;
use openraft::rt::{
    Mpsc, MpscReceiver, MpscSender, MpscWeakSender, OptionalSend, SendError, TryRecvError,
};
use tokio::sync::Notify;

/// A drained queue keeps its buffer only up to this size (32 boxed
/// messages here): above it the buffer goes back to the allocator, so a
/// burst does not stay resident in an idle group.
const KEEP_BYTES: usize = 256;

/// The front of `items`; a buffer left empty and over [`KEEP_BYTES`] goes
/// back. Shared with the quorum queues' task queues (`quorum/task_queue.rs`),
/// which follow the same rule.
pub(crate) fn pop_trimmed<E>(items: &mut VecDeque<E>) -> Option<E> {
    let item = items.pop_front()?;
    if items.is_empty() && items.capacity() * size_of::<E>() > KEEP_BYTES {
        *items = VecDeque::new();
    }
    Some(item)
}

/// The channel family.
pub struct LeanMpsc;

struct Shared<T> {
    queue: Mutex<Queue<T>>,
    /// The most messages queued at once.
    bound: usize,
    /// Wakes every sender waiting for room: the queue left full, or the
    /// receiver went. (The slots are counted under the queue's lock, so
    /// taking a message costs no second lock, as a semaphore's release
    /// did: ~150 instructions a message.)
    room: Notify,
    /// Strong senders alive; the channel closes when it reaches zero.
    senders: AtomicUsize,
    /// Wakes the receiver: a message came, or the last sender went.
    ready: AtomicWaker,
}

struct Queue<T> {
    items: VecDeque<Box<T>>,
    receiver_gone: bool,
}

/// What became of a message a sender tried to queue.
enum Pushed<T> {
    Done,
    Full(Box<T>),
    Closed(Box<T>),
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        // Nothing panics between a lock and its unlock but an allocation
        // failure; the queue is whole either way.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn try_push(&self, msg: Box<T>) -> Pushed<T> {
        {
            let mut queue = self.lock();
            if queue.receiver_gone {
                return Pushed::Closed(msg);
            }
            if queue.items.len() >= self.bound {
                return Pushed::Full(msg);
            }
            queue.items.push_back(msg);
        }
        self.ready.wake();
        Pushed::Done
    }
}

/// A sending half (cloned per producer).
pub struct LeanSender<T>(Arc<Shared<T>>);

/// The receiving half.
pub struct LeanReceiver<T>(Arc<Shared<T>>);

/// A sending half that does not keep the channel open.
pub struct LeanWeakSender<T>(Arc<Shared<T>>);

impl<T> Clone for LeanSender<T> {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        LeanSender(self.0.clone())
    }
}

impl<T> Drop for LeanSender<T> {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The receiver registers before its last look, so it either
            // sees the close or is woken here.
            self.0.ready.wake();
        }
    }
}

impl<T> Clone for LeanWeakSender<T> {
    fn clone(&self) -> Self {
        LeanWeakSender(self.0.clone())
    }
}

impl<T> Drop for LeanReceiver<T> {
    fn drop(&mut self) {
        let unread = {
            let mut queue = self.0.lock();
            queue.receiver_gone = true;
            std::mem::take(&mut queue.items)
        };
        self.0.room.notify_waiters();
        // Dropped outside the lock: a message's drop may do anything.
        drop(unread);
    }
}

impl Mpsc for LeanMpsc {
    type Sender<T: OptionalSend> = LeanSender<T>;
    type Receiver<T: OptionalSend> = LeanReceiver<T>;
    type WeakSender<T: OptionalSend> = LeanWeakSender<T>;

    fn channel<T: OptionalSend>(buffer: usize) -> (Self::Sender<T>, Self::Receiver<T>) {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                receiver_gone: false,
            }),
            // tokio refuses a zero-slot channel; one slot is the nearest
            // that can carry anything.
            bound: buffer.max(1),
            room: Notify::new(),
            senders: AtomicUsize::new(1),
            ready: AtomicWaker::new(),
        });
        (LeanSender(shared.clone()), LeanReceiver(shared))
    }
}

impl<T: OptionalSend> MpscSender<LeanMpsc, T> for LeanSender<T> {
    fn send(&self, msg: T) -> impl Future<Output = Result<(), SendError<T>>> + OptionalSend {
        // Boxed before the future is made: its state holds the box.
        let msg = Box::new(msg);
        async move {
            // Most sends find room: they never touch `room`.
            let mut msg = match self.0.try_push(msg) {
                Pushed::Done => return Ok(()),
                Pushed::Closed(msg) => return Err(SendError(*msg)),
                Pushed::Full(msg) => msg,
            };
            loop {
                // Registered before the second look: room made after it
                // wakes this sender.
                let room = self.0.room.notified();
                tokio::pin!(room);
                room.as_mut().enable();
                msg = match self.0.try_push(msg) {
                    Pushed::Done => return Ok(()),
                    Pushed::Closed(msg) => return Err(SendError(*msg)),
                    Pushed::Full(msg) => msg,
                };
                room.await;
            }
        }
    }

    fn downgrade(&self) -> LeanWeakSender<T> {
        LeanWeakSender(self.0.clone())
    }
}

impl<T> LeanReceiver<T> {
    /// The next message, `Err(Disconnected)` if none will come, or
    /// `Err(Empty)`.
    fn take(&mut self) -> Result<T, TryRecvError> {
        let mut queue = self.0.lock();
        match pop_trimmed(&mut queue.items) {
            Some(msg) => {
                let was_full = queue.items.len() + 1 == self.0.bound;
                drop(queue);
                if was_full {
                    self.0.room.notify_waiters();
                }
                Ok(*msg)
            }
            // Under the lock: a sender pushes under it before it can drop,
            // and none can be made from nothing, so an empty queue with no
            // sender stays empty.
            None if self.0.senders.load(Ordering::Acquire) == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }
}

impl<T: OptionalSend> MpscReceiver<T> for LeanReceiver<T> {
    fn recv(&mut self) -> impl Future<Output = Option<T>> + OptionalSend {
        // One waker, not a `Notify`: a single receiver, and openraft's
        // core drops and remakes its receive at every select, which for a
        // `Notify` was a waiter linked and unlinked under a lock each time
        // (~5k instructions a quorum publish).
        std::future::poll_fn(move |cx| {
            match self.take() {
                Err(TryRecvError::Empty) => {}
                taken => return Poll::Ready(taken.ok()),
            }
            // Registered before the last look: a send or the last
            // sender's drop after it wakes this task.
            self.0.ready.register(cx.waker());
            match self.take() {
                Err(TryRecvError::Empty) => Poll::Pending,
                taken => Poll::Ready(taken.ok()),
            }
        })
    }

    fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.take()
    }
}

impl<T: OptionalSend> MpscWeakSender<LeanMpsc, T> for LeanWeakSender<T> {
    fn upgrade(&self) -> Option<LeanSender<T>> {
        // Only while a strong sender lives: a closed channel stays closed.
        let mut alive = self.0.senders.load(Ordering::Acquire);
        while alive > 0 {
            match self.0.senders.compare_exchange_weak(
                alive,
                alive + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(LeanSender(self.0.clone())),
                Err(now) => alive = now,
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "lean_mpsc_tests.rs"]
mod tests;
