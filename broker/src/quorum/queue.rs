//! [`QuorumQueue`]: the [`Queue`] interface over one Raft group. A publish
//! is proposed to the group and confirmed `accepted` only once its entry is
//! committed (on a majority, fsynced) and applied. Consumers are served by
//! the leader's dispatcher; settlements are batched and replicated so a new
//! leader never redelivers what was already accepted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::ServerState;
use tokio::sync::mpsc;

use super::hold::ProposalHold;
use super::state_machine::Shared;
use super::types::{Command, QueueRaftHandle, SettleKind, ENQUEUE_BATCH_MAX};
use crate::codec::definitions::condition;
use crate::net::NodeId;
use crate::queue::dispatch::{Entry, Settled};
use crate::queue::{
    ConsumerId, Message, MessageId, Outcome, PublishConfirm, PublishStatus, Queue, QueueAddress,
    QueueError, QueueEventKind, QueueStats, Sink,
};

/// Most settlements proposed in one log entry.
const SETTLE_BATCH_MAX: usize = 4096;

/// Publishes in flight (proposed, not yet committed) and the publishers
/// waiting for room.
struct PublishGate {
    in_flight: AtomicUsize,
    max_in_flight: usize,
    waiters: Mutex<Vec<(Sink, u64)>>,
}

impl PublishGate {
    fn done(&self) {
        let before = self.in_flight.fetch_sub(1, Ordering::AcqRel);
        if before <= self.max_in_flight {
            let waiters: Vec<(Sink, u64)> =
                std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|p| p.into_inner()));
            for (sink, tag) in waiters {
                sink.send(tag, QueueEventKind::Capacity);
            }
        }
    }
}

/// A replicated queue: one openraft group.
pub struct QuorumQueue {
    address: QueueAddress,
    node_id: NodeId,
    pub(crate) raft: QueueRaftHandle,
    shared: Arc<Shared>,
    gate: Arc<PublishGate>,
    settles: mpsc::UnboundedSender<SettleMsg>,
    /// Publishes in order to the proposer task; bounded by `gate`.
    proposals: mpsc::UnboundedSender<Proposal>,
    /// While held, neither publishes nor settlements are proposed (they
    /// wait): a leadership hand-off needs the log to stop growing so the
    /// target can match it and win the vote (see `handoff.rs`).
    hold: Arc<ProposalHold>,
}

impl Drop for QuorumQueue {
    fn drop(&mut self) {
        // Batches held by a hand-off are answered `released`.
        self.hold.close();
    }
}

impl QuorumQueue {
    /// Serve the group behind `raft`; spawns the leadership (and snapshot
    /// request) watcher and the settlement batcher (both end when the Raft
    /// group shuts down or the queue is dropped).
    pub(crate) fn start(
        address: QueueAddress,
        node_id: NodeId,
        raft: QueueRaftHandle,
        shared: Arc<Shared>,
        max_in_flight: usize,
        publish_timeout: Duration,
    ) -> Arc<QuorumQueue> {
        let (settles, settle_rx) = mpsc::unbounded_channel();
        let (proposals, proposal_rx) = mpsc::unbounded_channel();
        let hold = Arc::new(ProposalHold::default());
        let gate = Arc::new(PublishGate {
            in_flight: AtomicUsize::new(0),
            max_in_flight,
            waiters: Mutex::new(Vec::new()),
        });
        tokio::spawn(propose_in_order(
            raft.clone(),
            proposal_rx,
            gate.clone(),
            publish_timeout,
            hold.clone(),
        ));
        tokio::spawn(watch_leadership(
            raft.clone(),
            shared.clone(),
            node_id,
            address.to_string(),
        ));
        tokio::spawn(replicate_settlements(raft.clone(), settle_rx, hold.clone()));
        Arc::new(QuorumQueue {
            address,
            node_id,
            raft,
            shared,
            gate,
            settles,
            proposals,
            hold,
        })
    }

