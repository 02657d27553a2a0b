//! Local transactions (AMQP 1.0 part 4) of one connection: what the
//! coordinator link's `declare` and `discharge` do, the work staged in
//! between (messages posted per queue, settlements of deliveries), and the
//! discharge: a commit hands every queue its part at once, a rollback drops
//! the posted messages and returns the settled ones to their queues.
//!
//! Guarantee: each queue applies its part of a transaction atomically (a
//! transient queue under one lock, a quorum queue as one Raft log entry).
//! Across queues, every queue is asked first whether it is served here and
//! has room, so a full queue refuses the whole transaction before anything
//! lands; a failure after that (a quorum queue losing its leader between
//! the check and its commit) can leave the parts on other queues applied,
//! and the discharge then says which queue failed.
//!
//! It must not know how a queue applies its part (that is the `Queue`
//! trait's `commit`), nor frames beyond the answers it writes.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use super::outbox::Outbox;
use super::state::State;
use crate::codec::definitions::condition;
use crate::codec::{Control, DeliveryState, Disposition, Error, Performative, Role};
use crate::config::Limits;
use crate::queue::{
    ConsumerId, Message, MessageId, Outcome, PublishConfirm, PublishStatus, Queue, TxnPart,
};

/// The coordinator's capability: local transactions (transactions 4.3).
pub(crate) const LOCAL_TRANSACTIONS: &str = "amqp:local-transactions";

/// A settlement staged in a transaction.
pub(crate) struct StagedSettle {
    pub(crate) channel: u16,
    pub(crate) handle: u32,
    pub(crate) delivery_id: u32,
    pub(crate) queue: Arc<dyn Queue>,
    pub(crate) consumer: ConsumerId,
    pub(crate) message: MessageId,
    pub(crate) outcome: Outcome,
}

/// One live transaction.
struct Txn {
    /// Tag of the coordinator link that declared it: it dies with that
    /// link.
    coordinator: u64,
    /// Posted messages, per queue, in posting order.
    posts: Vec<(Arc<dyn Queue>, Vec<Message>)>,
    settles: Vec<StagedSettle>,
    operations: usize,
    bytes: u64,
    /// Set when the transaction can only roll back (e.g. it outgrew the
    /// staging bound): the reason a commit is refused with.
    doomed: Option<String>,
}

/// A commit whose quorum parts are still on their way to the log.
#[derive(Default)]
struct Committing {
    remaining: usize,
    failures: Vec<String>,
}

/// The transactions of one connection.
#[derive(Default)]
pub(crate) struct Transactions {
    next_id: u64,
    live: HashMap<Bytes, Txn>,
    /// Staged operations and bytes across the live transactions.
    operations: usize,
    bytes: u64,
    /// By (coordinator tag, discharge delivery-id).
    committing: HashMap<(u64, u32), Committing>,
}

