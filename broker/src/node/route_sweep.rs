//! The node's sweep of unused routed queues: one task per node that, every
//! `route_sweep_ms` (10 s by default), has the registry let go of the
//! routed queues no link has held since the last sweep
//! (`Registry::drop_unused_routes`). Without it a node kept one for every
//! queue a client ever used through it, with its follower task. With 0 it
//! does not start (the former behaviour).

use std::sync::Weak;
use std::time::Duration;

use super::registry::Registry;

/// Start the sweep; it ends once the registry is gone.
pub(crate) fn spawn(registry: Weak<Registry>, every_ms: u64) {
    if every_ms == 0 {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(every_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is at once: nothing to sweep yet.
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(registry) = registry.upgrade() else {
                return;
            };
            let dropped = registry.drop_unused_routes();
            if dropped > 0 {
                tracing::debug!(dropped, "unused routed queues let go");
            }
        }
    });
}
