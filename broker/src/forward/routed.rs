//! [`RoutedQueue`]: the [`Queue`] the engine gets for a queue that may be
//! served by another node: every `/quorum/` queue, and a transient queue
//! owned by another node. It serves through the local [`QuorumQueue`] when
//! this node leads (the fast path: no task hop, the client's sink gets the
//! deliveries directly), and otherwise proxies each call over the node
//! transport to the serving node, where [`super::server`] runs it.
//!
//! Every link keeps its own state here (credit limit, drain, the
//! delivery-count as seen by this node), so when the leader moves
//! (`follow.rs`) the link is moved with it instead of being detached.
//!
//! Lock discipline: the state lock is held while sending (that keeps one
//! link's traffic in order), which is safe because no node handler ever
//! calls back into a routed queue synchronously: the serving side only
//! pushes to channels.

use std::collections::VecDeque;

// Keyed by ids this broker assigns (consumer ids, publish sequence numbers).
use foldhash::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Notify;

use super::follow::find_link;
use super::held_settles::{hold_settle, Orphans, Settles};
use super::protocol::{ToOrigin, ToServer};
use super::Forwarder;
use crate::codec::MessageView;
use crate::lock_order::{OrderedGuard, OrderedMutex, Rank};
use crate::net::NodeId;
use crate::queue::{
    ConsumerId, ConsumerOptions, Delivery, Message, MessageId, Outcome, PublishConfirm,
    PublishStatus, Queue, QueueAddress, QueueError, QueueEventKind, QueueStats, Sink, TxnPart,
};
use crate::quorum::QuorumQueue;

/// Where the queue is served from, as this node knows it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// This node leads: the local quorum queue.
    Local,
    /// Another node serves it.
    Remote(NodeId),
    /// Looking for the leader since then.
    Searching(Instant),
}

/// Where one consumer is attached now.
#[derive(Debug, Clone, Copy)]
pub(super) enum At {
    /// A routed consumer of the local quorum queue.
    Local(ConsumerId),
    /// A forwarded link: the server counts deliveries from 0, this node
    /// adds `base` (the link's delivery-count when it got there).
    Remote {
        node: NodeId,
        link: u64,
        base: u32,
        delivery_count: u32,
    },
    /// Waiting for a leader, at this delivery-count.
    Nowhere { delivery_count: u32 },
}

/// One consumer of the routed queue.
pub(super) struct RConsumer {
    pub(super) sink: Sink,
    pub(super) tag: u64,
    pub(super) credit_limit: u32,
    pub(super) drain: bool,
    pub(super) at: At,
    /// Given to whichever node serves the consumer, at every re-attach.
    pub(super) options: ConsumerOptions,
    /// Accepted/rejected settlements not sent yet (`held_settles.rs`).
    pub(super) held_settles: Settles,
    /// Those sent to a remote leader lately, not known applied (the same).
    pub(super) in_doubt: Settles,
}

/// A publish whose message has not reached a serving node yet.
pub(super) struct Held {
    pub(super) token: u64,
    pub(super) message: Message,
    pub(super) confirm: Option<PublishConfirm>,
}

/// The mutable part of a routed queue.
pub(super) struct State {
    pub(super) target: Target,
    next_consumer: u64,
    pub(super) consumers: HashMap<ConsumerId, RConsumer>,
    /// The publishing link at the current remote target, opened lazily.
    pub(super) pub_link: Option<u64>,
    pub(super) next_token: u64,
    /// Sent to the remote target, outcome not known yet (`None`: the
    /// client pre-settled it; it still counts against the window).
    pub(super) pending: HashMap<u64, (Instant, Option<PublishConfirm>)>,
    /// Publishes taken while no leader was known, in order.
    pub(super) backlog: VecDeque<Held>,
    /// Publishers waiting for room.
    pub(super) waiters: Vec<(Sink, u64)>,
    /// The search gave up early: this node is cut off from whoever serves
    /// the queue (see `cut_off.rs`). Cleared when a target is found.
    pub(super) cut_off: bool,
    /// Held settlements of consumers that left (`held_settles.rs`).
    pub(super) orphans: Orphans,
}

impl State {
    /// Whether the search for a target has given up: no leader within the
    /// leader wait, or cut off from it.
    pub(super) fn given_up(&self, leader_wait: std::time::Duration) -> bool {
        match self.target {
            Target::Searching(since) => self.cut_off || since.elapsed() > leader_wait,
            _ => false,
        }
    }
}

