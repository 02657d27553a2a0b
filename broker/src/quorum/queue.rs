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

use super::state_machine::Shared;
use super::types::{Command, NodeId, QueueRaftHandle, SettleKind};
use crate::codec::definitions::condition;
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
    pub(crate) raft: QueueRaftHandle,
    shared: Arc<Shared>,
    gate: Arc<PublishGate>,
    settles: mpsc::UnboundedSender<(MessageId, SettleKind)>,
    publish_timeout: Duration,
}

impl QuorumQueue {
    /// Serve the group behind `raft`; spawns the leadership watcher and the
    /// settlement batcher (both end when the Raft group shuts down or the
    /// queue is dropped).
    pub(crate) fn start(
        address: QueueAddress,
        node_id: NodeId,
        raft: QueueRaftHandle,
        shared: Arc<Shared>,
        max_in_flight: usize,
        publish_timeout: Duration,
    ) -> Arc<QuorumQueue> {
        let (settles, settle_rx) = mpsc::unbounded_channel();
        tokio::spawn(watch_leadership(
            raft.clone(),
            shared.clone(),
            node_id,
            address.to_string(),
        ));
        tokio::spawn(replicate_settlements(raft.clone(), settle_rx));
        Arc::new(QuorumQueue {
            address,
            raft,
            shared,
            gate: Arc::new(PublishGate {
                in_flight: AtomicUsize::new(0),
                max_in_flight,
                waiters: Mutex::new(Vec::new()),
            }),
            settles,
            publish_timeout,
        })
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
}

/// Follow the group's leadership: a node that becomes leader builds its
/// dispatcher from the replicated index; one that stops leading drops it and
/// detaches its consumers (they reconnect to the new leader).
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
        {
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
                for (sink, tag) in inner.dispatcher.clear() {
                    sink.send(
                        tag,
                        QueueEventKind::Closed {
                            condition: condition::DETACH_FORCED,
                            description: format!("{queue}: leadership moved away from this node"),
                        },
                    );
                }
                tracing::info!(%queue, node_id, "no longer leading");
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// Propose settlements in batches: one log entry per batch and kind.
async fn replicate_settlements(
    raft: QueueRaftHandle,
    mut rx: mpsc::UnboundedReceiver<(MessageId, SettleKind)>,
) {
    while let Some(first) = rx.recv().await {
        let mut remove = Vec::new();
        let mut failed = Vec::new();
        let mut next = Some(first);
        while let Some((id, kind)) = next {
            match kind {
                SettleKind::Remove => remove.push(id),
                SettleKind::Failed => failed.push(id),
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
            // A failed proposal (leadership lost) is harmless: the new
            // leader still holds the messages and delivers them again.
            if let Err(error) = raft.client_write(Command::Settle { ids, kind }).await {
                tracing::debug!(%error, "settlement not replicated");
            }
        }
    }
}

impl Queue for QuorumQueue {
    fn address(&self) -> &QueueAddress {
        &self.address
    }

    fn serves_here(&self) -> Result<(), QueueError> {
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
            return Err(self.not_leader());
        }
        self.gate.in_flight.fetch_add(1, Ordering::AcqRel);
        let raft = self.raft.clone();
        let gate = self.gate.clone();
        let timeout = self.publish_timeout;
        tokio::spawn(async move {
            let command = Command::Enqueue {
                message: message.bytes,
            };
            // Bounded: without a quorum the publisher hears `released`
            // (not accepted; send again) instead of waiting forever.
            let outcome = match tokio::time::timeout(timeout, raft.client_write(command)).await {
                Ok(Ok(_)) => Outcome::Accepted,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "publish not committed");
                    Outcome::Released
                }
                Err(_) => {
                    tracing::warn!("publish not committed within {timeout:?}: no quorum?");
                    Outcome::Released
                }
            };
            gate.done();
            if let Some(confirm) = confirm {
                confirm.sink.send(
                    confirm.tag,
                    QueueEventKind::Published {
                        token: confirm.token,
                        outcome,
                    },
                );
            }
        });
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
            _ => return,
        };
        let _ = self.settles.send((message, kind));
    }

    fn unsubscribe(&self, consumer: ConsumerId) {
        self.shared.lock().dispatcher.unsubscribe(consumer);
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
