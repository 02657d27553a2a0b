//! [`QuorumQueue`]: the [`Queue`] interface over one Raft group. A publish
//! is proposed to the group and confirmed `accepted` only once its entry is
//! committed (on a majority, fsynced) and applied. Consumers are served by
//! the leader's dispatcher; settlements are batched and replicated so a new
//! leader never redelivers what was already accepted.

use openraft::async_runtime::watch::WatchReceiver;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::dead_letter_outbox::DeadLetterStart;
use super::hold::ProposalHold;
use super::leader_contact::LeaderContact;
use super::leadership_watch::{leadership, leads_without_quorum, set_leading, watch_leadership};
use super::proposer::Proposal;
use super::publish_gate::PublishGate;
use super::settle_batcher::SettleMsg;
use super::state_machine::Shared;
use super::task_queue::TaskSlot;
use super::types::{QueueRaftHandle, SettleKind};
use crate::net::NodeId;
use crate::queue::dead_letter::DeathReason;
use crate::queue::dispatch::Settled;
use crate::queue::ResourceAlarm;
use crate::queue::{
    ConsumerId, ConsumerOptions, Message, MessageId, Outcome, PublishConfirm, PublishStatus, Queue,
    QueueAddress, QueueError, QueueEventKind, QueuePolicy, QueueStats, Sink, TxnPart,
};
use crate::raft::{RaftStatus, ServerMetricsWatch};

/// A replicated queue: one openraft group.
pub struct QuorumQueue {
    address: QueueAddress,
    pub(super) node_id: NodeId,
    pub(crate) raft: QueueRaftHandle,
    pub(super) shared: Arc<Shared>,
    pub(super) gate: Arc<PublishGate>,
    /// Settlements to the batcher task, both made by the first settlement
    /// and ended while the queue is quiet (`settle_batcher.rs`,
    /// [`QuorumQueue::send_settle`]).
    pub(super) settle_tx: TaskSlot<SettleMsg>,
    /// Publishes in order to the proposer task, bounded by `gate`; both
    /// made by the first publish and ended while the queue is quiet
    /// (`proposer.rs`, [`QuorumQueue::propose`]).
    pub(super) proposal_tx: TaskSlot<Proposal>,
    /// While held, neither publishes nor settlements are proposed (they
    /// wait): a leadership hand-off needs the log to stop growing so the
    /// target can match it and win the vote (see `handoff.rs`).
    pub(super) hold: Arc<ProposalHold>,
    /// The node's resource alarm: no new publisher credit while raised.
    alarm: Arc<ResourceAlarm>,
    /// When this replica last took an AppendEntries from its leader.
    pub(super) contact: LeaderContact,
    /// Whether the policy has a reject-publish limit: without one, asking
    /// for credit takes no lock for it (`length_limit.rs`).
    pub(super) rejects_publish: std::sync::atomic::AtomicBool,
    /// How long a proposal may wait for its commit before its publisher
    /// hears `released`.
    pub(super) publish_timeout: Duration,
}

impl Drop for QuorumQueue {
    fn drop(&mut self) {
        // Batches held by a hand-off are answered `released`.
        self.hold.close();
    }
}

