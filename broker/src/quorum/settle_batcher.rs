//! The settlement batcher of a quorum queue: settlements are applied to
//! the leader's dispatcher at once and replicated here in batches (one log
//! entry per batch and kind), so a new leader neither redelivers what was
//! accepted nor forgets a failed attempt. Dead-letterings go the same way,
//! as `Command::DeadLetter` entries.
//!
//! A batch whose proposal fails (this node lost the leadership on the way)
//! is not dropped: the messages it settled are still in the queue on the
//! other replicas, and the new leader would deliver them again. It is
//! proposed again if this node leads again, else its accepted and rejected
//! settlements are handed to the new leader by message id
//! (`PeerRequests::ask_to_settle`); retried for `RETRY_FOR`. Failed
//! delivery attempts (`SettleKind::Failed`), dead-letterings for other
//! reasons than a rejection and discards are not handed over: the new
//! leader decides about those messages again.

use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use super::hold::ProposalHold;
use super::in_place::pin_box_in_place;
use super::queue::QuorumQueue;
use super::state_machine::Shared;
use super::task_queue::TaskReceiver;
use super::types::{Command, QueueRaftHandle, SettleKind};
use crate::queue::dead_letter::DeathReason;
use crate::queue::{ConsumerId, MessageId, Outcome};

/// A random salt for a `DeadLetter` entry (std seeds `RandomState` from
/// the OS's randomness).
fn random_salt() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// Most settlements proposed in one log entry.
const SETTLE_BATCH_MAX: usize = 4096;
/// How long a batch whose proposal failed is retried.
const RETRY_FOR: Duration = Duration::from_secs(30);
/// Pause between retries, and bound on one request to another node.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
const ASK_LIMIT: Duration = Duration::from_secs(1);

/// Propose settlements in batches: one log entry per batch and kind.
async fn replicate_settlements(
    raft: QueueRaftHandle,
    mut rx: TaskReceiver<SettleMsg>,
    hold: Arc<ProposalHold>,
    shared: Arc<Shared>,
) {
    while let Some(first) = rx.recv().await {
        let mut remove = Vec::new();
        let mut failed = Vec::new();
        let mut dead = Vec::new();
        let mut flushed = Vec::new();
        let mut discards = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                SettleMsg::Settle(id, SettleKind::Remove) => remove.push(id),
                SettleMsg::Settle(id, SettleKind::Failed) => failed.push(id),
                SettleMsg::DeadLetter(id, reason) => dead.push((id, reason)),
                SettleMsg::Flush(done) => {
                    flushed.push(done);
                    break;
                }
                SettleMsg::Discard(ids, reason) => {
                    discards.push(Command::Discard { ids, reason });
                    break;
                }
            }
            if remove.len() + failed.len() + dead.len() >= SETTLE_BATCH_MAX {
                break;
            }
            next = rx.try_recv();
        }
        let mut commands: Vec<Command> =
            [(remove, SettleKind::Remove), (failed, SettleKind::Failed)]
                .into_iter()
                .filter(|(ids, _)| !ids.is_empty())
                .map(|(ids, kind)| Command::Settle { ids, kind })
                .chain(discards)
                .collect();
        if !dead.is_empty() {
            commands.push(Command::DeadLetter {
                ids: dead,
                salt: random_salt(),
            });
        }
        for command in commands {
            // Boxed, one allocation per batch: replicating is ~1.8 KiB of
            // await state, which this task (one per queue led with a
            // consumer) held while it waited for settlements. In place
            // (`in_place.rs`): not built on the stack and copied.
            if !pin_box_in_place!(replicate(&raft, &hold, &shared, command)).await {
                return;
            }
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
}

