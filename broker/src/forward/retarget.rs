//! Moving a routed queue's links to a new target (`retarget`) and
//! attaching one consumer where the queue is served now (`attach`): the
//! step the follower task (`follow.rs`) takes when the leader moves. Knows
//! the routed queue's state and the local quorum queue's routed-consumer
//! calls; not how targets are found or watched.

use bytes::Bytes;

use super::held_settles::doubt_sent;
use super::protocol::ToServer;
use super::routed::{At, RoutedQueue, State, Target};
use crate::queue::{ConsumerId, Outcome};

impl RoutedQueue {
    /// Move every link to `target` (see `follow.rs`'s module docs). The
    /// caller holds the state lock.
    pub(super) fn retarget(&self, state: &mut State, target: Target) {
        let old = state.target;
        if let Some(link) = state.pub_link.take() {
            match old {
                Target::Remote(node) => self.fwd.close_link(node, link),
                _ => self.fwd.forget_link(link),
            }
        }
        for (_, (_, confirm)) in state.pending.drain() {
            if let Some(confirm) = confirm {
                confirm.report(Outcome::Released);
            }
        }
        for consumer in state.consumers.values_mut() {
            let delivery_count = match consumer.at {
                At::Local(id) => self
                    .local()
                    .and_then(|l| l.release_routed(id))
                    .map_or(consumer.credit_limit, |(count, _)| count),
                At::Remote {
                    node,
                    link,
                    delivery_count,
                    ..
                } => {
                    // A dead node's links die with it, and a live one
                    // audits ours.
                    self.fwd.close_link(node, link);
                    doubt_sent(consumer);
                    delivery_count
                }
                At::Nowhere { delivery_count } => delivery_count,
            };
            consumer.at = At::Nowhere { delivery_count };
        }
        state.target = target;
        if matches!(target, Target::Searching(_)) {
            return;
        }
        state.cut_off = false;
        tracing::debug!(queue = %self.address, ?old, ?target, "following the leader");
        let ids: Vec<ConsumerId> = state.consumers.keys().copied().collect();
        for id in ids {
            if state.target != target {
                return; // a send failed: searching again
            }
            self.attach(state, id);
        }
        while state.target == target {
            let Some(held) = state.backlog.pop_front() else {
                break;
            };
            match target {
                Target::Local => {
                    let Some(local) = self.local() else { break };
                    if let Err((_, message, confirm)) =
                        local.try_publish(held.message, held.confirm)
                    {
                        state.backlog.push_front(super::routed::Held {
                            token: held.token,
                            message,
                            confirm,
                        });
                        self.lose_target(state);
                    }
                }
                Target::Remote(node) => self.publish_remote(state, node, held),
                Target::Searching(_) => break,
            }
        }
        self.wake_publishers(state);
    }

    /// Attach one (detached) consumer at the current target.
    pub(super) fn attach(&self, state: &mut State, id: ConsumerId) {
        let target = state.target;
        let Some(consumer) = state.consumers.get_mut(&id) else {
            return;
        };
        let At::Nowhere { delivery_count } = consumer.at else {
            return;
        };
        match target {
            Target::Local => {
                let Some(local) = self.local() else {
                    return self.lose_target(state);
                };
                // Before it subscribes, so that what the client settled
                // through an earlier leader is not delivered to it again.
                let held = &consumer.held_settles;
                if !held
                    .iter()
                    .all(|&(m, outcome)| local.settle_by_id(m, outcome))
                {
                    return self.lose_target(state); // not leading after all
                }
                consumer.held_settles.clear();
                match local.subscribe_routed(
                    consumer.sink.clone(),
                    consumer.tag,
                    (delivery_count, consumer.credit_limit, consumer.drain),
                    consumer.options.clone(),
                ) {
                    Ok(local_id) => {
                        consumer.at = At::Local(local_id);
                        // Its place in the consumer order, for the next leader.
                        if let Some(stamp) = local.stamp_of(local_id) {
                            consumer.options.registered = Some(stamp);
                        }
                    }
                    Err(_) => self.lose_target(state),
                }
            }
            Target::Remote(node) => {
                let link = self.fwd.new_link(&self.weak);
                consumer.at = At::Remote {
                    node,
                    link,
                    base: delivery_count,
                    delivery_count,
                };
                let held = std::mem::take(&mut consumer.held_settles);
                let flow = ToServer::Flow {
                    link,
                    credit_limit: consumer.credit_limit.wrapping_sub(delivery_count),
                    drain: consumer.drain,
                };
                let subscribe = ToServer::subscribe(link, &self.address, &consumer.options);
                self.send(state, node, &subscribe, Bytes::new());
                // Held again if a send fails: the next leader gets them.
                self.send_settles(state, id, (node, link), held);
                if state.target == target {
                    self.send(state, node, &flow, Bytes::new());
                }
            }
            Target::Searching(_) => {}
        }
    }
}
