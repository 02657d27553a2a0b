//! Following a quorum queue's leadership: a node that becomes leader feeds
//! its dispatcher from the replicated index (`feed.rs`), one that stops leading drops
//! it; the watcher task also asks openraft for the snapshots the state
//! machine wants (`compaction.rs`).

use std::sync::Arc;

use openraft::ServerState;

use super::state_machine::Shared;
use super::types::QueueRaftHandle;
use crate::codec::definitions::condition;
use crate::net::NodeId;
use crate::queue::QueueEventKind;

/// Whether the metrics say this node leads.
/// `Some(last log index)` while this node leads, as openraft reports it
/// now; `None` otherwise.
pub(super) fn leadership(raft: &QueueRaftHandle, node_id: NodeId) -> Option<u64> {
    let m = raft.metrics();
    let m = m.borrow();
    (m.state == ServerState::Leader && m.current_leader == Some(node_id))
        .then(|| m.last_log_index.unwrap_or(0))
}

/// Switch the queue to leading or not: a node that becomes leader builds
/// its dispatcher from the replicated index; one that stops leading drops
/// it. Its routed consumers (links of this node's clients) are parked for
/// their routed queue to move to the new leader; the others (consumers of
/// forwarded links) are told `Closed`, which the forwarding server ships
/// back to their node, where they follow the leader the same way.
/// Idempotent; called by the watchers and before serving a link.
/// `leading` is `Some(last log index)` when this node leads: every message
/// of the log up to there may have been delivered by an earlier leader.
pub(super) fn set_leading(shared: &Shared, leading: Option<u64>, node_id: NodeId, queue: &str) {
    let mut inner = shared.lock();
    if let (Some(last_log_index), false) = (leading, inner.leading) {
        inner.leading = true;
        inner.start_feed(last_log_index);
        inner.refill(queue);
        tracing::info!(%queue, node_id, "leading");
    } else if leading.is_none() && inner.leading {
        inner.leading = false;
        inner.stop_feed();
        for consumer in inner.dispatcher.clear() {
            if inner.routed.remove(&consumer.id) {
                inner.orphans.insert(
                    consumer.id,
                    (consumer.delivery_count, consumer.credit_limit),
                );
                continue;
            }
            consumer.sink.send(
                consumer.tag,
                QueueEventKind::Closed {
                    condition: condition::DETACH_FORCED,
                    description: format!("{queue}: leadership moved away from this node"),
                },
            );
        }
        tracing::info!(%queue, node_id, "no longer leading");
    }
}

/// Follow the group's leadership changes as openraft reports them, and ask
/// openraft for the snapshots the state machine wants (`compaction`).
pub(super) async fn watch_leadership(
    raft: QueueRaftHandle,
    shared: Arc<Shared>,
    node_id: NodeId,
    queue: String,
) {
    let mut metrics = raft.metrics();
    loop {
        let (leading, log_applied) = {
            let m = metrics.borrow_and_update();
            (
                (m.state == ServerState::Leader && m.current_leader == Some(node_id))
                    .then(|| m.last_log_index.unwrap_or(0)),
                m.last_applied.map(|l| l.index) >= m.last_log_index,
            )
        };
        set_leading(&shared, leading, node_id, &queue);
        if leading.is_some() {
            shared.lock().confirm_missing(&queue, log_applied);
        }
        // The same task serves the state machine's snapshot requests: it
        // holds the Raft handle and ends with the group.
        loop {
            tokio::select! {
                changed = metrics.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                () = shared.snapshot_wanted.wait() => {
                    if let Err(e) = raft.trigger().snapshot().await {
                        tracing::debug!(queue, error = %e, "quorum queue: snapshot request refused");
                    }
                }
            }
        }
    }
}
