//! A connection's idle time-out and heartbeats, kept by counting ticks of
//! one timer instead of reading the clock: a read or a write only sets a
//! flag, and each tick looks at the flags since the last one. Reading the
//! clock on every read and write was four clock reads per message of a
//! transient queue. Owns the arithmetic of both limits; knows nothing of
//! frames, sockets or the protocol state (the connection task does the
//! reading, writing and closing).

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

/// The keep-alive bookkeeping of one connection.
pub(super) struct Keepalive {
    /// The tick period, if either limit applies.
    period: Option<Duration>,
    /// Our idle time-out, if we have one, and the ticks in a row without
    /// a read that end the connection for it.
    idle: Option<(Duration, u32)>,
    /// Whether the peer asked for frames at least every so often.
    heartbeats: bool,
    read: bool,
    wrote: bool,
    quiet_ticks: u32,
}

/// What a tick asks of the connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TickAction {
    Nothing,
    /// Nothing was written for a tick: send a heartbeat.
    Heartbeat,
    /// Nothing was read for our whole idle time-out: close.
    IdleTimeOut(Duration),
}

impl Keepalive {
    /// Keep our idle time-out of `local_idle_ms` (0: none) and the peer's
    /// announced one, `remote_idle_ms` (0 or none: no heartbeats).
    pub(super) fn new(local_idle_ms: u32, remote_idle_ms: Option<u32>) -> Self {
        let idle = (local_idle_ms > 0).then(|| Duration::from_millis(u64::from(local_idle_ms)));
        // The peer wants a frame at least every `remote` (transport 2.4.5).
        // A write found missing at one tick is made up at the next, so
        // frames go out at most two ticks apart: ticks of a quarter make
        // that half of what the peer asks, room for timer slack.
        let heartbeat_tick = remote_idle_ms
            .filter(|ms| *ms > 0)
            .map(|ms| (Duration::from_millis(u64::from(ms)) / 4).max(Duration::from_millis(1)));
        let idle_tick = idle.map(|idle| (idle / 2).max(Duration::from_millis(1)));
        let period = match (idle_tick, heartbeat_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // The fewest whole ticks that span the time-out: closing after
        // that many quiet ticks never closes early, and at most a tick
        // late. (With an idle time-out there is always a period.)
        let idle = idle.zip(period).map(|(idle, period)| {
            let ticks = idle.as_nanos().div_ceil(period.as_nanos());
            (idle, u32::try_from(ticks).unwrap_or(u32::MAX))
        });
        Self {
            period,
            idle,
            heartbeats: heartbeat_tick.is_some(),
            read: false,
            wrote: false,
            quiet_ticks: 0,
        }
    }

    /// Whether the connection needs ticks at all.
    pub(super) fn ticking(&self) -> bool {
        self.period.is_some()
    }

    /// The timer the connection polls, first ticking one period from now
    /// (an interval's immediate first tick would count as a quiet tick).
    /// An hour when nothing needs ticks (then it is not polled).
    pub(super) fn ticker(&self) -> Interval {
        let period = self.period.unwrap_or(Duration::from_secs(3600));
        let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticker
    }

    /// Bytes arrived from the peer.
    #[inline]
    pub(super) fn read(&mut self) {
        self.read = true;
    }

    /// Bytes went to the peer.
    #[inline]
    pub(super) fn wrote(&mut self) {
        self.wrote = true;
    }

    /// A tick while frames are being read.
    pub(super) fn on_tick(&mut self) -> TickAction {
        if std::mem::take(&mut self.read) {
            self.quiet_ticks = 0;
        } else {
            self.quiet_ticks = self.quiet_ticks.saturating_add(1);
        }
        if let Some((idle, limit)) = self.idle {
            if self.quiet_ticks >= limit {
                return TickAction::IdleTimeOut(idle);
            }
        }
        self.heartbeat_due()
    }

    /// A tick while frames are not being read (an attach waits for its
    /// queue): heartbeats still go out; the idle time-out is not kept,
    /// as bytes the peer sent meanwhile wait unread.
    pub(super) fn on_tick_not_reading(&mut self) -> TickAction {
        self.heartbeat_due()
    }

    fn heartbeat_due(&mut self) -> TickAction {
        let wrote = std::mem::take(&mut self.wrote);
        if self.heartbeats && !wrote {
            TickAction::Heartbeat
        } else {
            TickAction::Nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_peer_is_closed_after_the_ticks_that_span_the_time_out() {
        let mut k = Keepalive::new(500, None);
        assert_eq!(k.period, Some(Duration::from_millis(250)));
        assert_eq!(k.on_tick(), TickAction::Nothing);
        assert_eq!(
            k.on_tick(),
            TickAction::IdleTimeOut(Duration::from_millis(500))
        );
    }

    #[test]
    fn a_read_in_each_tick_keeps_the_connection() {
        let mut k = Keepalive::new(500, None);
        for _ in 0..10 {
            k.read();
            assert_eq!(k.on_tick(), TickAction::Nothing);
        }
        // One quiet tick is not yet the time-out; a read restarts the count.
        assert_eq!(k.on_tick(), TickAction::Nothing);
        k.read();
        assert_eq!(k.on_tick(), TickAction::Nothing);
        assert_eq!(k.on_tick(), TickAction::Nothing);
        assert!(matches!(k.on_tick(), TickAction::IdleTimeOut(_)));
    }

    #[test]
    fn a_time_out_that_is_no_whole_number_of_ticks_rounds_up() {
        // The peer's 400 ms makes ticks of 100 ms; our 250 ms then takes
        // three quiet ticks (300 ms), never two (200 ms, early).
        let k = Keepalive::new(250, Some(400));
        assert_eq!(k.period, Some(Duration::from_millis(100)));
        assert_eq!(k.idle, Some((Duration::from_millis(250), 3)));
    }

    #[test]
    fn heartbeats_go_out_only_after_a_tick_without_a_write() {
        let mut k = Keepalive::new(0, Some(1000));
        assert_eq!(k.period, Some(Duration::from_millis(250)));
        k.wrote();
        assert_eq!(k.on_tick(), TickAction::Nothing);
        assert_eq!(k.on_tick(), TickAction::Heartbeat);
        // Nothing of ours to time out, however long the peer is silent.
        for _ in 0..100 {
            assert_eq!(k.on_tick(), TickAction::Heartbeat);
        }
    }

    #[test]
    fn waiting_for_a_queue_sends_heartbeats_but_keeps_no_time_out() {
        let mut k = Keepalive::new(500, Some(1000));
        for _ in 0..10 {
            assert_eq!(k.on_tick_not_reading(), TickAction::Heartbeat);
        }
        k.read();
        assert_eq!(k.on_tick(), TickAction::Heartbeat);
    }

    #[test]
    fn without_limits_nothing_ticks() {
        let k = Keepalive::new(0, Some(0));
        assert!(!k.ticking());
    }
}
