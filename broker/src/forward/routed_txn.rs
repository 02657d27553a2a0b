//! A local transaction's part on a queue reached through a
//! [`RoutedQueue`]: handed to the local quorum queue when this node leads
//! it, or sent to the leader as one `ToServer::Commit`, so the part stays
//! one log entry wherever the client is connected.
//!
//! Settlements name routed consumers; they are translated to the consumer
//! ids (local) or forwarded link ids (remote) the serving queue knows. A
//! settlement of a consumer that is not at the current target (it moved
//! with a leader change) is left out: its message comes back to the queue,
//! at least once, never lost.

use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::protocol::ToServer;
use super::routed::{At, RoutedQueue, Target};
use crate::queue::{PublishConfirm, PublishStatus, Queue, QueueError, TxnPart};

impl RoutedQueue {
    /// Whether a transaction's part fits: asked of the local queue when it
    /// is served here; a remote leader answers at its commit.
    pub(super) fn room_routed(&self, messages: usize, bytes: u64) -> bool {
        let target = self.lock().target;
        match (target, self.local()) {
            (Target::Local, Some(local)) => local.has_room_for(messages, bytes),
            _ => true,
        }
    }

    /// Commit `part` where the queue is served now.
    pub(super) fn commit_routed(
        &self,
        part: TxnPart,
        confirm: PublishConfirm,
    ) -> Result<PublishStatus, QueueError> {
        let mut state = self.lock();
        match (state.target, self.local()) {
            (Target::Local, Some(local)) => {
                let settles = part
                    .settles
                    .into_iter()
                    .filter_map(|(consumer, message, outcome)| {
                        match state.consumers.get(&consumer)?.at {
                            At::Local(id) => Some((id, message, outcome)),
                            _ => None,
                        }
                    })
                    .collect();
                drop(state);
                local.commit(
                    TxnPart {
                        messages: part.messages,
                        settles,
                    },
                    confirm,
                )
            }
            (Target::Remote(node), _) => {
                let settles = part
                    .settles
                    .into_iter()
                    .filter_map(|(consumer, message, outcome)| {
                        match state.consumers.get(&consumer)?.at {
                            At::Remote { node: n, link, .. } if n == node => {
                                Some((link, message, outcome))
                            }
                            _ => None,
                        }
                    })
                    .collect();
                let link = self.publisher_link(&mut state, node);
                let token = state.next_token;
                state.next_token += 1;
                state.pending.insert(token, (Instant::now(), Some(confirm)));
                let lens = part.messages.iter().map(|m| m.len() as u32).collect();
                let payload = join(&part.messages);
                let commit = ToServer::Commit {
                    link,
                    token,
                    lens,
                    settles,
                };
                self.send(&mut state, node, &commit, payload);
                Ok(PublishStatus::Pending)
            }
            _ => Err(QueueError::NotLeader {
                queue: self.address().to_string(),
                leader: None,
            }),
        }
    }
}

/// The messages one after another (one copy, for the fabric's payload).
fn join(messages: &[crate::queue::Message]) -> Bytes {
    let mut joined = BytesMut::with_capacity(messages.iter().map(|m| m.len()).sum());
    for message in messages {
        joined.extend_from_slice(&message.bytes);
    }
    joined.freeze()
}