    /// Stop proposing publishes and settlements; returns once every
    /// proposal already on its way has been submitted to openraft.
    /// Publishes taken meanwhile wait in order.
    pub(crate) async fn hold_proposals(&self) {
        self.hold.hold().await;
    }

    /// Resume proposing; a held batch proposed after the leadership moved
    /// is answered `released` as usual.
    pub(crate) fn release_proposals(&self) {
        self.hold.release();
    }

    fn not_leader(&self) -> QueueError {
        QueueError::NotLeader {
            queue: self.address.to_string(),
            leader: self.raft.metrics().borrow().current_leader,
        }
    }

    /// The node that leads the group, if known.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// This replica's log compaction: the index of its latest snapshot and
    /// the last index purged from its log.
    pub fn compaction(&self) -> (Option<u64>, Option<u64>) {
        let m = self.raft.metrics();
        let m = m.borrow();
        (m.snapshot.map(|l| l.index), m.purged.map(|l| l.index))
    }

    /// The group's voters in this replica's latest membership, sorted.
    pub fn voters(&self) -> Vec<NodeId> {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }
}

/// Whether the metrics say this node leads.
fn leads(raft: &QueueRaftHandle, node_id: NodeId) -> bool {
    let m = raft.metrics();
    let m = m.borrow();
    m.state == ServerState::Leader && m.current_leader == Some(node_id)
}