impl QuorumQueue {
    /// Serve the group behind `raft`; spawns the leadership (snapshot
    /// request, dead-letter start) watcher, which ends when the Raft group
    /// shuts down. The proposer and the settlement batcher start
    /// with the first publish and settlement (most replicas of an idle
    /// group never need them) and end when the queue is dropped.
    pub(crate) fn start(
        address: QueueAddress,
        node_id: NodeId,
        raft: QueueRaftHandle,
        shared: Arc<Shared>,
        max_in_flight: usize,
        publish_timeout: Duration,
        alarm: Arc<ResourceAlarm>,
    ) -> Arc<QuorumQueue> {
        let hold = Arc::new(ProposalHold::default());
        let gate = Arc::new(PublishGate {
            in_flight: AtomicUsize::new(0),
            max_in_flight,
            waiters: Mutex::new(Vec::new()),
        });
        tokio::spawn(watch_leadership(
            raft.clone(),
            shared.clone(),
            node_id,
            address.to_string(),
            Some(DeadLetterStart {
                hold: hold.clone(),
                address: address.clone(),
            }),
        ));
        Arc::new(QuorumQueue {
            address,
            node_id,
            raft,
            shared,
            gate,
            settle_tx: TaskSlot::default(),
            proposal_tx: TaskSlot::default(),
            hold,
            alarm,
            contact: LeaderContact::default(),
            rejects_publish: std::sync::atomic::AtomicBool::new(false),
            publish_timeout,
        })
    }

    /// Put the queue's effective policy in force on this replica. Only a
    /// leader decides with it (its decisions go into the log).
    pub(crate) fn set_policy(&self, policy: Option<Arc<QueuePolicy>>) {
        let rejects = policy.as_ref().is_some_and(|p| p.rejects_publish());
        let mut inner = self.shared.lock();
        inner.dispatcher.set_policy(policy);
        self.rejects_publish.store(rejects, Ordering::Release);
        // A raised or removed limit may make room.
        inner.wake_room_waiters();
        // A lowered drop-head limit may want a sweep.
        super::sweep_list::list_if_wanted(&self.shared, &mut inner);
    }

    /// The queue's effective policy on this node.
    pub fn policy(&self) -> Option<Arc<QueuePolicy>> {
        self.shared.lock().dispatcher.policy().cloned()
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

    /// Settle a delivery in the leader's dispatcher; what the log must
    /// record of it, if anything (a release needs no entry).
    pub(super) fn settle_here(
        &self,
        consumer: ConsumerId,
        message: MessageId,
        outcome: Outcome,
    ) -> Option<(SettleKind, Option<DeathReason>)> {
        let settled = {
            let mut inner = self.shared.lock();
            let settled = inner.dispatcher.settle(consumer, message, outcome);
            inner.refill(&self.shared.queue);
            settled
        };
        let rejected = (outcome == Outcome::Rejected).then_some(DeathReason::Rejected);
        match (settled, outcome) {
            (Settled::Removed(_), _) => Some((SettleKind::Remove, rejected)),
            // The delivery limit (the policy's) was reached: the message
            // leaves the queue on every replica (dead-lettered or dropped).
            (Settled::AtLimit(_), _) => {
                Some((SettleKind::Remove, Some(DeathReason::DeliveryLimit)))
            }
            (
                Settled::Returned,
                Outcome::Modified {
                    delivery_failed: true,
                    ..
                },
            ) => Some((SettleKind::Failed, None)),
            (Settled::Unknown, Outcome::Accepted | Outcome::Rejected) => {
                // Delivered by an earlier leader (the link followed the
                // leadership here) or by another consumer: ids are
                // replicated, so settle it by id rather than deliver it
                // again. Redelivery stays possible, loss does not.
                let mut inner = self.shared.lock();
                if !inner.leading || !inner.index.contains(message) {
                    return None;
                }
                inner.dispatcher.remove(message);
                Some((SettleKind::Remove, rejected))
            }
            _ => None,
        }
    }

    pub(super) fn not_leader(&self) -> QueueError {
        QueueError::NotLeader {
            queue: self.address.to_string(),
            leader: self.raft.metrics().borrow_watched().current_leader,
        }
    }

    /// The index of the last log entry this replica applied.
    pub fn applied_index(&self) -> Option<u64> {
        self.raft
            .metrics()
            .borrow_watched()
            .last_applied
            .map(|l| l.index)
    }

    /// The node that leads the group, if known.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.server_metrics().borrow_watched().current_leader
    }

    /// `leader` reached this replica just now (its AppendEntries, a
    /// heartbeat included, was taken).
    pub(crate) fn note_leader_contact(&self, leader: NodeId) {
        self.contact.note(leader);
    }