/// A queue served here or elsewhere; see the module documentation.
pub(crate) struct RoutedQueue {
    pub(super) address: QueueAddress,
    pub(super) fwd: Arc<Forwarder>,
    /// The local replica of a quorum queue, once this node has it open.
    pub(super) local: OnceLock<Arc<QuorumQueue>>,
    /// A transient queue's owner: it never moves.
    pub(super) owner: Option<NodeId>,
    /// Held while calling into the local quorum queue (see `lock_order.rs`).
    pub(super) state: OrderedMutex<State>,
    /// Wakes the follower task (a send failed, a link was closed).
    pub(super) kick: Arc<Notify>,
    /// Most publishes in flight to a remote target.
    pub(super) window: usize,
    pub(super) weak: Weak<RoutedQueue>,
}

impl RoutedQueue {
    /// A routed queue for `address`; `owner` is set for a transient queue
    /// owned by another node. Spawns its follower task.
    pub(crate) fn new(
        address: QueueAddress,
        fwd: Arc<Forwarder>,
        local: Option<Arc<QuorumQueue>>,
        owner: Option<NodeId>,
    ) -> Arc<RoutedQueue> {
        let window = fwd.config.max_inflight_publishes.max(1);
        let queue = Arc::new_cyclic(|weak| RoutedQueue {
            address,
            fwd,
            local: local.map(OnceLock::from).unwrap_or_default(),
            owner,
            state: OrderedMutex::new(
                Rank::RoutedQueue,
                State {
                    target: Target::Searching(Instant::now()),
                    next_consumer: 0,
                    consumers: HashMap::default(),
                    pub_link: None,
                    next_token: 0,
                    pending: HashMap::default(),
                    backlog: VecDeque::new(),
                    waiters: Vec::new(),
                    cut_off: false,
                    orphans: Orphans::default(),
                },
            ),
            kick: Arc::new(Notify::new()),
            window,
            weak: weak.clone(),
        });
        tokio::spawn(super::follow::follow(Arc::downgrade(&queue)));
        queue
    }

