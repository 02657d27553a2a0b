//! The async runtime every quorum group's openraft runs on: tokio, as
//! openraft's own `TokioRuntime`, except for what each group holds of it
//! for its whole life: its bounded channels are a queue under a mutex
//! (`lean_mpsc.rs`), its selects hold each future once (`lean_select.rs`)
//! and its watch channels one `Notify` each (`lean_watch.rs`).
//!
//! Must not know: anything of Raft or queues; it only forwards to tokio.

use std::future::Future;
use std::time::Duration;

use openraft::rt::{AsyncRuntime, OptionalSend, Select2, Select3, Select4};
use openraft_rt_tokio::{TokioInstant, TokioMutex, TokioOneshot, TokioRuntime};

use super::lean_mpsc::LeanMpsc;
use super::lean_select::{LeanSelect2, LeanSelect3, LeanSelect4};
use super::lean_watch::LeanWatch;

/// tokio with leaner channels and selects (see the module header).
#[derive(Debug)]
pub struct LeanRuntime(TokioRuntime);

impl AsyncRuntime for LeanRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> =
        <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = <TokioRuntime as AsyncRuntime>::ThreadLocalRng;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn select2<A, B>(
        a: A,
        b: B,
    ) -> impl Future<Output = Select2<A::Output, B::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
    {
        LeanSelect2 { a, b }
    }

    fn select3<A, B, C>(
        a: A,
        b: B,
        c: C,
    ) -> impl Future<Output = Select3<A::Output, B::Output, C::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
        C: Future + OptionalSend,
    {
        LeanSelect3 { a, b, c }
    }

    fn select4<A, B, C, D>(
        a: A,
        b: B,
        c: C,
        d: D,
    ) -> impl Future<Output = Select4<A::Output, B::Output, C::Output, D::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
        C: Future + OptionalSend,
        D: Future + OptionalSend,
    {
        LeanSelect4 { a, b, c, d }
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        TokioRuntime::thread_rng()
    }

    type Mpsc = LeanMpsc;
    type Watch = LeanWatch;
    type Oneshot = TokioOneshot;
    type Mutex<T: OptionalSend + 'static> = TokioMutex<T>;

    fn new(threads: usize) -> Self {
        LeanRuntime(TokioRuntime::new(threads))
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.0.block_on(future)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// openraft's own conformance suite for runtimes: spawning, timers,
    /// selects, and every channel's send, receive, close, weak sender and
    /// back-pressure rules.
    #[test]
    fn passes_openraft_runtime_suite() {
        openraft::rt::testing::Suite::<LeanRuntime>::test_all();
    }
}
