//! The wait of a quorum group's replication stream (and heartbeat) on a
//! peer whose node is lost (`raft::PeerReach`, implemented here on the
//! node's liveness): a stream to a peer heard before and lost since waits
//! until a lost peer is heard again (a revival counter the probes' answers
//! bump, `peer_liveness.rs`), rather than failing at once and being
//! retried every second by openraft. Knows nothing of openraft's
//! replication beyond that trait.

use std::sync::atomic::Ordering;

use super::node::QuorumNode;
use super::peer_liveness::PeerLiveness;
use crate::net::NodeId;

impl PeerLiveness {
    /// End every wait of a stream on a lost peer, and start none from now
    /// on: the node's groups are shut down. A waiting replication task
    /// keeps its group's log store, so the node's database, open: an
    /// in-process node restarted on the same directory found it still
    /// open (`DatabaseAlreadyOpen`, `tests/quorum_lost_writes.rs`).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.revived.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl crate::raft::PeerReach for PeerLiveness {
    /// Only a peer heard before and lost since: one never heard (this node
    /// has just started, or does not probe it) is tried as before.
    fn until_heard(&self, node: NodeId) -> Option<openraft::base::BoxFuture<'static, ()>> {
        // Subscribed before looking, so a revival in between is not missed.
        let mut revived = self.revived.subscribe();
        if self.closed.load(Ordering::Acquire) || !self.known_lost(node) {
            return None;
        }
        self.waits[0].fetch_add(1, Ordering::Relaxed);
        let waits = self.waits.clone();
        Some(Box::pin(async move {
            if revived.changed().await.is_ok() {
                waits[1].fetch_add(1, Ordering::Relaxed);
            }
        }))
    }
}

impl QuorumNode {
    /// How many replication streams and heartbeats of this node's groups
    /// waited for a lost peer's node to be heard again (rather than fail
    /// at once and be retried) since this node started, and how many of
    /// those waits ended because a lost peer was heard again.
    pub fn lost_peer_waits(&self) -> (u64, u64) {
        let [started, woken] = &*self.liveness.waits;
        (
            started.load(Ordering::Relaxed),
            woken.load(Ordering::Relaxed),
        )
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
        let counts = live.waits.each_ref().map(|c| c.load(Ordering::Relaxed));
        assert_eq!(counts, [2, 2], "two waits, both ended by a revival");
        // Closed (the node's groups shut down): waits end, none starts.
        tokio::time::advance(Duration::from_millis(1100)).await;
        let mut wait = live.until_heard(2).expect("lost again");
        live.close();
        assert!((&mut wait).now_or_never().is_some());
        assert!(live.until_heard(2).is_none(), "closed: no wait");
    }
}
