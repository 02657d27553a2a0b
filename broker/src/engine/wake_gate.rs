//! Poll a source only when it woke: the connection loop waits on several
//! sources at once (socket, queue events, ticker, stop signals), and a
//! plain `select!` polls every one of them on every pass, although with a
//! message in flight only one of them has anything new. [`WakeGates`]
//! gives each source a waker of its own, which sets the source's bit and
//! then wakes the task; a source is polled only when its bit is set (or
//! after it was ready: it has registered no waker then).
//!
//! This is sound by the contract of `Future::poll` and `AsyncRead`: a
//! source that returned `Pending` has arranged to wake the waker it was
//! given, so until that waker fires, polling it again can only return
//! `Pending` once more.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// What the sources' wakers share: which of them woke, and the task.
struct Shared {
    woken: AtomicU32,
    task: AtomicWaker,
}

/// The waker handed to one source.
struct SourceWaker {
    shared: Arc<Shared>,
    bit: u32,
}

impl Wake for SourceWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.shared.woken.fetch_or(self.bit, Ordering::AcqRel);
        self.shared.task.wake();
    }
}

/// Gates for `N` sources (at most 32); see the module documentation.
pub(super) struct WakeGates<const N: usize> {
    shared: Arc<Shared>,
    /// The waker each source sees: the same one on every poll, so a
    /// source that keeps the waker it was last given (`will_wake`) need
    /// not clone it again.
    wakers: [Waker; N],
}

/// One poll of the gated sources: [`WakeGates::begin`] takes the bits of
/// the sources that woke; [`WakeGates::end`] gives back those not polled.
pub(super) struct Pass {
    woken: u32,
}

impl<const N: usize> WakeGates<N> {
    /// Gates that poll every source the first time.
    pub(super) fn new() -> WakeGates<N> {
        const { assert!(N <= 32) };
        let all = if N == 32 { u32::MAX } else { (1u32 << N) - 1 };
        let shared = Arc::new(Shared {
            woken: AtomicU32::new(all),
            task: AtomicWaker::new(),
        });
        let wakers = std::array::from_fn(|i| {
            Waker::from(Arc::new(SourceWaker {
                shared: shared.clone(),
                bit: 1 << i,
            }))
        });
        WakeGates { shared, wakers }
    }

    /// Start a poll: the task behind `cx` is woken when a source wakes;
    /// returns the sources that woke since they were last polled.
    pub(super) fn begin(&self, cx: &Context<'_>) -> Pass {
        // The task's waker first, then the bits: a wake in between sets a
        // bit we take now, one after it wakes the task.
        self.shared.task.register(cx.waker());
        Pass {
            woken: self.shared.woken.swap(0, Ordering::AcqRel),
        }
    }

    /// Poll source `i` through `poll` if it woke; otherwise `Pending`
    /// without polling it.
    pub(super) fn poll<T>(
        &self,
        pass: &mut Pass,
        i: usize,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        let bit = 1u32 << i;
        if pass.woken & bit == 0 {
            return Poll::Pending;
        }
        pass.woken &= !bit;
        let output = poll(&mut Context::from_waker(&self.wakers[i]));
        if output.is_ready() {
            // A ready source registered no waker: poll it next time.
            pass.woken |= bit;
        }
        output
    }

    /// Poll source `i` on the next pass whether or not it woke: for a
    /// source that was polled outside the gates meanwhile, which then
    /// holds another waker than its gate's.
    pub(super) fn poll_next_pass(&self, i: usize) {
        self.shared.woken.fetch_or(1 << i, Ordering::AcqRel);
    }