/// Why a staged operation was refused.
pub(crate) fn unknown(txn_id: &Bytes) -> Error {
    Error::new(
        condition::TRANSACTION_UNKNOWN_ID,
        format!("no live transaction {}", hex(txn_id)),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Transactions {
    /// Check the staging bound for one more operation of `bytes`; past it
    /// the transaction is doomed and the operation refused.
    fn admit(&mut self, txn_id: &Bytes, bytes: u64, limits: &Limits) -> Result<(), Error> {
        let over = self.operations + 1 > limits.txn_max_operations
            || self.bytes.saturating_add(bytes) > limits.txn_max_bytes;
        let Some(txn) = self.live.get_mut(txn_id) else {
            return Err(unknown(txn_id));
        };
        if over {
            let reason = format!(
                "transactions of one connection may stage at most {} operations and {} bytes",
                limits.txn_max_operations, limits.txn_max_bytes
            );
            txn.doomed = Some(reason.clone());
            return Err(Error::new(condition::RESOURCE_LIMIT_EXCEEDED, reason));
        }
        txn.operations += 1;
        txn.bytes += bytes;
        self.operations += 1;
        self.bytes += bytes;
        Ok(())
    }

    /// Stage a posted message for `queue`.
    pub(crate) fn post(
        &mut self,
        txn_id: &Bytes,
        queue: Arc<dyn Queue>,
        message: Message,
        limits: &Limits,
    ) -> Result<(), Error> {
        self.admit(txn_id, message.len() as u64, limits)?;
        let Some(txn) = self.live.get_mut(txn_id) else {
            return Err(unknown(txn_id));
        };
        match txn
            .posts
            .iter_mut()
            .find(|(q, _)| q.address() == queue.address())
        {
            Some((_, messages)) => messages.push(message),
            None => txn.posts.push((queue, vec![message])),
        }
        Ok(())
    }

    /// Stage a settlement; on refusal the settlement comes back, so the
    /// caller can return the message to its queue.
    pub(crate) fn settle(
        &mut self,
        txn_id: &Bytes,
        settle: StagedSettle,
        limits: &Limits,
    ) -> Result<(), (Error, StagedSettle)> {
        if let Err(error) = self.admit(txn_id, 0, limits) {
            return Err((error, settle));
        }
        match self.live.get_mut(txn_id) {
            Some(txn) => {
                txn.settles.push(settle);
                Ok(())
            }
            None => Err((unknown(txn_id), settle)),
        }
    }

    fn take(&mut self, txn_id: &Bytes) -> Option<Txn> {
        let txn = self.live.remove(txn_id)?;
        self.operations -= txn.operations;
        self.bytes -= txn.bytes;
        Some(txn)
    }

    /// Roll back every transaction declared on the coordinator link
    /// `coordinator` (it went away), or all of them (`None`: the
    /// connection is going away).
    pub(crate) fn roll_back_all(&mut self, coordinator: Option<u64>) {
        let ids: Vec<Bytes> = self
            .live
            .iter()
            .filter(|(_, t)| coordinator.is_none_or(|c| t.coordinator == c))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(txn) = self.take(&id) {
                tracing::debug!(txn = %hex(&id), "transaction rolled back: its link or connection went away");
                roll_back(txn, None);
            }
        }
    }
}

/// Drop the posted messages; return the settled ones to their queues (and,
/// with `out`, tell their consumers they were released).
fn roll_back(txn: Txn, mut out: Option<(&mut State, &mut Outbox)>) {
    for settle in txn.settles {
        settle
            .queue
            .settle(settle.consumer, settle.message, Outcome::Released);
        if let Some((state, out)) = out.as_mut() {
            state.settle_for_consumer(&settle, DeliveryState::Released, out);
        }
    }
}

impl State {
    /// A message on a coordinator link: a declare or a discharge. Returns
    /// the delivery state to answer with now (`None`: later, or never for
    /// a pre-settled one).
    pub(crate) fn on_control(
        &mut self,
        coordinator: u64,
        delivery_id: u32,
        settled: bool,
        message: &Bytes,
        out: &mut Outbox,
    ) -> Option<DeliveryState> {
        let answer = match Control::from_message(message) {
            Err(e) => rejected(
                condition::DECODE_ERROR,
                format!("not a declare or discharge: {e}"),
            ),
            Ok(Control::Declare { global_id: Some(_) }) => rejected(
                condition::NOT_IMPLEMENTED,
                "global (distributed) transactions are not supported; declare without a global-id",
            ),
            Ok(Control::Declare { global_id: None }) => self.declare(coordinator),
            Ok(Control::Discharge { txn_id, fail }) => {
                self.discharge(coordinator, delivery_id, txn_id, fail, out)?
            }
        };
        (!settled).then_some(answer)
    }

    fn declare(&mut self, coordinator: u64) -> DeliveryState {
        let limits = &self.context.limits;
        let txns = &mut self.transactions;
        if txns.live.len() >= limits.txn_max_open {
            return rejected(
                condition::RESOURCE_LIMIT_EXCEEDED,
                format!(
                    "a connection may have at most {} live transactions",
                    limits.txn_max_open
                ),
            );
        }
        txns.next_id += 1;
        let txn_id = Bytes::copy_from_slice(&txns.next_id.to_be_bytes());
        txns.live.insert(
            txn_id.clone(),
            Txn {
                coordinator,
                posts: Vec::new(),
                settles: Vec::new(),
                operations: 0,
                bytes: 0,
                doomed: None,
            },
        );
        DeliveryState::Declared { txn_id }
    }

    /// Commit or roll back; `None` when the answer comes once the quorum
    /// parts are committed.
    fn discharge(
        &mut self,
        coordinator: u64,
        delivery_id: u32,
        txn_id: Bytes,
        fail: bool,
        out: &mut Outbox,
    ) -> Option<DeliveryState> {
        let Some(txn) = self.transactions.take(&txn_id) else {
            let e = unknown(&txn_id);
            return Some(DeliveryState::Rejected { error: Some(e) });
        };
        if fail {
            roll_back(txn, Some((self, out)));
            return Some(DeliveryState::Accepted);
        }
        if let Some(reason) = txn.doomed.clone() {
            roll_back(txn, Some((self, out)));
            return Some(rejected(condition::TRANSACTION_ROLLBACK, reason));
        }
        // Every queue first: served here and room for its part; a refusal
        // rolls the whole transaction back before anything lands.
        if let Some(reason) = refusal(&txn) {
            roll_back(txn, Some((self, out)));
            return Some(rejected(condition::TRANSACTION_ROLLBACK, reason));
        }
        let mut parts: Vec<(Arc<dyn Queue>, TxnPart)> = txn
            .posts
            .into_iter()
            .map(|(queue, messages)| {
                let part = TxnPart {
                    messages,
                    settles: Vec::new(),
                };
                (queue, part)
            })
            .collect();
        for settle in txn.settles {
            let entry = (settle.consumer, settle.message, settle.outcome);
            match parts
                .iter_mut()
                .find(|(q, _)| q.address() == settle.queue.address())
            {
                Some((_, part)) => part.settles.push(entry),
                None => parts.push((
                    settle.queue,
                    TxnPart {
                        messages: Vec::new(),
                        settles: vec![entry],
                    },
                )),
            }
        }
        let mut committing = Committing::default();
        for (queue, part) in parts {
            let confirm = PublishConfirm {
                sink: self.sink.clone(),
                tag: coordinator,
                token: u64::from(delivery_id),
            };
            match queue.commit(part, confirm) {
                Ok(PublishStatus::Accepted) => {}
                Ok(PublishStatus::Pending) => committing.remaining += 1,
                Err(e) => committing
                    .failures
                    .push(format!("{}: {e}", queue.address())),
            }
        }
        if committing.remaining == 0 {
            return Some(commit_answer(&committing.failures));
        }
        self.transactions
            .committing
            .insert((coordinator, delivery_id), committing);
        None
    }

    /// A quorum part of a commit reached its outcome: answer the discharge
    /// once every part has.
    pub(crate) fn commit_part_done(
        &mut self,
        coordinator: u64,
        channel: u16,
        delivery_id: u32,
        outcome: Outcome,
        out: &mut Outbox,
    ) {
        let key = (coordinator, delivery_id);
        let Some(committing) = self.transactions.committing.get_mut(&key) else {
            return;
        };
        committing.remaining -= 1;
        if outcome != Outcome::Accepted {
            committing.failures.push(
                "a quorum queue could not commit its part in time (no leader or no quorum); \
                 it may still land"
                    .to_string(),
            );
        }
        if committing.remaining > 0 {
            return;
        }
        let failures = self
            .transactions
            .committing
            .remove(&key)
            .map(|c| c.failures)
            .unwrap_or_default();
        answer(channel, delivery_id, commit_answer(&failures), out);
    }
}

/// The first reason a queue of `txn` refuses it, if any.
fn refusal(txn: &Txn) -> Option<String> {
    for (queue, messages) in &txn.posts {
        if let Err(e) = queue.serves_here() {
            return Some(format!("{}: {e}", queue.address()));
        }
        let bytes = messages.iter().map(|m| m.len() as u64).sum();
        if !queue.has_room_for(messages.len(), bytes) {
            return Some(format!(
                "{} has no room for the transaction's {} messages",
                queue.address(),
                messages.len()
            ));
        }
    }
    None
}

fn commit_answer(failures: &[String]) -> DeliveryState {
    if failures.is_empty() {
        return DeliveryState::Accepted;
    }
    rejected(
        condition::TRANSACTION_TIMEOUT,
        format!(
            "the transaction did not commit everywhere: {}",
            failures.join("; ")
        ),
    )
}

fn rejected(condition: &'static str, description: impl Into<String>) -> DeliveryState {
    DeliveryState::Rejected {
        error: Some(Error::new(condition, description.into())),
    }
}

/// Settle a control message with `state`.
pub(crate) fn answer(channel: u16, delivery_id: u32, state: DeliveryState, out: &mut Outbox) {
    out.frame(
        channel,
        &Performative::Disposition(Disposition {
            role: Role::Receiver,
            first: delivery_id,
            last: None,
            settled: true,
            state: Some(state),
            batchable: false,
        }),
    );
}

impl State {
    /// Tell a consumer that a delivery it settled in a transaction ended
    /// otherwise (`released` by a rollback), if its link is still there.
    fn settle_for_consumer(
        &mut self,
        settle: &StagedSettle,
        state: DeliveryState,
        out: &mut Outbox,
    ) {
        let Some(session) = self.sessions.get(&settle.channel) else {
            return;
        };
        match session.links.get(&settle.handle) {
            Some(super::link::Link::Consumer(c)) if c.consumer == settle.consumer => {}
            _ => return,
        }
        out.frame(
            settle.channel,
            &Performative::Disposition(Disposition {
                role: Role::Sender,
                first: settle.delivery_id,
                last: None,
                settled: true,
                state: Some(state),
                batchable: false,
            }),
        );
    }
}
