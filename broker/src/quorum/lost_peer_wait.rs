//! The wait of a quorum group's replication stream (and heartbeat) on a
//! peer whose node is lost (`raft::PeerReach`, implemented here on the
//! node's liveness): a stream to a peer heard before and lost since waits
//! until a lost peer is heard again (a revival counter the probes' answers
//! bump, `peer_liveness.rs`), rather than failing at once and being
//! retried every second by openraft. Knows nothing of openraft's
//! replication beyond that trait.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::node::QuorumNode;
use super::peer_liveness::PeerLiveness;
use crate::net::NodeId;

/// The node's waits on lost peers, counted; shared by every wait.
#[derive(Debug, Default)]
pub(super) struct LostWaits {
    started: AtomicU64,
    /// Ended because a lost peer was heard again.
    woken: AtomicU64,
    /// Not ended yet: a wait's future dropped (its stream cancelled, the
    /// bound run out) ends it as surely as a revival.
    open: AtomicU64,
    /// The node's groups are shut down: no stream waits any more.
    closed: AtomicBool,
}

/// The node's waits of replication streams (and heartbeats) on lost
/// peers, as [`QuorumNode::lost_peer_waits`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LostPeerWaits {
    /// Waits started since this node started.
    pub started: u64,
    /// Of those, the waits that ended because a lost peer was heard again.
    pub woken: u64,
    /// Waits going on now.
    pub open: u64,
}

/// Counts a wait open while it lives.
struct OpenWait(Arc<LostWaits>);

impl Drop for OpenWait {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl PeerLiveness {
    /// End every wait of a stream on a lost peer, and start none from now
    /// on: the node's groups are shut down. A waiting replication task
    /// keeps its group's log store, so the node's database, open: an
    /// in-process node restarted on the same directory found it still
    /// open (`DatabaseAlreadyOpen`, `tests/quorum_lost_writes.rs`).
    /// (openraft cancels the wait of a single group's stream when that
    /// group shuts down or its leader steps down; this is the node-wide
    /// end, at once.)
    pub(super) fn close(&self) {
        self.waits.closed.store(true, Ordering::Release);
        self.revived.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl crate::raft::PeerReach for PeerLiveness {
    /// Only a peer heard before and lost since: one never heard (this node
    /// has just started, or does not probe it) is tried as before.
    fn until_heard(&self, node: NodeId) -> Option<openraft::base::BoxFuture<'static, ()>> {
        // Subscribed before looking, so a revival in between is not missed.
        let mut revived = self.revived.subscribe();
        if self.waits.closed.load(Ordering::Acquire) || !self.known_lost(node) {
            return None;
        }
        self.waits.started.fetch_add(1, Ordering::Relaxed);
        self.waits.open.fetch_add(1, Ordering::Relaxed);
        let open = OpenWait(self.waits.clone());
        Some(Box::pin(async move {
            let heard = revived.changed().await.is_ok();
            let waits = &open.0;
            if heard && !waits.closed.load(Ordering::Acquire) {
                waits.woken.fetch_add(1, Ordering::Relaxed);
            }
        }))
    }
}

impl QuorumNode {
    /// The replication streams and heartbeats of this node's groups that
    /// waited for a lost peer's node to be heard again (rather than fail
    /// at once and be retried) since this node started: how many, how
    /// many a lost peer heard again ended, how many wait now.
    pub fn lost_peer_waits(&self) -> LostPeerWaits {
        let w = &self.liveness.waits;
        LostPeerWaits {
            started: w.started.load(Ordering::Relaxed),
            woken: w.woken.load(Ordering::Relaxed),
            open: w.open.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stream_to_a_lost_peer_waits_until_it_is_heard_again() {
        use crate::raft::PeerReach;
        use futures_util::FutureExt;
        let live = PeerLiveness::new(Duration::from_millis(1000));
        assert!(
            live.until_heard(2).is_none(),
            "never heard: tried as before"
        );
        live.heard(2, 7, true);
        assert!(live.until_heard(2).is_none(), "alive");
        tokio::time::advance(Duration::from_millis(1100)).await;
        live.heard(3, 1, true);
        let mut wait = live.until_heard(2).expect("lost: waits");
        assert!((&mut wait).now_or_never().is_none());
        // Still lost when heard again: a probe's answer from a node whose
        // store fails, and another probe of a live peer, wake nothing.
        live.heard(2, 7, false);
        live.heard(3, 1, true);
        assert!((&mut wait).now_or_never().is_none());
        // Peer 3 lost and back wakes it (the stream then just tries).
        tokio::time::advance(Duration::from_millis(1100)).await;
        live.heard(3, 1, true);
        assert!((&mut wait).now_or_never().is_some());
        let mut wait = live.until_heard(2).expect("still lost");
        // Heard again, in a new incarnation: the wait ends.
        live.heard(2, 8, true);
        assert!((&mut wait).now_or_never().is_some());
        assert!(live.until_heard(2).is_none());
        let counts = |live: &PeerLiveness| {
            let w = &live.waits;
            [&w.started, &w.woken, &w.open].map(|c| c.load(Ordering::Relaxed))
        };
        assert_eq!(
            counts(&live),
            [2, 2, 0],
            "two waits, both ended by a revival"
        );
        // A wait dropped (its stream cancelled) is no longer open.
        tokio::time::advance(Duration::from_millis(1100)).await;
        let wait = live.until_heard(2).expect("lost again");
        assert_eq!(counts(&live), [3, 2, 1]);
        drop(wait);
        assert_eq!(counts(&live), [3, 2, 0], "dropped: not open, not woken");
        // Closed (the node's groups shut down): waits end, none starts;
        // the end is not counted as a revival.
        let mut wait = live.until_heard(2).expect("still lost");
        live.close();
        assert!((&mut wait).now_or_never().is_some());
        assert!(live.until_heard(2).is_none(), "closed: no wait");
        assert_eq!(counts(&live), [4, 2, 0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_found_not_running_is_lost_at_once_until_heard_again() {
        // `PeerLiveness::gone`: here, beside the waits it ends sooner.
        use super::super::peer_liveness::PeerState;
        use tokio::time::Instant;
        let live = PeerLiveness::new(Duration::from_millis(1250));
        // Never heard: there is nothing to lose yet.
        live.gone(2, Instant::now());
        assert!(!live.known_lost(2));
        live.heard(2, 7, true);
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(!live.is_gone(2));
        // Refused before it was last heard: restarted since, not gone.
        live.gone(2, Instant::now() - Duration::from_millis(150));
        assert!(!live.is_gone(2) && live.state(2).is_alive());
        live.gone(2, Instant::now());
        let gone_at = Instant::now();
        assert!(live.is_gone(2));
        assert_eq!(live.state(2), PeerState::Lost { lost_at: gone_at });
        assert!(live.known_lost(2));
        assert_eq!(live.vouch(2, Duration::ZERO), None);
        let revivals = *live.revived.borrow();
        tokio::time::advance(Duration::from_millis(300)).await;
        live.gone(2, Instant::now());
        assert_eq!(live.state(2), PeerState::Lost { lost_at: gone_at });
        live.heard(2, 8, true);
        assert!(live.state(2).is_alive() && !live.is_gone(2));
        assert_eq!(*live.revived.borrow(), revivals + 1, "heard again: revived");
    }
}
