//! The proposer task of a quorum queue: publishes go into the Raft log in
//! the order the queue took them, batched into as few entries as the flush
//! pace allows, and each publisher hears its outcome once its entry is
//! committed (or `released` when it cannot be). The time from proposal to
//! commit of each entry goes into the node's commit-latency histogram.

use openraft::async_runtime::watch::WatchReceiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::raft::ClientWriteResult;
use tokio::sync::oneshot;

use super::hold::ProposalHold;
use super::in_place::pin_box_in_place;
use super::leadership_watch::leads_without_quorum;
use super::publish_gate::PublishGate;
use super::queue::QuorumQueue;
use super::quiet::Quiet;
use super::task_queue::TaskReceiver;
use super::types::{Command, QueueRaft, QueueRaftHandle, ENQUEUE_BATCH_MAX};
use crate::latency::LatencyHistogram;
use crate::queue::{Outcome, PublishConfirm};

/// A publish waiting to be proposed.
pub(super) struct Proposal {
    pub(super) message: bytes::Bytes,
    pub(super) confirm: Option<PublishConfirm>,
    /// When it expires, ms since the epoch (0: never), stamped here by the
    /// leader (`queue/expiry.rs`).
    pub(super) expires_at: u64,
}

/// Raft entries of publishes proposed and not yet committed; publishes
/// that arrive while this many are in flight wait here and go into the
/// next entry together. (openraft 0.10 would take more: 8 was measured on
/// the 3-node cluster and made no difference out of the noise,
/// `docs/benchmarks.md`, "The commit path on openraft 0.10".)
const ENTRIES_IN_FLIGHT_MAX: usize = 2;
/// Largest sum of message bytes in one enqueue entry.
const ENQUEUE_BATCH_MAX_BYTES: usize = 4 * 1024 * 1024;

impl QuorumQueue {
    /// Hands `proposal` to the proposer, started by the first publish to
    /// this replica (followers and unused queues hold neither its queue
    /// nor its task) and again by the first after a quiet spell ended it
    /// (`task_queue::TaskSlot`). Hands it back once the proposer ended by
    /// itself (the group is shutting down).
    pub(super) fn propose(&self, proposal: Proposal) -> Result<(), Proposal> {
        self.proposal_tx.send(proposal, |rx| {
            tokio::spawn(propose_in_order(
                self.raft.clone(),
                rx,
                self.gate.clone(),
                self.publish_timeout,
                self.hold.clone(),
                self.shared.commit_latency.clone(),
                self.shared.quiet.clone(),
            ));
        })
    }
}

