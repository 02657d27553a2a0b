//! Message expiry (TTL): when a message expires, and taking expired
//! messages out of a [`Dispatcher`](super::dispatch::Dispatcher).
//!
//! A message's expiry is an absolute time, ms since the Unix epoch, fixed
//! when the queue takes it: enqueue time plus the smaller of its header's
//! `ttl` and its queue policy's `message_ttl_ms` (as RabbitMQ). 0 means
//! never. A quorum queue's leader stamps it into the log entry, so every
//! replica holds the same time. An expired message is never delivered:
//! the dispatcher checks it when it takes a message for a consumer (only
//! messages that have an expiry pay for reading the clock), and the
//! node's sweep (`node/expiry_sweep.rs`, every second) removes expired
//! messages from the head of each queue that has had messages with an
//! expiry. Like RabbitMQ, the sweep stops at the first waiting message
//! that has not expired: one behind a longer-lived head goes when it
//! reaches the head, or when a consumer would take it.
//!
//! Knows no node and no Raft; the clock is the system's wall clock (a
//! leader change carries expiries as absolute times).

use std::time::{SystemTime, UNIX_EPOCH};

use super::dispatch::{Dispatcher, Entry};
use super::message::Message;
use super::policy::QueuePolicy;

/// Messages expired at one sweep of one queue at most (a quorum queue
/// logs them as one entry).
pub(crate) const SWEEP_MAX: usize = 4096;

/// Now, in ms since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// When `message`, taken now, expires (0: never): its header's ttl or
/// the policy's message TTL, whichever is shorter. Reads the clock only
/// when there is a TTL.
pub(crate) fn expires_at(message: &Message, policy: Option<&QueuePolicy>) -> u64 {
    let header = message.header.as_ref().and_then(|h| h.ttl).map(u64::from);
    let policy = policy.and_then(|p| p.message_ttl_ms);
    let ttl = match (header, policy) {
        (None, None) => return 0,
        (Some(a), Some(b)) => a.min(b),
        (Some(t), None) | (None, Some(t)) => t,
    };
    // At least 1: 0 is "never".
    now_ms().saturating_add(ttl).max(1)
}

/// Whether an expiry time has passed.
pub(crate) fn has_passed(expires_at: u64, now: u64) -> bool {
    expires_at != 0 && expires_at <= now
}

/// Whether `entry` must not be delivered any more (reads the clock only
/// for an entry with an expiry).
pub(crate) fn expired(entry: &Entry) -> bool {
    entry.expires_at != 0 && has_passed(entry.expires_at, now_ms())
}

/// Take the expired messages off the head of `dispatcher`'s waiting
/// messages (oldest first, at most [`SWEEP_MAX`]), and those it set aside
/// at dispatch.
pub(crate) fn sweep(dispatcher: &mut Dispatcher, now: u64) -> Vec<Entry> {
    let mut gone = dispatcher.take_expired();
    while gone.len() < SWEEP_MAX
        && dispatcher
            .oldest_waiting()
            .is_some_and(|e| has_passed(e.expires_at, now))
    {
        match dispatcher.pop_oldest_waiting() {
            Some(entry) => gone.push(entry),
            None => break,
        }
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Header;

    fn message(ttl: Option<u32>) -> Message {
        Message {
            bytes: bytes::Bytes::from_static(b"x"),
            header: ttl.map(|ttl| Header {
                ttl: Some(ttl),
                ..Header::default()
            }),
            header_len: 0,
        }
    }

    #[test]
    fn the_shorter_ttl_wins() {
        let policy = QueuePolicy::compile(&crate::config::PolicyConfig {
            pattern: "/queues/*".into(),
            message_ttl_ms: Some(60_000),
            ..Default::default()
        })
        .unwrap();
        let now = now_ms();
        assert_eq!(expires_at(&message(None), None), 0);
        let header = expires_at(&message(Some(200)), Some(&policy));
        assert!((now + 200..now + 1_000).contains(&header), "{header}");
        let policy_only = expires_at(&message(None), Some(&policy));
        assert!((now + 60_000..now + 61_000).contains(&policy_only));
        let long_header = expires_at(&message(Some(3_600_000)), Some(&policy));
        assert!(long_header < now + 61_000);
        assert!(!has_passed(0, u64::MAX));
        assert!(has_passed(5, 5));
        assert!(!has_passed(6, 5));
    }
}