    /// The leader this replica last heard from and how long ago, if it
    /// ever did: a follower's evidence that its leader is alive.
    /// The last contact with the leader, as heard (not vouched for).
    pub(super) fn heard_contact(&self) -> Option<(NodeId, Duration)> {
        self.contact.last()
    }

    /// Node-level liveness vouches for a leader heard in its node's
    /// current incarnation whose node is alive (`quiet.rs`).
    pub(crate) fn leader_contact(&self) -> Option<(NodeId, Duration)> {
        let (leader, age) = self.contact.last()?;
        let vouched = self
            .shared
            .quiet
            .liveness()
            .and_then(|l| l.vouch(leader, age));
        Some((leader, vouched.map_or(age, |heard| heard.min(age))))
    }

    /// Whether openraft makes this replica the leader while no quorum has acknowledged
    /// it for the check-quorum window: it is cut off and does not serve
    /// (`leadership_watch.rs`).
    pub(crate) fn leads_without_quorum(&self) -> bool {
        leads_without_quorum(
            &self.raft.metrics().borrow_watched(),
            self.node_id,
            self.raft.config().election_timeout_max,
            &self.shared.quiet,
        )
    }

    /// This replica's log compaction: the index of its latest snapshot and
    /// the last index purged from its log.
    pub fn compaction(&self) -> (Option<u64>, Option<u64>) {
        let m = self.raft.metrics();
        let m = m.borrow_watched();
        (m.snapshot.map(|l| l.index), m.purged.map(|l| l.index))
    }

    /// The group's voters in this replica's latest membership, sorted.
    pub fn voters(&self) -> Vec<NodeId> {
        self.raft
            .metrics()
            .borrow_watched()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }

    /// The group's term, log and applied index and leader on this replica.
    pub fn raft_status(&self) -> RaftStatus {
        RaftStatus::of(&self.raft.metrics().borrow_watched())
    }

    /// Times this replica saw the group's leader change since it opened (the first counts).
    pub fn leader_changes(&self) -> u64 {
        self.shared.leader_changes.load(Ordering::Relaxed)
    }
}

/// What [`QuorumQueue::try_publish`] hands back when this node does not
/// lead: the message and its confirm, to be sent where the leader is.
pub(crate) type Unpublished = (QueueError, Message, Option<PublishConfirm>);

impl QuorumQueue {
    /// Bring the leading flag up to date with the Raft metrics now, rather than
    /// when the watcher task gets to run; returns whether this node leads.
    pub(crate) fn sync_leadership(&self) -> bool {
        set_leading(
            &self.shared,
            leadership(&self.raft, self.node_id, &self.shared.quiet),
            self.raft.metrics().borrow_watched().current_term,
            self.node_id,
            &self.address.to_string(),
        );
        let inner = self.shared.lock();
        // A replica that cannot read a body back does not serve here, so
        // links look for the queue elsewhere instead of retrying here.
        inner.leading && inner.damaged().is_none()
    }

    /// Whether this node leads (as last synced).
    pub(crate) fn is_leading(&self) -> bool {
        self.shared.lock().leading
    }

    /// A watch of the group's Raft metrics (every turn of its core).
    pub(crate) fn metrics(&self) -> crate::raft::MetricsWatch<super::types::QueueRaft> {
        self.raft.metrics()
    }
    /// A watch of the group's state, leader and vote (only when they move).
    pub(crate) fn server_metrics(&self) -> ServerMetricsWatch<super::types::QueueRaft> {
        self.raft.server_metrics()
    }