    pub(super) fn lock(&self) -> OrderedGuard<'_, State> {
        // Every step on the state is short and leaves it consistent.
        self.state.lock()
    }

    pub(super) fn local(&self) -> Option<&Arc<QuorumQueue>> {
        self.local.get()
    }

    /// Whether the local replica it serves through was deleted.
    pub(crate) fn is_stale(&self) -> bool {
        self.local().is_some_and(|local| local.is_deleted())
    }

    /// Where the queue is served now.
    pub(crate) fn target(&self) -> Target {
        self.lock().target
    }

    /// Whether the search for a target has given up (see
    /// [`State::given_up`]): a new link is then answered at once.
    pub(crate) fn given_up(&self) -> bool {
        self.lock().given_up(self.fwd.leader_wait())
    }

    /// Send link traffic to `node`; on failure the target is lost: search
    /// again (the caller holds the state lock).
    pub(super) fn send(&self, state: &mut State, node: NodeId, message: &ToServer, payload: Bytes) {
        if self.fwd.send_to_server(node, message, payload).is_err() {
            tracing::debug!(queue = %self.address, node, "forwarding send failed; searching");
            self.lose_target(state);
        }
    }

    /// The current target failed: detach everything from it and search.
    pub(super) fn lose_target(&self, state: &mut State) {
        if !matches!(state.target, Target::Searching(_)) {
            self.retarget(state, Target::Searching(Instant::now()));
        }
        self.kick.notify_one();
    }

    fn in_flight(state: &State) -> usize {
        state.pending.len() + state.backlog.len()
    }

    /// Wake publishers if there is room again.
    pub(super) fn wake_publishers(&self, state: &mut State) {
        if Self::in_flight(state) < self.window && !matches!(state.target, Target::Searching(_)) {
            for (sink, tag) in state.waiters.drain(..) {
                sink.send(tag, QueueEventKind::Capacity);
            }
        }
    }

    /// Send one publish to the remote target, opening the publishing link
    /// there first if needed.
    pub(super) fn publish_remote(&self, state: &mut State, node: NodeId, held: Held) {
        let link = self.publisher_link(state, node);
        if state.target != Target::Remote(node) {
            state.backlog.push_back(held);
            return;
        }
        state
            .pending
            .insert(held.token, (Instant::now(), held.confirm));
        let publish = ToServer::Publish {
            link,
            token: held.token,
        };
        self.send(state, node, &publish, held.message.bytes);
    }

    /// The publishing link at `node`, opened there first if needed.
    pub(super) fn publisher_link(&self, state: &mut State, node: NodeId) -> u64 {
        match state.pub_link {
            Some(link) => link,
            None => {
                let link = self.fwd.new_link(&self.weak);
                state.pub_link = Some(link);
                // In use again: the follower probes at its busy pace.
                self.kick.notify_one();
                let open = ToServer::Publisher {
                    link,
                    address: self.address.to_string(),
                };
                self.send(state, node, &open, Bytes::new());
                link
            }
        }
    }

    /// Handle link traffic from the serving node.
    pub(crate) fn on_origin(&self, message: ToOrigin, payload: Bytes) {
        let mut state = self.lock();
        match message {
            ToOrigin::Published {
                link,
                token,
                outcome,
            } => {
                if state.pub_link != Some(link) {
                    return; // an earlier target's: already released
                }
                if let Some((_, Some(confirm))) = state.pending.remove(&token) {
                    confirm.report(outcome);
                }
                self.wake_publishers(&mut state);
            }
            ToOrigin::Deliver {
                link,
                message,
                delivery_count,
                redelivered,
            } => {
                let Some(consumer) = find_link(&mut state, link) else {
                    return; // moved on: the message returns to the queue
                };
                let At::Remote {
                    delivery_count: count,
                    node,
                    ..
                } = &mut consumer.at
                else {
                    return;
                };
                let node = *node;
                let Ok(view) = MessageView::scan(&payload) else {
                    // The origin scanned it before; give it back.
                    let settle = ToServer::Settle {
                        link,
                        message,
                        outcome: Outcome::Released,
                    };
                    self.send(&mut state, node, &settle, Bytes::new());
                    return;
                };
                let delivery = Delivery {
                    id: message,
                    message: Message {
                        header: view.header,
                        header_len: view.header_len as u32,
                        bytes: payload,
                    },
                    delivery_count,
                    redelivered,
                };
                *count = count.wrapping_add(1);
                consumer
                    .sink
                    .send(consumer.tag, QueueEventKind::Deliver(delivery));
            }
            ToOrigin::Drained { link, credit_limit } => {
                let Some(consumer) = find_link(&mut state, link) else {
                    return;
                };
                if let At::Remote {
                    base,
                    delivery_count,
                    ..
                } = &mut consumer.at
                {
                    let limit = credit_limit.wrapping_add(*base);
                    if (limit.wrapping_sub(*delivery_count) as i32) > 0 {
                        *delivery_count = limit;
                    }
                    consumer.sink.send(
                        consumer.tag,
                        QueueEventKind::Drained {
                            credit_limit: limit,
                        },
                    );
                }
            }
            ToOrigin::Closed {
                link,
                reason,
                deleted,
            } => {
                let ours = state.pub_link == Some(link) || find_link(&mut state, link).is_some();
                if ours && deleted {
                    // Not moved: the queue is gone (a new one of the same
                    // name would be another queue).
                    tracing::debug!(queue = %self.address, %reason, "queue deleted; closing its links");
                    drop(state);
                    self.close_all(
                        crate::codec::definitions::condition::RESOURCE_DELETED,
                        reason,
                    );
                    return;
                }
                if ours {
                    tracing::debug!(queue = %self.address, %reason, "forwarded link closed; searching");
                    self.lose_target(&mut state);
                }
            }
            ToOrigin::Registered { link, stamp } => {
                if let Some(consumer) = find_link(&mut state, link) {
                    consumer.options.registered = Some(stamp);
                }
            }
        }
    }
}

/// Remember a publisher waiting for room (once; bounded by the links).
fn add_waiter(state: &mut State, sink: &Sink, tag: u64) {
    if !state
        .waiters
        .iter()
        .any(|(s, t)| *t == tag && s.same_connection(sink))
    {
        state.waiters.push((sink.clone(), tag));
    }
}

impl Queue for RoutedQueue {
    fn address(&self) -> &QueueAddress {
        &self.address
    }

    fn publish(
        &self,
        message: Message,
        confirm: Option<PublishConfirm>,
    ) -> Result<PublishStatus, QueueError> {
        let mut state = self.lock();
        let (message, confirm) = match (state.target, self.local()) {
            (Target::Local, Some(local)) => {
                // The fast path: no hop, the local queue reports to the
                // client's sink itself.
                drop(state);
                match local.try_publish(message, confirm) {
                    Ok(status) => return Ok(status),
                    Err((QueueError::NotLeader { .. }, message, confirm)) => {
                        state = self.lock();
                        self.lose_target(&mut state);
                        (message, confirm)
                    }
                    Err((error, ..)) => return Err(error),
                }
            }
            _ => (message, confirm),
        };
        let token = state.next_token;
        state.next_token += 1;
        let held = Held {
            token,
            message,
            confirm,
        };
        match state.target {
            Target::Remote(node) => self.publish_remote(&mut state, node, held),
            Target::Searching(_) if state.given_up(self.fwd.leader_wait()) => {
                if let Some(confirm) = held.confirm {
                    confirm.report(Outcome::Released);
                }
                return Err(QueueError::NotLeader {
                    queue: self.address.to_string(),
                    leader: None,
                });
            }
            // Sent (or released) once a leader is found.
            _ => state.backlog.push_back(held),
        }
        Ok(PublishStatus::Pending)
    }