/// Propose `command` until it is committed here or handed to the leader
/// (see the module documentation); `false` once proposals are closed (the
/// queue is gone: nothing more is retried, nor the group held).
async fn replicate(
    raft: &QueueRaftHandle,
    hold: &ProposalHold,
    shared: &Shared,
    command: Command,
) -> bool {
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    let handed = hand_over(&command);
    let mut propose = true;
    loop {
        let Some(pass) = hold.pass().await else {
            return false;
        };
        if propose {
            let submitted = super::submit::write_ff(raft, command.clone()).await;
            drop(pass);
            let committed = match submitted {
                Ok(committed) => committed.await.map_err(|e| e.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match committed.and_then(|r| r.map(|_| ()).map_err(|e| e.to_string())) {
                Ok(()) => return true,
                Err(error) => {
                    tracing::debug!(queue = %shared.queue, %error, "settlements not replicated")
                }
            }
        } else {
            drop(pass);
        }
        let failed_attempts = matches!(
            command,
            Command::Settle {
                kind: SettleKind::Failed,
                ..
            }
        );
        if failed_attempts || tokio::time::Instant::now() >= deadline {
            tracing::debug!(queue = %shared.queue, "settlements dropped; the leader delivers them again");
            return true;
        }
        tokio::time::sleep(RETRY_PAUSE).await;
        let (me, leader) = {
            let metrics = raft.metrics();
            let m = metrics.borrow_watched();
            (m.id, m.current_leader)
        };
        // Leading again: propose it again. Else hand what can be handed
        // over to the leader, once one is known; with nothing to hand
        // over, waiting would only hold up the settlements behind it.
        propose = leader == Some(me);
        if !propose && handed.is_empty() {
            tracing::debug!(queue = %shared.queue, "not leading; the leader decides again");
            return true;
        }
        let peers = shared.peers.get();
        if let (Some(leader), false, Some(peers)) = (leader, propose, peers) {
            let address = shared.queue.clone();
            let asked = peers.ask_to_settle(leader, address, handed.clone(), ASK_LIMIT);
            if let Ok((true, _)) = asked.await {
                tracing::debug!(queue = %shared.queue, leader, "settlements handed to the new leader");
                return true;
            }
        }
    }
}

/// The settlements of `command` a new leader can take by message id.
fn hand_over(command: &Command) -> Vec<(MessageId, Outcome)> {
    match command {
        Command::Settle {
            ids,
            kind: SettleKind::Remove,
        } => ids.iter().map(|&id| (id, Outcome::Accepted)).collect(),
        Command::DeadLetter { ids, .. } => ids
            .iter()
            .filter(|(_, reason)| *reason == DeathReason::Rejected)
            .map(|&(id, _)| (id, Outcome::Rejected))
            .collect(),
        _ => Vec::new(),
    }
}

/// What the settlement batcher receives.
pub(super) enum SettleMsg {
    /// Replicate this settlement.
    Settle(MessageId, SettleKind),
    /// Dead-letter this message (it left the leader's dispatcher): it
    /// moves to the outbox (`dead_letter_outbox.rs`).
    DeadLetter(MessageId, DeathReason),
    /// Answer once every settlement before this one is committed.
    Flush(tokio::sync::oneshot::Sender<()>),
    /// Replicate the leader's discard of these messages (`discard.rs`).
    Discard(Vec<MessageId>, DeathReason),
}

impl QuorumQueue {
    /// Hands `msg` to the settlement batcher, started by the first
    /// settlement of this replica (a queue and a task per replica of every
    /// group are not spent before anything was settled; followers never
    /// settle) and again by the first after a quiet spell ended it
    /// (`task_queue::TaskSlot`). Hands it back once the batcher ended by
    /// itself (the queue is gone).
    pub(super) fn send_settle(&self, msg: SettleMsg) -> Result<(), SettleMsg> {
        self.settle_tx.send(msg, |rx| {
            tokio::spawn(replicate_settlements(
                self.raft.clone(),
                rx,
                self.hold.clone(),
                self.shared.clone(),
            ));
        })
    }

    /// Settle `message` by id on the leader, for a settlement made through
    /// another leader or while none was known (its consumer may be gone):
    /// an accepted or rejected message leaves the queue, replicated like
    /// any settlement; others need nothing. `false` if this replica does
    /// not lead (nothing done).
    pub(crate) fn settle_by_id(&self, message: MessageId, outcome: Outcome) -> bool {
        if !self.is_leading() {
            return false;
        }
        // No consumer has this id: the dispatcher does not know the
        // delivery, and `settle_here` settles it by id.
        crate::queue::Queue::settle(self, ConsumerId(u64::MAX), message, outcome);
        true
    }

    /// Wait (bounded) until the settlements taken so far are replicated, so
    /// a graceful stop does not make accepted messages come back.
    pub(crate) async fn flush_settlements(&self, limit: Duration) {
        // No batcher: nothing was settled here since it last went idle
        // (or ever).
        let (done, wait) = tokio::sync::oneshot::channel();
        if self
            .settle_tx
            .send_if_running(SettleMsg::Flush(done))
            .is_ok()
        {
            let _ = tokio::time::timeout(limit, wait).await;
        }
    }
}
