use display_more::DisplayOptionExt;

use crate::RaftTypeConfig;
use crate::Vote;
use crate::core::lazy_watch::LazyWatch;
use crate::core::io_flush_tracking::FlushPoint;
use crate::raft_state::IOId;
use crate::type_config::alias::LogIdOf;

/// Sender for publishing I/O flush progress notifications.
///
/// Used internally by RaftCore to notify watchers when I/O operations complete.
/// The sender maintains independent channels (log, vote, commit, snapshot, and apply) to allow
/// efficient filtering of notifications.
///
/// ramqp: a channel is made only when the first handle of its kind is (`IoProgressWatcher`);
/// until then the sender keeps the value alone, under one lock shared with the watcher, which
/// builds the channel from it. Upstream kept five watch channels per group (~0.64 KiB) that
/// nothing here reads but a leadership transfer's wait (the log's), and updated them at every
/// pass of the core loop.
pub(crate) struct IoProgressSender<C>
where C: RaftTypeConfig
{
    pub(crate) shared: std::sync::Arc<std::sync::Mutex<Progress<C>>>,
}

/// ramqp: the five kinds of progress a group publishes.
pub(crate) struct Progress<C>
where C: RaftTypeConfig
{
    /// Log I/O progress (includes all I/O operations).
    pub(crate) log: LazyWatch<C, Option<FlushPoint<C>>>,

    /// Vote I/O progress (vote-specific updates).
    ///
    /// Note: Uses `Vote<C::LeaderId>` (the internal concrete type) instead of `VoteOf<C>` (the
    /// trait) because `PartialOrd` is required for progress tracking but user-provided
    /// `VoteOf<C>` implementations may not provide it.
    pub(crate) vote: LazyWatch<C, Option<Vote<C::LeaderId>>>,

    /// Commit progress (state machine submission).
    pub(crate) commit: LazyWatch<C, Option<LogIdOf<C>>>,

    /// Snapshot persistence progress.
    pub(crate) snapshot: LazyWatch<C, Option<LogIdOf<C>>>,

    /// Last-applied log progress (state machine application).
    pub(crate) apply: LazyWatch<C, Option<LogIdOf<C>>>,
}

impl<C> Default for Progress<C>
where C: RaftTypeConfig
{
    fn default() -> Self {
        Self {
            log: LazyWatch::Value(None),
            vote: LazyWatch::Value(None),
            commit: LazyWatch::Value(None),
            snapshot: LazyWatch::Value(None),
            apply: LazyWatch::Value(None),
        }
    }
}

impl<C> Progress<C>
where C: RaftTypeConfig
{
    /// ramqp: `shared` locked, for the sender and the watcher alike (a poisoned lock still
    /// holds whole values: each update is one assignment).
    pub(crate) fn lock(shared: &std::sync::Mutex<Self>) -> std::sync::MutexGuard<'_, Self> {
        shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<C> IoProgressSender<C>
where C: RaftTypeConfig
{
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress<C>> {
        Progress::lock(&self.shared)
    }

    /// Publish an I/O flush completion notification to watchers.
    ///
    /// Updates progress channels conditionally:
    /// - **vote_tx**: Updated only when the vote changes (new term or leader)
    /// - **log_tx**: Updated when either vote or log_id changes (any I/O progress)
    ///
    /// This separation allows applications to efficiently wait for leadership changes
    /// without being notified of every log append.
    ///
    /// # Arguments
    ///
    /// * `io_id` - The I/O operation that just completed. `None` means no progress to report.
    pub(crate) fn send_log_progress(&self, io_id: Option<IOId<C>>) -> Option<()> {
        tracing::debug!("send_log_progress: try to update to :{}", io_id.display());

        let (vote, log_id) = io_id?.to_vote_and_log_id();
        let log = Some(FlushPoint::new(vote.clone(), log_id));

        let mut progress = self.lock();
        progress.vote.send_if_different(Some(vote));
        progress.log.send_if_different(log);

        Some(())
    }

    /// Publish the latest commit log id progress.
    pub(crate) fn send_commit_progress(&self, log_id: Option<LogIdOf<C>>) -> Option<()> {
        tracing::debug!("send_commit_progress: try to update to :{}", log_id.display());
        self.lock().commit.send_if_different(log_id);
        Some(())
    }

    /// Publish the latest snapshot log id progress.
    pub(crate) fn send_snapshot_progress(&self, log_id: Option<LogIdOf<C>>) -> Option<()> {
        tracing::debug!("send_snapshot_progress: try to update to :{}", log_id.display());
        self.lock().snapshot.send_if_different(log_id);
        Some(())
    }

    /// Publish the latest applied log id progress.
    pub(crate) fn send_apply_progress(&self, log_id: Option<LogIdOf<C>>) -> Option<()> {
        tracing::debug!("send_apply_progress: try to update to :{}", log_id.display());
        self.lock().apply.send_if_different(log_id);
        Some(())
    }
}