    fn has_capacity(&self, sink: &Sink, tag: u64) -> bool {
        let mut state = self.lock();
        if let (Target::Local, Some(local)) = (state.target, self.local()) {
            drop(state);
            if local.has_capacity(sink, tag) {
                return true;
            }
            // The local queue wakes it; so do we if leadership moves away
            // first (an extra `Capacity` is harmless, a missing one would
            // leave the publisher without credit for good).
            state = self.lock();
            if state.target == Target::Local {
                add_waiter(&mut state, sink, tag);
                return false;
            }
        }
        let room = Self::in_flight(&state) < self.window;
        match state.target {
            Target::Searching(_) if state.given_up(self.fwd.leader_wait()) => {
                // No leader in time (or cut off): let the publisher send, so its next
                // publish is refused with an error instead of waiting for
                // credit forever.
                return true;
            }
            Target::Searching(_) => {}
            _ if room => return true,
            _ => {}
        }
        add_waiter(&mut state, sink, tag);
        false
    }

    fn subscribe(
        &self,
        sink: Sink,
        tag: u64,
        options: ConsumerOptions,
    ) -> Result<ConsumerId, QueueError> {
        let mut state = self.lock();
        if state.given_up(self.fwd.leader_wait()) {
            return Err(QueueError::NotLeader {
                queue: self.address.to_string(),
                leader: None,
            });
        }
        let id = ConsumerId(state.next_consumer);
        state.next_consumer += 1;
        state.consumers.insert(
            id,
            RConsumer {
                sink,
                tag,
                credit_limit: 0,
                drain: false,
                at: At::Nowhere { delivery_count: 0 },
                options,
                held_settles: Settles::new(),
                in_doubt: Settles::new(),
            },
        );
        self.attach(&mut state, id);
        // In use: the follower probes at its busy pace.
        self.kick.notify_one();
        Ok(id)
    }

    fn flow(&self, consumer: ConsumerId, credit_limit: u32, drain: bool) {
        let mut state = self.lock();
        let Some(c) = state.consumers.get_mut(&consumer) else {
            return;
        };
        c.credit_limit = credit_limit;
        c.drain = drain;
        match c.at {
            At::Local(id) => {
                if let Some(local) = self.local() {
                    local.flow(id, credit_limit, drain);
                }
            }
            At::Remote {
                node, link, base, ..
            } => {
                let flow = ToServer::Flow {
                    link,
                    credit_limit: credit_limit.wrapping_sub(base),
                    drain,
                };
                self.send(&mut state, node, &flow, Bytes::new());
            }
            At::Nowhere { .. } => {} // applied when attached
        }
    }

    fn settle(&self, consumer: ConsumerId, message: MessageId, outcome: Outcome) {
        let mut state = self.lock();
        let Some(c) = state.consumers.get_mut(&consumer) else {
            return;
        };
        match c.at {
            At::Local(id) => match self.local() {
                Some(local) if local.is_leading() => local.settle(id, message, outcome),
                _ => {
                    // Stepped down under us: settle by id at the new leader.
                    hold_settle(c, message, outcome);
                    self.kick.notify_one();
                }
            },
            At::Remote { node, link, .. } => {
                let settle = Settles::from([(message, outcome)]);
                self.send_settles(&mut state, consumer, (node, link), settle);
            }
            At::Nowhere { .. } => hold_settle(c, message, outcome),
        }
    }

    fn unsubscribe(&self, consumer: ConsumerId) {
        let mut state = self.lock();
        let Some(c) = state.consumers.remove(&consumer) else {
            return;
        };
        crate::queue::shed::shed_map(&mut state.consumers);
        match c.at {
            At::Local(id) => {
                if let Some(local) = self.local() {
                    local.unsubscribe(id);
                }
            }
            At::Remote { node, link, .. } => self.fwd.close_link(node, link),
            At::Nowhere { .. } => {}
        }
        // Not dropped: they go to the leader once one is known.
        self.orphan_settles(&mut state, c.held_settles);
    }

    fn has_room_for(&self, messages: usize, bytes: u64) -> bool {
        self.room_routed(messages, bytes)
    }

    fn commit(&self, part: TxnPart, confirm: PublishConfirm) -> Result<PublishStatus, QueueError> {
        self.commit_routed(part, confirm)
    }

    fn stats(&self) -> QueueStats {
        if let Some(local) = self.local() {
            return local.stats();
        }
        let state = self.lock();
        QueueStats {
            address: self.address.to_string(),
            consumers: state.consumers.len(),
            ..QueueStats::default()
        }
    }
}