    /// End a poll: sources that woke (or were ready) but were not polled
    /// to `Pending` are polled next time.
    pub(super) fn end(&self, pass: Pass) {
        if pass.woken != 0 {
            self.shared.woken.fetch_or(pass.woken, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::AtomicUsize;

    /// Counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_once<const N: usize, T>(
        gates: &WakeGates<N>,
        cx: &Context<'_>,
        i: usize,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        let mut pass = gates.begin(cx);
        let output = gates.poll(&mut pass, i, poll);
        gates.end(pass);
        output
    }

    /// A source that is never ready; counts its polls and keeps the
    /// waker it was given last.
    #[derive(Default)]
    struct Idle {
        polls: Cell<usize>,
        waker: RefCell<Option<Waker>>,
    }

    impl Idle {
        fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.set(self.polls.get() + 1);
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }

        fn wake(&self) {
            if let Some(waker) = self.waker.borrow_mut().take() {
                waker.wake();
            }
        }
    }

    #[test]
    fn polls_only_after_a_wake_or_a_ready() {
        let task = Arc::new(Count::default());
        let task_waker = Waker::from(task.clone());
        let cx = Context::from_waker(&task_waker);
        let gates = WakeGates::<1>::new();
        let source = Idle::default();
        // The first poll goes through, the next ones do not.
        for _ in 0..3 {
            assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        }
        assert_eq!(source.polls.get(), 1);
        // The source wakes: the task is woken and the source polled again.
        source.wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        assert_eq!(source.polls.get(), 2);
        // A ready source is polled on the next pass too.
        source.wake();
        assert_eq!(
            poll_once(&gates, &cx, 0, |_| Poll::Ready(7)),
            Poll::Ready(7)
        );
        assert_eq!(
            poll_once(&gates, &cx, 0, |_| Poll::Ready(8)),
            Poll::Ready(8)
        );
        assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        assert_eq!(source.polls.get(), 3);
    }

    #[test]
    fn a_wake_not_polled_is_kept() {
        let task = Arc::new(Count::default());
        let task_waker = Waker::from(task.clone());
        let cx = Context::from_waker(&task_waker);
        let gates = WakeGates::<2>::new();
        // Both woke (the first pass); the first is ready, so the second
        // is not polled in this pass, and must be in the next.
        let mut pass = gates.begin(&cx);
        assert_eq!(gates.poll(&mut pass, 0, |_| Poll::Ready(1)), Poll::Ready(1));
        gates.end(pass);
        let mut pass = gates.begin(&cx);
        assert!(gates
            .poll(&mut pass, 0, |_| Poll::<()>::Pending)
            .is_pending());
        let mut polled = false;
        let second = gates.poll(&mut pass, 1, |_| {
            polled = true;
            Poll::<()>::Pending
        });
        assert!(second.is_pending() && polled);
        gates.end(pass);
    }

    #[test]
    fn a_wake_during_the_poll_is_kept() {
        let task = Arc::new(Count::default());
        let task_waker = Waker::from(task.clone());
        let cx = Context::from_waker(&task_waker);
        let gates = WakeGates::<1>::new();
        let mut polls = 0;
        // A source that wakes itself at once (as tokio's budget does).
        let mut yielding = |cx: &mut Context<'_>| {
            polls += 1;
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        };
        assert!(poll_once(&gates, &cx, 0, &mut yielding).is_pending());
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert!(poll_once(&gates, &cx, 0, &mut yielding).is_pending());
        assert_eq!(polls, 2);
    }

    #[test]
    fn a_source_polled_elsewhere_is_polled_on_the_next_pass() {
        let task = Arc::new(Count::default());
        let task_waker = Waker::from(task.clone());
        let cx = Context::from_waker(&task_waker);
        let gates = WakeGates::<1>::new();
        let source = Idle::default();
        assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        // Polled with the task's own waker: its gate never sees the wake.
        let _ = source.poll(&mut Context::from_waker(&task_waker));
        gates.poll_next_pass(0);
        assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        assert_eq!(source.polls.get(), 3);
        // Through its gate again: a wake of the source is seen.
        source.wake();
        assert!(poll_once(&gates, &cx, 0, |cx| source.poll(cx)).is_pending());
        assert_eq!(source.polls.get(), 4);
    }
}