    /// Notified when this replica starts or stops serving as leader (one waiter; kept till then).
    pub(crate) fn leading_flips(&self) -> Arc<tokio::sync::Notify> {
        self.shared.leading_flips.clone()
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
    /// at the link's delivery-count and credit limit, with its options.
    /// Unlike a plain consumer it is parked, not closed, when this node
    /// stops leading (its routed queue keeps the options for the next).
    pub(crate) fn subscribe_routed(
        &self,
        sink: Sink,
        tag: u64,
        (delivery_count, credit_limit, drain): (u32, u32, bool),
        options: ConsumerOptions,
    ) -> Result<ConsumerId, QueueError> {
        let mut inner = self.shared.lock();
        if inner.deleted {
            return Err(QueueError::Gone(self.address.to_string()));
        }
        if !inner.leading {
            drop(inner);
            return Err(self.not_leader());
        }
        if let Some(damaged) = inner.damaged() {
            return Err(QueueError::Refused(damaged.to_string()));
        }
        let id = inner
            .dispatcher
            .subscribe_at(sink, tag, delivery_count, options);
        inner.routed.insert(id);
        inner.refill(&self.shared.queue);
        inner.dispatcher.flow(id, credit_limit, drain);
        inner.refill(&self.shared.queue);
        Ok(id)
    }

    /// A consumer's registration stamp (its place in the consumer order),
    /// on a queue with a single active consumer: what its routed queue
    /// brings to the next leader. `None` on other queues, so that their
    /// consumers still move with a plain `Subscribe` (which nodes of older
    /// versions read).
    pub(crate) fn stamp_of(&self, consumer: ConsumerId) -> Option<u64> {
        let inner = self.shared.lock();
        if !inner.dispatcher.single_active() {
            return None;
        }
        inner.dispatcher.stamp(consumer)
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
            leadership(&self.raft, self.node_id, &self.shared.quiet),
            self.raft.metrics().borrow_watched().current_term,
            self.node_id,
            &self.address.to_string(),
        );
        let inner = self.shared.lock();
        if inner.deleted {
            return Err(QueueError::Gone(self.address.to_string()));
        }
        if let Some(damaged) = inner.damaged() {
            return Err(QueueError::Refused(damaged.to_string()));
        }
        if inner.leading {
            Ok(())
        } else {
            drop(inner);
            Err(self.not_leader())
        }
    }

    fn publish(
        &self,
        message: Message,
        confirm: Option<PublishConfirm>,
    ) -> Result<PublishStatus, QueueError> {
        let expires_at = {
            let mut inner = self.shared.lock();
            if inner.deleted {
                return Err(QueueError::Gone(self.address.to_string()));
            }
            if !inner.leading {
                drop(inner);
                self.serves_here()?;
                inner = self.shared.lock();
            }
            // The leader decides with its policy (`length_limit.rs`,
            // `queue/expiry.rs`); the log records only the outcome.
            let in_flight = self.gate.in_flight.load(Ordering::Acquire);
            if inner.refuses(in_flight, message.len() as u64) {
                drop(inner);
                if let Some(confirm) = confirm {
                    confirm.report(Outcome::Rejected);
                }
                return Ok(PublishStatus::Pending);
            }
            crate::queue::expiry::expires_at(&message, inner.dispatcher.policy().map(|p| &**p))
        };
        self.gate.in_flight.fetch_add(1, Ordering::AcqRel);
        let proposal = Proposal {
            message: message.bytes,
            confirm,
            expires_at,
        };
        if let Err(proposal) = self.propose(proposal) {
            // The proposer ended (the group is shutting down).
            self.gate.done();
            if let Some(confirm) = proposal.confirm {
                confirm.report(Outcome::Released);
            }
            return Err(QueueError::Gone(self.address.to_string()));
        }
        Ok(PublishStatus::Pending)
    }