/// Propose publishes in the order the queue took them, batched into as few
/// log entries as the flush pace allows, so the log (and so the queue)
/// keeps publish order and many publishes share each fsync.
async fn propose_in_order(
    raft: QueueRaftHandle,
    mut proposals: TaskReceiver<Proposal>,
    gate: Arc<PublishGate>,
    timeout: Duration,
    hold: Arc<ProposalHold>,
    commit_latency: Arc<LatencyHistogram>,
    quiet: Arc<Quiet>,
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
                Some(p) => {
                    bytes += p.message.len();
                    batch.push(p);
                }
                None => break,
            }
        }
        if bytes > ENQUEUE_BATCH_MAX_BYTES && batch.len() > 1 {
            carry = batch.pop();
        }
        let expiring = batch.iter().any(|p| p.expires_at != 0);
        let expires_at: Vec<u64> = match expiring {
            true => batch.iter().map(|p| p.expires_at).collect(),
            false => Vec::new(),
        };
        let (messages, confirms): (Vec<bytes::Bytes>, Vec<Option<PublishConfirm>>) =
            batch.into_iter().map(|p| (p.message, p.confirm)).unzip();
        let command = match expiring {
            // Only a batch with an expiry pays for the stamps.
            true => Command::EnqueueExpiring {
                messages,
                expires_at,
            },
            false => Command::Enqueue { messages },
        };
        let n = confirms.len();
        let finish = {
            let gate = gate.clone();
            move |outcome: Outcome, confirms: Vec<Option<PublishConfirm>>| {
                for confirm in confirms {
                    gate.done();
                    if let Some(confirm) = confirm {
                        confirm.report(outcome);
                    }
                }
            }
        };
        // During a hand-off the batch waits (the log must stop growing).
        let Some(pass) = hold.pass().await else {
            finish(Outcome::Released, confirms);
            return;
        };
        let proposed_at = Instant::now();
        // Boxed, one allocation per entry: the submission's awaits are
        // ~1.4 KiB of state, which this task's future held for as long as
        // the queue lives, busy or not. In place (`in_place.rs`): not
        // built on the stack and copied.
        let submitted = pin_box_in_place!(super::submit::write_ff(&raft, command)).await;
        drop(pass);
        let committed = match submitted {
            Ok(committed) => committed,
            Err(error) => {
                tracing::debug!(%error, n, "publishes not proposed");
                finish(Outcome::Released, confirms);
                continue;
            }
        };
        let group = raft.clone();
        let quiet = quiet.clone();
        let commit_latency = commit_latency.clone();
        tokio::spawn(async move {
            let outcome = await_commit(&group, &quiet, committed, timeout, n).await;
            if outcome == Outcome::Accepted {
                commit_latency.observe(proposed_at.elapsed());
            }
            drop(slot);
            finish(outcome, confirms);
        });
    }
}

/// How long a waiter waits on its entry alone before it also follows the
/// group's metrics to notice a leader cut off from its quorum. openraft
/// sends the metrics at every turn of its core loop, several times per
/// entry, and each send woke every waiter that followed them; an entry
/// that commits within this (nearly every one) costs its waiter one
/// wake-up. A cut-off leader's publishes go back at most this much later.
const WAIT_BEFORE_WATCHING: Duration = Duration::from_millis(50);

/// What becomes of an entry's publishes. Bounded: without a quorum the
/// publishers hear `released` (not accepted; send again) instead of
/// waiting forever, and at once (after [`WAIT_BEFORE_WATCHING`]) when
/// check-quorum says this leader is cut off, so they can be sent to the
/// new leader. The entry may still commit (a duplicate when resent), never
/// a false `accepted`.
async fn await_commit(
    raft: &QueueRaftHandle,
    quiet: &Arc<Quiet>,
    mut committed: oneshot::Receiver<ClientWriteResult<QueueRaft>>,
    timeout: Duration,
    n: usize,
) -> Outcome {
    let deadline = tokio::time::Instant::now() + timeout;
    let waited = match tokio::time::timeout(WAIT_BEFORE_WATCHING.min(timeout), &mut committed).await
    {
        Ok(result) => Ok(result),
        Err(_) => tokio::select! {
            waited = tokio::time::timeout_at(deadline, &mut committed) => waited,
            () = quorum_lost(raft.clone(), quiet.clone()) => {
                tracing::debug!(n, "leader without a quorum: publishes released");
                return Outcome::Released;
            }
        },
    };
    match waited {
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
    }
}

/// Resolves once this replica leads without a quorum's acknowledgement
/// for twice the check-quorum window (`leadership_watch.rs`; a quiet
/// leader's window counts from its wake, `quiet.rs`); never if the group
/// shuts down first.
async fn quorum_lost(raft: QueueRaftHandle, quiet: Arc<Quiet>) {
    let mut metrics = raft.metrics();
    // Twice the serving window: an overloaded leader whose acknowledgements
    // are merely late (1,000 groups on two busy cores) keeps its publishes;
    // a cut-off one releases them a few seconds after it stopped serving.
    let window = raft.config().election_timeout_max * 2;
    loop {
        let cut_off = {
            let m = metrics.borrow_and_update();
            leads_without_quorum(&m, m.id, window, &quiet)
        };
        if cut_off {
            return;
        }
        if metrics.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}
