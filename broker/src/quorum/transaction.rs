//! A local transaction's part on a quorum queue: its messages and its
//! settlements go into the group's log as one entry (`Command::Transact`),
//! so a leader change shows all of the part or none of it, and the
//! transaction's publishes are `accepted` only once that entry is
//! committed on a majority and fsynced, like any publish.
//!
//! It knows nothing of the coordinator link or of the other queues a
//! transaction touches (the engine's `transaction.rs` orders those).

use std::time::Duration;

use super::queue::QuorumQueue;
use super::types::{Command, SettleKind, ENQUEUE_BATCH_MAX};
use crate::queue::{Outcome, PublishConfirm, PublishStatus, QueueError, TxnPart};

impl QuorumQueue {
    /// Propose `part` as one log entry; `confirm` hears `accepted` once it
    /// is committed and applied, `released` when it could not be (no
    /// leader, no quorum in time): then it may or may not have landed,
    /// exactly as for a publish, never a false `accepted`.
    pub(super) fn commit_part(
        &self,
        part: TxnPart,
        confirm: PublishConfirm,
    ) -> Result<PublishStatus, QueueError> {
        use crate::queue::Queue;
        self.serves_here()?;
        if part.messages.len() > ENQUEUE_BATCH_MAX {
            return Err(QueueError::Refused(format!(
                "a transaction may post at most {ENQUEUE_BATCH_MAX} messages to one quorum queue"
            )));
        }
        // Settled in the leader's dispatcher now, as any settlement: a
        // lost entry makes a new leader deliver them again (at least
        // once), never lose them.
        let settles: Vec<(u64, SettleKind)> = part
            .settles
            .iter()
            .filter_map(|&(consumer, message, outcome)| {
                // A rejection or the delivery limit inside a transaction
                // removes the message (it is not dead-lettered).
                self.settle_here(consumer, message, outcome)
                    .map(|(kind, _)| (message, kind))
            })
            .collect();
        // Expiries are the leader's, stamped now (`queue/expiry.rs`).
        let expires_at: Vec<u64> = {
            let inner = self.shared.lock();
            let policy = inner.dispatcher.policy().map(|p| &**p);
            part.messages
                .iter()
                .map(|m| crate::queue::expiry::expires_at(m, policy))
                .collect()
        };
        let messages: Vec<bytes::Bytes> = part.messages.into_iter().map(|m| m.bytes).collect();
        if messages.is_empty() && settles.is_empty() {
            // Only releases: nothing for the log.
            return Ok(PublishStatus::Accepted);
        }
        let command = match expires_at.iter().any(|at| *at != 0) {
            true => Command::TransactExpiring {
                messages,
                settles,
                expires_at,
            },
            false => Command::Transact { messages, settles },
        };
        let raft = self.raft.clone();
        let hold = self.hold.clone();
        let timeout = self.publish_timeout;
        tokio::spawn(async move {
            let outcome = propose(raft, hold, command, timeout).await;
            confirm.report(outcome);
        });
        Ok(PublishStatus::Pending)
    }
}

/// Propose one entry and wait (bounded) for its commit.
async fn propose(
    raft: super::types::QueueRaftHandle,
    hold: std::sync::Arc<super::hold::ProposalHold>,
    command: Command,
    timeout: Duration,
) -> Outcome {
    // During a hand-off the entry waits (the log must stop growing).
    let Some(pass) = hold.pass().await else {
        return Outcome::Released;
    };
    let submitted = super::submit::write_ff(&raft, command).await;
    drop(pass);
    let committed = match submitted {
        Ok(committed) => committed,
        Err(error) => {
            tracing::debug!(%error, "transaction not proposed");
            return Outcome::Released;
        }
    };
    match tokio::time::timeout(timeout, committed).await {
        Ok(Ok(Ok(_))) => Outcome::Accepted,
        Ok(Ok(Err(error))) => {
            tracing::debug!(%error, "transaction not committed");
            Outcome::Released
        }
        Ok(Err(_)) => Outcome::Released,
        Err(_) => {
            tracing::warn!("transaction not committed within {timeout:?}: no quorum?");
            Outcome::Released
        }
    }
}
