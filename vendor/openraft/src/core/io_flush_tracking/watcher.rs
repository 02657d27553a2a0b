use crate::RaftTypeConfig;
use crate::core::io_flush_tracking::AppliedProgress;
use crate::core::io_flush_tracking::CommitProgress;
use crate::core::io_flush_tracking::LogProgress;
use crate::core::io_flush_tracking::SnapshotProgress;
use crate::core::io_flush_tracking::VoteProgress;
use crate::core::io_flush_tracking::sender::IoProgressSender;
use crate::core::io_flush_tracking::sender::Progress;

/// I/O flush progress watch handles.
///
/// This struct maintains the receiving ends of watch channels that track I/O flush progress.
/// It provides five independent progress streams:
///
/// - **Log progress**: Tracks all I/O operations (both vote saves and log appends). Updated
///   whenever any data is flushed to storage.
///
/// - **Vote progress**: Tracks only vote changes. Updated when the vote value changes (new term or
///   leader), not on every log append.
///
/// - **Commit progress**: Tracks when committed logs are submitted to the state machine.
///
/// - **Snapshot progress**: Tracks snapshot persistence. Updated when snapshots are built or
///   installed and persisted.
///
/// - **Applied progress**: Tracks logs applied to the state machine. Updated when the last applied
///   log id advances.
///
/// The separation allows applications to efficiently wait for different kinds of progress:
/// - Use log progress to wait for specific log entries to be durable
/// - Use vote progress to wait for leadership changes to be persisted
pub(crate) struct IoProgressWatcher<C>
where C: RaftTypeConfig
{
    /// ramqp: the progress shared with the sender: values until the first handle is made here,
    /// which turns that kind's value into a channel (see `IoProgressSender`).
    shared: std::sync::Arc<std::sync::Mutex<Progress<C>>>,
}

impl<C> IoProgressWatcher<C>
where C: RaftTypeConfig
{
    /// Create a new progress watcher/sender pair.
    ///
    /// Returns `(IoProgressSender, IoProgressWatcher)` where:
    /// - The sender is used by RaftCore to publish flush notifications
    /// - The watcher is used to create watch handles for applications
    pub(crate) fn new() -> (IoProgressSender<C>, Self) {
        let shared = std::sync::Arc::new(std::sync::Mutex::new(Progress::default()));
        let sender = IoProgressSender { shared: shared.clone() };
        (sender, Self { shared })
    }

    /// ramqp: the progress, locked, for a handle to subscribe to one kind of it.
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress<C>> {
        Progress::lock(&self.shared)
    }

    /// Create a watch handle for log I/O flush progress.
    ///
    /// Each call creates a new independent handle. Multiple handles can watch the same progress
    /// concurrently.
    pub(crate) fn log_progress(&self) -> LogProgress<C> {
        LogProgress::new(self.lock().log.subscribe())
    }

    /// Create a watch handle for vote I/O flush progress.
    ///
    /// Each call creates a new independent handle. Multiple handles can watch the same progress
    /// concurrently.
    pub(crate) fn vote_progress(&self) -> VoteProgress<C> {
        VoteProgress::new(self.lock().vote.subscribe())
    }

    /// Create a watch handle for commit log progress.
    ///
    /// Each call creates a new independent handle. Multiple handles can watch the same progress
    /// concurrently.
    pub(crate) fn commit_progress(&self) -> CommitProgress<C> {
        CommitProgress::new(self.lock().commit.subscribe())
    }

    /// Create a watch handle for snapshot persistence progress.
    ///
    /// Each call creates a new independent handle. Multiple handles can watch the same progress
    /// concurrently.
    pub(crate) fn snapshot_progress(&self) -> SnapshotProgress<C> {
        SnapshotProgress::new(self.lock().snapshot.subscribe())
    }

    /// Create a watch handle for applied log progress.
    ///
    /// Each call creates a new independent handle. Multiple handles can watch the same progress
    /// concurrently.
    pub(crate) fn apply_progress(&self) -> AppliedProgress<C> {
        AppliedProgress::new(self.lock().apply.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::UTConfig;
    use crate::testing::log_id;
    use crate::type_config::TypeConfigExt;

    /// ramqp: the first handle makes the channels from the values published before it, and
    /// later changes reach it.
    #[test]
    fn a_first_handle_starts_at_the_published_values_and_sees_later_ones() {
        UTConfig::<()>::run(async {
            let (tx, watcher) = IoProgressWatcher::<UTConfig>::new();
            tx.send_apply_progress(Some(log_id::<UTConfig>(1, 1, 3)));
            tx.send_commit_progress(Some(log_id::<UTConfig>(1, 1, 4)));
            let mut apply = watcher.apply_progress();
            assert_eq!(apply.get(), Some(log_id::<UTConfig>(1, 1, 3)));
            assert_eq!(watcher.commit_progress().get(), Some(log_id::<UTConfig>(1, 1, 4)));
            assert_eq!(watcher.snapshot_progress().get(), None);

            tx.send_apply_progress(Some(log_id::<UTConfig>(1, 1, 5)));
            let reached = apply.wait_until_ge(&Some(log_id::<UTConfig>(1, 1, 5))).await.unwrap();
            assert_eq!(reached, Some(log_id::<UTConfig>(1, 1, 5)));
            assert_eq!(watcher.apply_progress().get(), Some(log_id::<UTConfig>(1, 1, 5)));
        });
    }
}
