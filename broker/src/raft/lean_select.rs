//! The selects our runtime (`lean_runtime.rs`) gives openraft: the
//! first ready of two, three or four futures, in argument order, each a
//! plain struct that holds its futures once.
//!
//! Why: openraft-rt's default `select2` is an async block, which keeps its
//! futures twice (as captured and as pinned locals), and its `select3` and
//! `select4` nest it, so a `select4` over four 136-byte watch waits came to
//! 2.8 KiB. Such a future is the idle state of every replication stream (a
//! leader's wait for its next entry, two per group it leads) and is part of
//! every group's core task, so its size was paid per group at all times.
//! The rules are the defaults' (openraft-rt's conformance suite checks
//! them): polled in argument order on every wake, the first ready wins, and
//! the others are dropped with the select, never polled again.
//!
//! Must not know: anything of Raft; only futures.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use openraft::rt::{Select2, Select3, Select4};
use pin_project_lite::pin_project;

pin_project! {
    /// The first ready of `a` and `b`.
    pub(super) struct LeanSelect2<A, B> {
        #[pin]
        pub(super) a: A,
        #[pin]
        pub(super) b: B,
    }
}

impl<A: Future, B: Future> Future for LeanSelect2<A, B> {
    type Output = Select2<A::Output, B::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(value) = this.a.poll(cx) {
            return Poll::Ready(Select2::First(value));
        }
        if let Poll::Ready(value) = this.b.poll(cx) {
            return Poll::Ready(Select2::Second(value));
        }
        Poll::Pending
    }
}

pin_project! {
    /// The first ready of `a`, `b` and `c`.
    pub(super) struct LeanSelect3<A, B, C> {
        #[pin]
        pub(super) a: A,
        #[pin]
        pub(super) b: B,
        #[pin]
        pub(super) c: C,
    }
}

impl<A: Future, B: Future, C: Future> Future for LeanSelect3<A, B, C> {
    type Output = Select3<A::Output, B::Output, C::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(value) = this.a.poll(cx) {
            return Poll::Ready(Select3::First(value));
        }
        if let Poll::Ready(value) = this.b.poll(cx) {
            return Poll::Ready(Select3::Second(value));
        }
        if let Poll::Ready(value) = this.c.poll(cx) {
            return Poll::Ready(Select3::Third(value));
        }
        Poll::Pending
    }
}

pin_project! {
    /// The first ready of `a`, `b`, `c` and `d`.
    pub(super) struct LeanSelect4<A, B, C, D> {
        #[pin]
        pub(super) a: A,
        #[pin]
        pub(super) b: B,
        #[pin]
        pub(super) c: C,
        #[pin]
        pub(super) d: D,
    }
}

impl<A: Future, B: Future, C: Future, D: Future> Future for LeanSelect4<A, B, C, D> {
    type Output = Select4<A::Output, B::Output, C::Output, D::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(value) = this.a.poll(cx) {
            return Poll::Ready(Select4::First(value));
        }
        if let Poll::Ready(value) = this.b.poll(cx) {
            return Poll::Ready(Select4::Second(value));
        }
        if let Poll::Ready(value) = this.c.poll(cx) {
            return Poll::Ready(Select4::Third(value));
        }
        if let Poll::Ready(value) = this.d.poll(cx) {
            return Poll::Ready(Select4::Fourth(value));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::future::{pending, ready};

    use super::*;

    /// The size that made it worth having: a select over four futures is
    /// their sum (openraft-rt's default is about four times it).
    #[test]
    fn holds_each_future_once() {
        let wait = || async {
            let big = [0u8; 128];
            pending::<()>().await;
            big.len()
        };
        let one = std::mem::size_of_val(&wait());
        let select = LeanSelect4 {
            a: wait(),
            b: wait(),
            c: wait(),
            d: wait(),
        };
        assert!(std::mem::size_of_val(&select) <= 4 * one + 8);
    }

    #[tokio::test]
    async fn first_ready_in_argument_order_wins() {
        let selected = LeanSelect3 {
            a: pending::<u8>(),
            b: ready("b"),
            c: ready(3u16),
        }
        .await;
        assert!(matches!(selected, Select3::Second("b")));
    }
}
