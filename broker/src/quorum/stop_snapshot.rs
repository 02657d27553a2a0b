//! The snapshot a graceful stop takes of each group it applied entries to
//! since its last snapshot, so the next start has no log tail to replay.
//!
//! Why: snapshots are taken by log size (`compaction.rs`), so the last one
//! may lag what was applied by up to `snapshot_min_log_bytes` (64 MiB by
//! default). A start restores the live set from that snapshot and replays
//! the tail after openraft elects a leader, after the node already
//! listens: every body enqueued in the tail is paged again and found
//! settled later in it, and the segments holding records live at the
//! snapshot stay on disk until the replay releases them. A drained queue
//! then kept up to a quarter segment of dead bytes (the active segment is
//! kept while small, `paging::store`) across every restart, and a restart
//! re-wrote up to the whole tail of bodies. With a snapshot of everything
//! applied, `SegmentStore::restore_live` deletes every segment with
//! nothing live when the group opens, before the node listens.
//!
//! Only replicas whose replay involves segment files are snapshotted
//! (bodies paged since the last snapshot, or segment files present): a
//! replica that keeps its bodies in memory replays its tail in memory. A
//! few at a time, all within one bound: each writes and fsyncs a file,
//! and a node with thousands of queues must neither queue thousands of
//! fsyncs on the disk at once nor stop much later. The snapshot is best
//! effort (the log holds everything it would record), and a crash still
//! leaves a tail.
//!
//! It must not know about hand-offs or the shutdown order; the caller
//! runs it once this node holds its proposals (after the hand-offs).

use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use openraft::metrics::WaitError;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::queue::QuorumQueue;
use super::types::QueueRaftHandle;
use crate::queue::Queue;

/// How often the snapshot is asked for again: openraft drops a request
/// made while it builds another snapshot, which may end short of what was
/// applied.
const ASK_AGAIN: Duration = Duration::from_millis(200);
/// Snapshots built at once.
const AT_ONCE: usize = 8;

/// Snapshot what each of `queues`' replicas here applied, for those whose
/// replay involves segment files, within `bound` in all.
pub(super) async fn snapshot_all(queues: &[Arc<QuorumQueue>], bound: Duration) {
    let deadline = Instant::now() + bound;
    let wanted: Vec<Arc<QuorumQueue>> = queues
        .iter()
        .filter(|q| q.shared.lock().segments_in_replay())
        .cloned()
        .collect();
    if wanted.is_empty() {
        return;
    }
    let n_wanted = wanted.len();
    let permits = Arc::new(Semaphore::new(AT_ONCE));
    let mut tasks = tokio::task::JoinSet::new();
    for queue in wanted {
        let permits = permits.clone();
        tasks.spawn(async move {
            let Ok(Ok(_permit)) = tokio::time::timeout_at(deadline, permits.acquire_owned()).await
            else {
                return false;
            };
            let address = queue.address().to_string();
            snapshot_applied(&queue.raft, &address, deadline).await
        });
    }
    let mut n_done = 0usize;
    while let Some(done) = tasks.join_next().await {
        n_done += usize::from(matches!(done, Ok(true)));
    }
    tracing::info!(
        n_done,
        n_wanted,
        "quorum replicas snapshotted before stopping"
    );
}

/// Snapshot what `raft`'s replica applied, if its latest snapshot does not
/// cover it yet, waiting until `deadline` at most. True once a snapshot
/// covers it.
async fn snapshot_applied(raft: &QueueRaftHandle, queue: &str, deadline: Instant) -> bool {
    let target = {
        let metrics = raft.metrics();
        let metrics = metrics.borrow_watched();
        let Some(applied) = metrics.last_applied else {
            return true;
        };
        if metrics.snapshot.is_some_and(|s| s.index >= applied.index) {
            return true;
        }
        applied.index
    };
    loop {
        if let Err(error) = raft.trigger().snapshot().await {
            tracing::warn!(queue, %error, "no snapshot before stopping");
            return false;
        }
        let wait = ASK_AGAIN.min(deadline.saturating_duration_since(Instant::now()));
        let covered = raft
            .wait(Some(wait))
            .metrics(
                |m| m.snapshot.is_some_and(|s| s.index >= target),
                "a snapshot of what was applied",
            )
            .await;
        match covered {
            Ok(_) => return true,
            Err(WaitError::Timeout(..)) if Instant::now() < deadline => {}
            Err(error) => {
                tracing::warn!(queue, %error, applied = target, "no snapshot before stopping");
                return false;
            }
        }
    }
}
