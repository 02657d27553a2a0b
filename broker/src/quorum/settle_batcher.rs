//! The settlement batcher of a quorum queue: settlements are applied to
//! the leader's dispatcher at once and replicated here in batches (one log
//! entry per batch and kind), so a new leader neither redelivers what was
//! accepted nor forgets a failed attempt. Dead-letterings go the same way,
//! as `Command::DeadLetter` entries.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::hold::ProposalHold;
use super::queue::QuorumQueue;
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

/// Propose settlements in batches: one log entry per batch and kind.
async fn replicate_settlements(
    raft: QueueRaftHandle,
    mut rx: mpsc::UnboundedReceiver<SettleMsg>,
    hold: Arc<ProposalHold>,
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
            next = rx.try_recv().ok();
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
            let Some(pass) = hold.pass().await else {
                return;
            };
            let submitted = super::submit::write_ff(&raft, command).await;
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
    /// The way to the settlement batcher, started by the first settlement
    /// of this replica: a channel's first block and a task per replica of
    /// every group are not spent before anything was settled (followers
    /// never settle). The task ends when the queue is dropped.
    pub(super) fn settles(&self) -> &mpsc::UnboundedSender<SettleMsg> {
        self.settle_tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(replicate_settlements(
                self.raft.clone(),
                rx,
                self.hold.clone(),
            ));
            tx
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
        // No batcher yet: nothing was ever settled here.
        let Some(settles) = self.settle_tx.get() else {
            return;
        };
        let (done, wait) = tokio::sync::oneshot::channel();
        if settles.send(SettleMsg::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(limit, wait).await;
        }
    }
}