    fn has_capacity(&self, sink: &Sink, tag: u64) -> bool {
        if self.alarm.is_raised() {
            self.alarm.wait(sink, tag);
            // Re-check: it may have cleared before the wait was recorded.
            if self.alarm.is_raised() {
                return false;
            }
        }
        if !self.policy_room(sink, tag) {
            return false;
        }
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

    fn subscribe(
        &self,
        sink: Sink,
        tag: u64,
        options: ConsumerOptions,
    ) -> Result<ConsumerId, QueueError> {
        self.serves_here()?;
        let mut inner = self.shared.lock();
        if !inner.leading {
            drop(inner);
            return Err(self.not_leader());
        }
        if let Some(damaged) = inner.damaged() {
            return Err(QueueError::Refused(damaged.to_string()));
        }
        let new = options.registered.is_none();
        let id = inner.dispatcher.subscribe(sink.clone(), tag, options);
        // A forwarded consumer's node keeps its place for the next leader.
        if let (true, true, Some(stamp)) = (
            new,
            inner.dispatcher.single_active(),
            inner.dispatcher.stamp(id),
        ) {
            sink.send(tag, QueueEventKind::Registered { stamp });
        }
        Ok(id)
    }

    fn flow(&self, consumer: ConsumerId, credit_limit: u32, drain: bool) {
        let mut inner = self.shared.lock();
        if drain {
            // A drain must see every message there is, not only the window.
            if let Some((delivery_count, _)) = inner.dispatcher.consumer_position(consumer) {
                let credit = credit_limit.wrapping_sub(delivery_count);
                if (credit as i32) > 0 {
                    inner.refill_for_drain(&self.shared.queue, credit as usize);
                }
            }
        }
        inner.refill(&self.shared.queue);
        inner.dispatcher.flow(consumer, credit_limit, drain);
        inner.refill(&self.shared.queue);
    }

    fn settle(&self, consumer: ConsumerId, message: MessageId, outcome: Outcome) {
        match self.settle_here(consumer, message, outcome) {
            Some((_, Some(reason))) if self.dead_letters_on() => {
                let _ = self.send_settle(SettleMsg::DeadLetter(message, reason));
            }
            Some((kind, _)) => {
                let _ = self.send_settle(SettleMsg::Settle(message, kind));
            }
            None => {}
        }
    }

    fn unsubscribe(&self, consumer: ConsumerId) {
        let (counted, over) = {
            let mut inner = self.shared.lock();
            inner.routed.remove(&consumer);
            inner.orphans.remove(&consumer);
            // With a delivery limit, leaving without settling counts a
            // failure, replicated like a modified(delivery-failed).
            let (counted, over) = inner.dispatcher.count_abandoned(consumer);
            inner.dispatcher.unsubscribe(consumer);
            (counted, over)
        };
        self.abandoned(counted, over);
    }

    fn has_room_for(&self, messages: usize, bytes: u64) -> bool {
        // The node's disk and memory alarms, and the policy's
        // reject-publish limit (`length_limit.rs`).
        let in_flight = self.gate.in_flight.load(Ordering::Acquire);
        !self.alarm.is_raised()
            && (!self.rejects_publish.load(Ordering::Acquire)
                || self.shared.lock().has_room_for(in_flight, messages, bytes))
    }

    fn commit(&self, part: TxnPart, confirm: PublishConfirm) -> Result<PublishStatus, QueueError> {
        self.commit_part(part, confirm)
    }

    fn stats(&self) -> QueueStats {
        let inner = self.shared.lock();
        QueueStats {
            address: self.address.to_string(),
            // The dispatcher holds a window of the queue; the index all of it.
            ready: if inner.leading {
                inner.index.len().saturating_sub(inner.dispatcher.n_out())
            } else {
                inner.index.len()
            },
            unsettled: inner.dispatcher.n_out(),
            consumers: inner.dispatcher.n_consumers(),
            bytes: inner.index.bytes(),
            paged_bytes: inner
                .index
                .bytes()
                .saturating_sub(inner.index.resident_bytes()),
            published_total: inner.published_total,
            delivered_total: inner.dispatcher.delivered_total(),
            acknowledged_total: inner.dispatcher.acknowledged_total(),
        }
    }
}
