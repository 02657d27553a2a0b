//! The follower's side of pipelined AppendEntries (`append_stream.rs`):
//! per group, the leader's current stream is fed to openraft's
//! `Raft::stream_append` in the order its requests arrived, and openraft's
//! answers (in the same order) go back to the waiting calls.
//!
//! `AppendFeeds::take` runs on the transport's reader, in the order the
//! leader made its calls (`NodeHandler::handle`'s guarantee): it checks the
//! request's place in its stream and queues it to the group's feed task.
//! A request with sequence number 0 starts a new stream (replacing the
//! group's previous one); any other must be the next of the group's
//! current stream, or it is refused and the stream is broken (the leader
//! then starts a new one). openraft ending its stream (a conflict, a
//! higher vote, its core stopped) breaks it too: the requests queued after
//! it are refused.
//!
//! Bounded: one small entry per group that was ever fed (dropped with the
//! group, `AppendFeeds::forget`), and a task only while a stream has
//! traffic: a feed with nothing queued nor unanswered for `idle` ends its
//! task (and openraft's stream); the next request of the same stream
//! starts another.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use openraft::error::Fatal;
use openraft::raft::{AppendEntriesRequest, StreamAppendError, StreamAppendResult};
use openraft::RaftTypeConfig;
use tokio::sync::{mpsc, oneshot};

use super::append_stream::{StreamAnswer, StreamHeader};
use super::GroupId;
use crate::net::NodeId;

/// The requests openraft's stream reads.
pub(crate) type FeedInput<C> = BoxStream<'static, AppendEntriesRequest<C>>;

/// What a feed needs from the group: openraft's answers to `input` (from
/// `Raft::stream_append`), and what to do for each request taken (not
/// refused for a higher vote).
pub(crate) struct FeedTarget<C: RaftTypeConfig> {
    pub(crate) answers: BoxStream<'static, Result<StreamAppendResult<C>, Fatal<C>>>,
    pub(crate) on_taken: Box<dyn Fn() + Send>,
}

/// Opens the group for a new feed task (runs in that task).
pub(crate) type FeedOpener<C> =
    Box<dyn FnOnce(FeedInput<C>) -> BoxFuture<'static, Result<FeedTarget<C>, String>> + Send>;

struct Item<C: RaftTypeConfig> {
    request: Bytes,
    answer: oneshot::Sender<StreamAnswer<C>>,
}

/// One group's current stream.
struct Feed<C: RaftTypeConfig> {
    leader: NodeId,
    stream: u64,
    next_seq: u64,
    /// The queue of the running task, if one runs.
    tx: Option<mpsc::UnboundedSender<Item<C>>>,
    /// Which task that is.
    task: u64,
    /// Refuses every further request of the stream.
    broken: bool,
}

/// Counters of the node's feeds, for tests and operators.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendFeedStats {
    /// Pipelined requests handed to openraft.
    pub appends: u64,
    /// The most requests one feed had handed to openraft and not yet
    /// answered at once (more than 1: the leader's appends overlapped).
    pub max_outstanding: u64,
    /// Feed tasks started.
    pub tasks: u64,
    /// Streams broken (a gap, openraft ending its stream, a failed open).
    pub broken: u64,
    /// Feed tasks running now.
    pub running: u64,
    /// Groups with a feed entry (a task running or not).
    pub feeds: u64,
}

/// The pipelined-append feeds of one node's groups.
pub(crate) struct AppendFeeds<C: RaftTypeConfig> {
    feeds: Mutex<HashMap<GroupId, Feed<C>>>,
    idle: Duration,
    next_task: AtomicU64,
    appends: AtomicU64,
    max_outstanding: AtomicU64,
    tasks: AtomicU64,
    broken: AtomicU64,
    running: Arc<AtomicU64>,
}

/// How long a feed task waits, with nothing to do, before it ends.
pub(crate) const FEED_IDLE: Duration = Duration::from_secs(2);

