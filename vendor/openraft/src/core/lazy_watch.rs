//! ramqp: a watch channel made only when its first receiver is asked for.
//!
//! Until then it is the value alone, written in place: nobody can be waiting on it. The first
//! `subscribe` builds the channel from the current value, so that receiver reads what was
//! written before it and is woken by every later change. A quorum group here keeps several
//! watch channels that only a leader's replication tasks, or a rare caller, ever read (~0.13
//! KiB each: the channel's shared state and its `Notify`).

use crate::OptionalSend;
use crate::OptionalSync;
use crate::RaftTypeConfig;
use crate::async_runtime::watch::WatchSender;
use crate::type_config::TypeConfigExt;
use crate::type_config::alias::WatchReceiverOf;
use crate::type_config::alias::WatchSenderOf;

/// A value, or the watch channel made from it once a receiver was asked for.
pub(crate) enum LazyWatch<C, T>
where
    C: RaftTypeConfig,
    T: OptionalSend + OptionalSync,
{
    /// No receiver was ever made.
    Value(T),
    /// Receivers exist: every change wakes them.
    Channel(WatchSenderOf<C, T>),
}

impl<C, T> LazyWatch<C, T>
where
    C: RaftTypeConfig,
    T: OptionalSend + OptionalSync + Clone,
{
    /// `modify` the value; if it returns true and a channel exists, its receivers are woken.
    pub(crate) fn send_if_modified(&mut self, modify: impl FnOnce(&mut T) -> bool) -> bool {
        match self {
            LazyWatch::Value(value) => modify(value),
            LazyWatch::Channel(tx) => tx.send_if_modified(modify),
        }
    }

    /// `value` in place of the one kept if it differs.
    pub(crate) fn send_if_different(&mut self, value: T) -> bool
    where T: PartialEq {
        self.send_if_modified(move |prev| {
            if *prev == value {
                return false;
            }
            *prev = value;
            true
        })
    }

    /// `value` in place of the one kept if it is greater.
    pub(crate) fn send_if_greater(&mut self, value: T) -> bool
    where T: PartialOrd {
        self.send_if_modified(move |prev| {
            if value > *prev {
                *prev = value;
                true
            } else {
                false
            }
        })
    }

    /// Back to the value alone, the channel dropped: its receivers see it closed. For when
    /// they are being shut down anyway (a quiesced leader's replication streams); the next
    /// `subscribe` makes a new channel from the value.
    pub(crate) fn unwatch(&mut self) {
        if let LazyWatch::Channel(tx) = self {
            let value = tx.borrow_watched().clone();
            *self = LazyWatch::Value(value);
        }
    }

    /// A receiver of the channel, made now from the value if it is not yet.
    pub(crate) fn subscribe(&mut self) -> WatchReceiverOf<C, T> {
        match self {
            LazyWatch::Channel(tx) => tx.subscribe(),
            LazyWatch::Value(value) => {
                let (tx, rx) = C::watch_channel(value.clone());
                *self = LazyWatch::Channel(tx);
                rx
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::async_runtime::watch::WatchReceiver;
    use crate::engine::testing::UTConfig;

    /// A receiver made late reads the value written before it, and a later change wakes it;
    /// `send_if_greater` never moves the value back.
    #[test]
    fn a_late_receiver_reads_the_value_and_is_woken_by_changes() {
        UTConfig::<()>::run(async {
            let mut watch = LazyWatch::<UTConfig, u64>::Value(1);
            assert!(watch.send_if_greater(5));
            assert!(!watch.send_if_greater(3), "not greater: kept");
            let mut rx = watch.subscribe();
            assert_eq!(*rx.borrow_watched(), 5);

            assert!(watch.send_if_greater(7));
            rx.changed().await.unwrap();
            assert_eq!(*rx.borrow_and_update(), 7);
            let mut second = watch.subscribe();
            assert!(watch.send_if_different(8));
            second.changed().await.unwrap();
            assert_eq!(*second.borrow_watched(), 8);
        });
    }

    /// Unwatched, the value is kept and the old receivers see the channel closed; a new
    /// receiver reads the value and is woken by later changes.
    #[test]
    fn an_unwatched_channel_keeps_its_value_and_closes_its_receivers() {
        UTConfig::<()>::run(async {
            let mut watch = LazyWatch::<UTConfig, u64>::Value(1);
            let mut old = watch.subscribe();
            assert!(watch.send_if_greater(4));
            watch.unwatch();
            assert!(matches!(watch, LazyWatch::Value(4)));
            assert_eq!(*old.borrow_and_update(), 4);
            assert!(old.changed().await.is_err(), "the old receiver sees the channel closed");
            watch.unwatch(); // a value stays a value
            assert!(watch.send_if_greater(6));
            let mut rx = watch.subscribe();
            assert_eq!(*rx.borrow_watched(), 6);
            assert!(watch.send_if_greater(9));
            rx.changed().await.unwrap();
            assert_eq!(*rx.borrow_and_update(), 9);
        });
    }
}
