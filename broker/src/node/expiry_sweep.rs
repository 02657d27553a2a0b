//! The node's expiry sweep: one task per node that, every second, has each
//! queue served here remove the expired messages at its head
//! (`queue/expiry.rs`): the transient queues of the registry, and the
//! quorum queues this node leads that hold a message with an expiry or
//! are past a drop-head limit (the quorum side's sweep list; their leader
//! logs the removal, so every replica removes the same messages); the
//! same visit has an empty, idle quorum replica give back its idle
//! segment (`quorum/idle_shed.rs`). A
//! transient queue that never took a message with an expiry costs one
//! check, a quorum queue none. No timer per message. A quorum leader that
//! applied past its drop-head limit asks for a sweep at once (the list's
//! `soon`), so its head goes within milliseconds, not a second.

use std::sync::Weak;
use std::time::Duration;

use super::registry::Registry;
use crate::quorum::QuorumNode;

/// How often expired messages are swept.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Least time between two sweeps a quorum leader asked for (they
/// coalesce while publishes keep a drop-head queue past its limit).
const SOON_SPACING: Duration = Duration::from_millis(50);

/// Start the sweep; it ends once the node is gone.
pub(crate) fn spawn(registry: Weak<Registry>, quorum: Weak<QuorumNode>) {
    let Some(list) = quorum.upgrade().map(|q| q.sweep_list()) else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let asked = tokio::select! {
                _ = tick.tick() => false,
                () = list.soon().notified() => true,
            };
            let (Some(registry), Some(quorum)) = (registry.upgrade(), quorum.upgrade()) else {
                return;
            };
            if !asked {
                registry.sweep_expired();
            }
            quorum.sweep_expired();
            drop((registry, quorum));
            if asked {
                tokio::time::sleep(SOON_SPACING).await;
            }
        }
    });
}