/// Switch the queue to leading or not: a node that becomes leader builds
/// its dispatcher from the replicated index; one that stops leading drops
/// it. Its routed consumers (links of this node's clients) are parked for
/// their routed queue to move to the new leader; the others (consumers of
/// forwarded links) are told `Closed`, which the forwarding server ships
/// back to their node, where they follow the leader the same way.
/// Idempotent; called by the watchers and before serving a link.
fn set_leading(shared: &Shared, leading: bool, node_id: NodeId, queue: &str) {
    let mut inner = shared.lock();
    if leading && !inner.leading {
        inner.leading = true;
        let entries: Vec<Entry> = inner
            .index
            .iter()
            .map(|(id, stored)| {
                let mut entry = Entry::new(*id, stored.message.clone());
                entry.delivery_count = stored.delivery_count;
                // The previous leader may have delivered it.
                entry.redelivered = true;
                entry
            })
            .collect();
        for entry in entries {
            inner.dispatcher.push_returned(entry);
        }
        tracing::info!(%queue, node_id, "leading");
    } else if !leading && inner.leading {
        inner.leading = false;
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
async fn watch_leadership(
    raft: QueueRaftHandle,
    shared: Arc<Shared>,
    node_id: NodeId,
    queue: String,
) {
    let mut metrics = raft.metrics();
    loop {
        let leading = {
            let m = metrics.borrow_and_update();
            m.state == ServerState::Leader && m.current_leader == Some(node_id)
        };
        set_leading(&shared, leading, node_id, &queue);
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

/// A publish waiting to be proposed.
struct Proposal {
    message: bytes::Bytes,
    confirm: Option<PublishConfirm>,
}

fn report(confirm: Option<PublishConfirm>, outcome: Outcome) {
    if let Some(confirm) = confirm {
        confirm.sink.send(
            confirm.tag,
            QueueEventKind::Published {
                token: confirm.token,
                outcome,
            },
        );
    }
}

/// Raft entries of publishes proposed and not yet committed. openraft 0.9
/// flushes a group's appends one at a time, so publishes that arrive while
/// an entry is being flushed wait here and go into the next entry together.
const ENTRIES_IN_FLIGHT_MAX: usize = 2;
/// Largest sum of message bytes in one enqueue entry.
const ENQUEUE_BATCH_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Propose publishes in the order the queue took them, batched into as few
/// log entries as the flush pace allows, so the log (and so the queue)
/// keeps publish order and many publishes share each fsync.
async fn propose_in_order(
    raft: QueueRaftHandle,
    mut proposals: mpsc::UnboundedReceiver<Proposal>,
    gate: Arc<PublishGate>,
    timeout: Duration,
    hold: Arc<ProposalHold>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(ENTRIES_IN_FLIGHT_MAX));
    let mut carry: Option<Proposal> = None;
    loop {
        let first = match carry.take() {
            Some(p) => p,
            None => match proposals.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        // Wait for a free slot first: publishes keep arriving meanwhile
        // and join this batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut bytes = first.message.len();
        let mut batch = vec![first];
        while batch.len() < ENQUEUE_BATCH_MAX && bytes < ENQUEUE_BATCH_MAX_BYTES {
            match proposals.try_recv() {
                Ok(p) => {
                    bytes += p.message.len();
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        if bytes > ENQUEUE_BATCH_MAX_BYTES && batch.len() > 1 {
            carry = batch.pop();
        }
        let (messages, confirms): (Vec<bytes::Bytes>, Vec<Option<PublishConfirm>>) =
            batch.into_iter().map(|p| (p.message, p.confirm)).unzip();
        let n = messages.len();
        let finish = {
            let gate = gate.clone();
            move |outcome: Outcome, confirms: Vec<Option<PublishConfirm>>| {
                for confirm in confirms {
                    gate.done();
                    report(confirm, outcome);
                }
            }
        };
        // During a hand-off the batch waits (the log must stop growing).
        let Some(pass) = hold.pass().await else {
            finish(Outcome::Released, confirms);
            return;
        };
        let submitted = raft.client_write_ff(Command::Enqueue { messages }).await;
        drop(pass);
        let committed = match submitted {
            Ok(committed) => committed,
            Err(error) => {
                tracing::debug!(%error, n, "publishes not proposed");
                finish(Outcome::Released, confirms);
                continue;
            }
        };
        tokio::spawn(async move {
            // Bounded: without a quorum the publishers hear `released`
            // (not accepted; send again) instead of waiting forever.
            let outcome = match tokio::time::timeout(timeout, committed).await {
                Ok(Ok(Ok(_))) => Outcome::Accepted,
                Ok(Ok(Err(error))) => {
                    tracing::debug!(%error, "publishes not committed");
                    Outcome::Released
                }
                Ok(Err(_)) => Outcome::Released,
                Err(_) => {
                    tracing::warn!("publishes not committed within {timeout:?}: no quorum?");
                    Outcome::Released
                }
            };
            drop(slot);
            finish(outcome, confirms);
        });
    }
}

/// Propose settlements in batches: one log entry per batch and kind.
async fn replicate_settlements(
    raft: QueueRaftHandle,
    mut rx: mpsc::UnboundedReceiver<SettleMsg>,
    hold: Arc<ProposalHold>,
) {
    while let Some(first) = rx.recv().await {
        let mut remove = Vec::new();
        let mut failed = Vec::new();
        let mut flushed = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                SettleMsg::Settle(id, SettleKind::Remove) => remove.push(id),
                SettleMsg::Settle(id, SettleKind::Failed) => failed.push(id),
                SettleMsg::Flush(done) => {
                    flushed.push(done);
                    break;
                }
            }
            if remove.len() + failed.len() >= SETTLE_BATCH_MAX {
                break;
            }
            next = rx.try_recv().ok();
        }
        for (ids, kind) in [(remove, SettleKind::Remove), (failed, SettleKind::Failed)] {
            if ids.is_empty() {
                continue;
            }
            let Some(pass) = hold.pass().await else {
                return;
            };
            let submitted = raft.client_write_ff(Command::Settle { ids, kind }).await;
            drop(pass);
            // A failed proposal (leadership lost) is harmless: the new
            // leader still holds the messages and delivers them again.
            let committed = match submitted {
                Ok(committed) => committed.await.map_err(|e| e.to_string()),
                Err(error) => Err(error.to_string()),
            };
            if let Err(error) = committed.and_then(|r| r.map(|_| ()).map_err(|e| e.to_string())) {
                tracing::debug!(%error, "settlement not replicated");
            }
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
}

/// What the settlement batcher receives.
enum SettleMsg {
    /// Replicate this settlement.
    Settle(MessageId, SettleKind),
    /// Answer once every settlement before this one is committed.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl QuorumQueue {
    /// Wait (bounded) until the settlements taken so far are replicated, so
    /// a graceful stop does not make accepted messages come back.
    pub(crate) async fn flush_settlements(&self, limit: Duration) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.settles.send(SettleMsg::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(limit, wait).await;
        }
    }
}

/// What [`QuorumQueue::try_publish`] hands back when this node does not
/// lead: the message and its confirm, to be sent where the leader is.
pub(crate) type Unpublished = (QueueError, Message, Option<PublishConfirm>);

impl QuorumQueue {
    /// Bring the leading flag up to date with the Raft metrics now, rather
    /// than when the watcher task gets to run; returns whether this node
    /// leads.
    pub(crate) fn sync_leadership(&self) -> bool {
        set_leading(
            &self.shared,
            leads(&self.raft, self.node_id),
            self.node_id,
            &self.address.to_string(),
        );
        self.shared.lock().leading
    }

    /// Whether this node leads (as last synced).
    pub(crate) fn is_leading(&self) -> bool {
        self.shared.lock().leading
    }

    /// A watch of the group's Raft metrics (leadership changes).
    pub(crate) fn metrics(
        &self,
    ) -> tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, openraft::BasicNode>> {
        self.raft.metrics()
    }

    /// Publish, or hand the message and its confirm back untouched when
    /// this node does not lead, so the caller can send it to the leader.
    pub(crate) fn try_publish(
        &self,
        message: Message,
        confirm: Option<PublishConfirm>,
    ) -> Result<PublishStatus, Unpublished> {
        if !self.shared.lock().leading && !self.sync_leadership() {
            return Err((self.not_leader(), message, confirm));
        }
        self.publish(message, confirm)
            .map_err(|e| (e, Message::empty(), None))
    }

    /// Add the consumer of a routed link (a client of this node), starting
    /// at the link's delivery-count and credit limit. Unlike a plain
    /// consumer it is parked, not closed, when this node stops leading.
    pub(crate) fn subscribe_routed(
        &self,
        sink: Sink,
        tag: u64,
        delivery_count: u32,
        credit_limit: u32,
        drain: bool,
    ) -> Result<ConsumerId, QueueError> {
        let mut inner = self.shared.lock();
        if !inner.leading {
            drop(inner);
            return Err(self.not_leader());
        }
        let id = inner.dispatcher.subscribe_at(sink, tag, delivery_count);
        inner.routed.insert(id);
        inner.dispatcher.flow(id, credit_limit, drain);
        Ok(id)
    }

    /// Take a routed consumer out of this queue, wherever it is (parked
    /// after a step-down, or still served here): its delivery-count and
    /// credit limit, so it can be moved to another leader. Its unsettled
    /// messages return to the queue.
    pub(crate) fn release_routed(&self, consumer: ConsumerId) -> Option<(u32, u32)> {
        let mut inner = self.shared.lock();
        if let Some(position) = inner.orphans.remove(&consumer) {
            return Some(position);
        }
        inner.routed.remove(&consumer);
        let position = inner.dispatcher.consumer_position(consumer)?;
        inner.dispatcher.unsubscribe(consumer);
        Some(position)
    }
}

impl Queue for QuorumQueue {
    fn address(&self) -> &QueueAddress {
        &self.address
    }

    fn serves_here(&self) -> Result<(), QueueError> {
        // Do not wait for the watcher task to notice a fresh election.
        set_leading(
            &self.shared,
            leads(&self.raft, self.node_id),
            self.node_id,
            &self.address.to_string(),
        );
        if self.shared.lock().leading {
            Ok(())
        } else {
            Err(self.not_leader())
        }
    }

    fn publish(
        &self,
        message: Message,
        confirm: Option<PublishConfirm>,
    ) -> Result<PublishStatus, QueueError> {
        if !self.shared.lock().leading {
            self.serves_here()?;
        }
        self.gate.in_flight.fetch_add(1, Ordering::AcqRel);
        let proposal = Proposal {
            message: message.bytes,
            confirm,
        };
        if let Err(mpsc::error::SendError(proposal)) = self.proposals.send(proposal) {
            // The proposer ended (the group is shutting down).
            self.gate.done();
            report(proposal.confirm, Outcome::Released);
            return Err(QueueError::Gone(self.address.to_string()));
        }
        Ok(PublishStatus::Pending)
    }

    fn has_capacity(&self, sink: &Sink, tag: u64) -> bool {
        if self.gate.in_flight.load(Ordering::Acquire) < self.gate.max_in_flight {
            return true;
        }
        let mut waiters = self.gate.waiters.lock().unwrap_or_else(|p| p.into_inner());
        if !waiters
            .iter()
            .any(|(s, t)| *t == tag && s.same_connection(sink))
        {
            waiters.push((sink.clone(), tag));
        }
        // Re-check: a completion may have drained the waiters meanwhile.
        self.gate.in_flight.load(Ordering::Acquire) < self.gate.max_in_flight
    }

    fn subscribe(&self, sink: Sink, tag: u64) -> Result<ConsumerId, QueueError> {
        self.serves_here()?;
        let mut inner = self.shared.lock();
        if !inner.leading {
            drop(inner);
            return Err(self.not_leader());
        }
        Ok(inner.dispatcher.subscribe(sink, tag))
    }

    fn flow(&self, consumer: ConsumerId, credit_limit: u32, drain: bool) {
        self.shared
            .lock()
            .dispatcher
            .flow(consumer, credit_limit, drain);
    }

    fn settle(&self, consumer: ConsumerId, message: MessageId, outcome: Outcome) {
        let settled = self
            .shared
            .lock()
            .dispatcher
            .settle(consumer, message, outcome);
        let kind = match (settled, outcome) {
            (Settled::Removed(_), _) => SettleKind::Remove,
            (
                Settled::Returned,
                Outcome::Modified {
                    delivery_failed: true,
                    ..
                },
            ) => SettleKind::Failed,
            (Settled::Unknown, Outcome::Accepted | Outcome::Rejected) => {
                // Delivered by an earlier leader (the link followed the
                // leadership here) or by another consumer: ids are
                // replicated, so settle it by id rather than deliver it
                // again. Redelivery stays possible, loss does not.
                let mut inner = self.shared.lock();
                if !inner.leading || !inner.index.contains(message) {
                    return;
                }
                inner.dispatcher.remove(message);
                SettleKind::Remove
            }
            _ => return,
        };
        let _ = self.settles.send(SettleMsg::Settle(message, kind));
    }

    fn undeliver(&self, consumer: ConsumerId, message: MessageId) {
        self.shared.lock().dispatcher.undeliver(consumer, message);
    }

    fn unsubscribe(&self, consumer: ConsumerId) {
        let mut inner = self.shared.lock();
        inner.routed.remove(&consumer);
        inner.orphans.remove(&consumer);
        inner.dispatcher.unsubscribe(consumer);
    }

    fn stats(&self) -> QueueStats {
        let inner = self.shared.lock();
        QueueStats {
            address: self.address.to_string(),
            ready: if inner.leading {
                inner.dispatcher.n_ready()
            } else {
                inner.index.len()
            },
            unsettled: inner.dispatcher.n_out(),
            consumers: inner.dispatcher.n_consumers(),
        }
    }
}