impl<C: RaftTypeConfig> AppendFeeds<C> {
    /// No feeds yet; a task ends after `idle` with nothing to do.
    pub(crate) fn new(idle: Duration) -> Arc<Self> {
        Arc::new(AppendFeeds {
            feeds: Mutex::new(HashMap::new()),
            idle,
            next_task: AtomicU64::new(1),
            appends: AtomicU64::new(0),
            max_outstanding: AtomicU64::new(0),
            tasks: AtomicU64::new(0),
            broken: AtomicU64::new(0),
            running: Arc::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupId, Feed<C>>> {
        self.feeds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counters.
    pub(crate) fn stats(&self) -> AppendFeedStats {
        AppendFeedStats {
            appends: self.appends.load(Ordering::Relaxed),
            max_outstanding: self.max_outstanding.load(Ordering::Relaxed),
            tasks: self.tasks.load(Ordering::Relaxed),
            broken: self.broken.load(Ordering::Relaxed),
            running: self.running.load(Ordering::Relaxed),
            feeds: self.lock().len() as u64,
        }
    }

    /// Drop the group's feed (its replica stopped here).
    pub(crate) fn forget(&self, group: GroupId) {
        self.lock().remove(&group);
    }

    /// Queue one pipelined request of `leader`'s stream for `group`; the
    /// answer comes on the receiver. Must be called in the order the leader
    /// made its calls; never blocks. `open` is called (here) only when the
    /// feed needs a new task. Refused (the stream is then broken) when it
    /// is not the next request of the group's current stream.
    pub(crate) fn take(
        self: &Arc<Self>,
        group: GroupId,
        leader: NodeId,
        header: StreamHeader,
        request: Bytes,
        open: impl FnOnce() -> FeedOpener<C>,
    ) -> Result<oneshot::Receiver<StreamAnswer<C>>, String> {
        let mut feeds = self.lock();
        if header.seq == 0 {
            // A new stream replaces the old one; the old task finishes what
            // it was given.
            feeds.insert(
                group,
                Feed {
                    leader,
                    stream: header.stream,
                    next_seq: 0,
                    tx: None,
                    task: 0,
                    broken: false,
                },
            );
        }
        let Some(feed) = feeds.get_mut(&group) else {
            return Err(format!("no append stream {} here", header.stream));
        };
        if feed.leader != leader || feed.stream != header.stream {
            return Err(format!(
                "append stream {} of node {leader} is not the current one here",
                header.stream
            ));
        }
        if feed.broken {
            return Err(format!("append stream {} was broken", header.stream));
        }
        if header.seq != feed.next_seq {
            feed.broken = true;
            feed.tx = None;
            self.broken.fetch_add(1, Ordering::Relaxed);
            return Err(format!(
                "append stream {}: request {} where {} was due",
                header.stream, header.seq, feed.next_seq
            ));
        }
        feed.next_seq += 1;
        let (answer, answer_rx) = oneshot::channel();
        let mut item = Item { request, answer };
        if let Some(tx) = &feed.tx {
            match tx.send(item) {
                Ok(()) => return Ok(answer_rx),
                // Its task is gone (it ended without clearing `tx`).
                Err(mpsc::error::SendError(back)) => item = back,
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(item);
        let task = self.next_task.fetch_add(1, Ordering::Relaxed);
        feed.tx = Some(tx);
        feed.task = task;
        self.tasks.fetch_add(1, Ordering::Relaxed);
        self.running.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(self.clone().run(group, task, rx, open()));
        Ok(answer_rx)
    }

    /// One feed task: opens the group, then pumps until idle, replaced or
    /// broken.
    async fn run(
        self: Arc<Self>,
        group: GroupId,
        task: u64,
        mut rx: mpsc::UnboundedReceiver<Item<C>>,
        open: FeedOpener<C>,
    ) {
        let _running = Running(self.running.clone());
        let (input, input_rx) = mpsc::unbounded_channel();
        let requests = futures_util::stream::unfold(input_rx, |mut rx| async move {
            rx.recv().await.map(|request| (request, rx))
        });
        let mut pending = VecDeque::new();
        let why = match open(Box::pin(requests)).await {
            Ok(target) => match self
                .pump(group, task, &mut rx, input, target, &mut pending)
                .await
            {
                Ok(()) => return,
                Err(why) => why,
            },
            Err(why) => why,
        };
        // Broken: no more requests reach `rx`; refuse what is queued.
        {
            let mut feeds = self.lock();
            if let Some(feed) = feeds.get_mut(&group).filter(|f| f.task == task) {
                feed.broken = true;
                feed.tx = None;
            }
        }
        self.broken.fetch_add(1, Ordering::Relaxed);
        rx.close();
        for answer in pending {
            let _ = answer.send(Err(why.clone()));
        }
        while let Ok(item) = rx.try_recv() {
            let _ = item.answer.send(Err(why.clone()));
        }
    }

    /// Hands queued requests to openraft and its answers back, in order.
    /// `Ok`: the task may end (idle or replaced, nothing unanswered);
    /// `Err`: the stream is broken, the unanswered calls are in `pending`.
    async fn pump(
        &self,
        group: GroupId,
        task: u64,
        rx: &mut mpsc::UnboundedReceiver<Item<C>>,
        input: mpsc::UnboundedSender<AppendEntriesRequest<C>>,
        mut target: FeedTarget<C>,
        pending: &mut VecDeque<oneshot::Sender<StreamAnswer<C>>>,
    ) -> Result<(), String> {
        let idle = tokio::time::sleep(self.idle);
        tokio::pin!(idle);
        let mut replaced = false;
        loop {
            tokio::select! {
                biased;
                answer = target.answers.next(), if !pending.is_empty() => {
                    let Some(waiting) = pending.pop_front() else { continue };
                    match answer {
                        Some(Ok(result)) => {
                            if !matches!(result, Err(StreamAppendError::HigherVote(_))) {
                                (target.on_taken)();
                            }
                            let ended = result.as_ref().err().map(|e| e.to_string());
                            let _ = waiting.send(Ok(result));
                            if let Some(e) = ended {
                                return Err(format!("the follower's stream ended: {e}"));
                            }
                        }
                        Some(Err(fatal)) => {
                            let why = format!("the follower's group stopped: {fatal}");
                            let _ = waiting.send(Err(why.clone()));
                            return Err(why);
                        }
                        None => {
                            let why = "the follower's stream ended".to_owned();
                            let _ = waiting.send(Err(why.clone()));
                            return Err(why);
                        }
                    }
                    if pending.is_empty() {
                        if replaced {
                            return Ok(());
                        }
                        idle.as_mut().reset(tokio::time::Instant::now() + self.idle);
                    }
                }
                item = rx.recv(), if !replaced => match item {
                    Some(item) => {
                        let request = postcard::from_bytes::<AppendEntriesRequest<C>>(&item.request);
                        let request = match request {
                            Ok(request) => request,
                            Err(e) => {
                                let why = format!("bad request: {e}");
                                let _ = item.answer.send(Err(why.clone()));
                                return Err(why);
                            }
                        };
                        if input.send(request).is_err() {
                            let why = "the follower's stream stopped reading".to_owned();
                            let _ = item.answer.send(Err(why.clone()));
                            return Err(why);
                        }
                        pending.push_back(item.answer);
                        self.appends.fetch_add(1, Ordering::Relaxed);
                        self.max_outstanding.fetch_max(pending.len() as u64, Ordering::Relaxed);
                    }
                    // Replaced by a new stream: finish what was given.
                    None if pending.is_empty() => return Ok(()),
                    None => replaced = true,
                },
                () = &mut idle, if pending.is_empty() => {
                    if self.retire(group, task, rx) {
                        return Ok(());
                    }
                    idle.as_mut().reset(tokio::time::Instant::now() + self.idle);
                }
            }
        }
    }

    /// Ends an idle task unless a request was queued meanwhile: later
    /// requests of its stream start a new task.
    fn retire(&self, group: GroupId, task: u64, rx: &mpsc::UnboundedReceiver<Item<C>>) -> bool {
        let mut feeds = self.lock();
        if !rx.is_empty() {
            return false;
        }
        if let Some(feed) = feeds.get_mut(&group).filter(|f| f.task == task) {
            feed.tx = None;
        }
        true
    }
}

/// Counts a running feed task, however it ends.
struct Running(Arc<AtomicU64>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "append_feed_tests.rs"]
mod tests;
