//! Following the leader: each [`RoutedQueue`] has one task that finds
//! where its queue is served (the local Raft metrics, else asking the
//! replicas), watches that target (local leadership changes, a periodic
//! probe of a remote target), and moves every link when it changes:
//!
//! - consumers are re-subscribed at the new target with their current
//!   delivery-count, credit limit and drain; accepted/rejected settlements
//!   made meanwhile are sent on by message id (ids are replicated);
//! - publishes sent to the old target whose outcome is unknown are
//!   reported `released` (never a false `accepted`; the client resends);
//!   publishes taken while searching are sent to the new target;
//! - only when no leader is found within `quorum.leader_wait_ms` are the
//!   consumers closed and further publishes refused; sooner when the
//!   search shows this node cut off from whoever serves the queue
//!   (`cut_off.rs`), so its clients go to another node instead of
//!   waiting for the network to heal.
//!
//! Lost links and shipments at a remote target are noticed through its
//! numbered streams (`streams.rs`).

use openraft::async_runtime::watch::WatchReceiver;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::cut_off::{Cut, CutWatch, Sightings};
use super::protocol::{Reply, Request};
use super::routed::{At, RConsumer, RoutedQueue, State, Target};
use crate::codec::definitions::condition;
use crate::net::NodeId;
use crate::queue::{Outcome, QueueEventKind};

/// How often a remote target in use is probed (is it still the leader,
/// does it still know our links).
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// How long a quorum queue must be missing from the metadata while its
/// leader is searched for before its links are closed as deleted.
const DELETED_GRACE: Duration = Duration::from_secs(1);
/// Pause between attempts to find a leader.
const SEARCH_PAUSE: Duration = Duration::from_millis(100);
/// Pause between attempts once the leader wait has run out.
const SEARCH_PAUSE_SLOW: Duration = Duration::from_millis(500);
/// Bound on one control call.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Wake-up period of a local target's watch while the queue has links here
/// (cheap; catches anything the leadership flips missed).
const LOCAL_RECHECK: Duration = Duration::from_secs(1);
/// A remote target's probe period while the queue has no link here and no
/// local replica to watch (a link attaching kicks the task). With one, it
/// has no timer at all: every routed queue ever used stays, and at 10,000
/// queues 30 s re-checks were about a quarter of an idle node's CPU.
const IDLE_RECHECK: Duration = Duration::from_secs(30);

/// Sleeps `period`, or for ever when there is none.
async fn sleep_for(period: Option<Duration>) {
    match period {
        Some(period) => tokio::time::sleep(period).await,
        None => std::future::pending().await,
    }
}

/// The consumer attached through remote link `link`.
pub(super) fn find_link(state: &mut State, link: u64) -> Option<&mut RConsumer> {
    state
        .consumers
        .values_mut()
        .find(|c| matches!(c.at, At::Remote { link: l, .. } if l == link))
}

impl RoutedQueue {
    /// Report `released` for publishes sent more than `limit` ago: bounded
    /// waiting for a publisher whatever happens to the target. A late
    /// `accepted` for one of them is ignored, so the worst case is a
    /// duplicate when the client resends, never a false `accepted`.
    pub(super) fn expire_pending(&self, limit: std::time::Duration) {
        let mut state = self.lock();
        let expired: Vec<u64> = state
            .pending
            .iter()
            .filter(|(_, (sent, _))| sent.elapsed() > limit)
            .map(|(token, _)| *token)
            .collect();
        if expired.is_empty() {
            return;
        }
        tracing::debug!(queue = %self.address, n = expired.len(), "forwarded publishes timed out");
        for token in expired {
            if let Some((_, Some(confirm))) = state.pending.remove(&token) {
                confirm.report(Outcome::Released);
            }
        }
        // Their late outcomes must not match a new publish: new link.
        if let Some(link) = state.pub_link.take() {
            match state.target {
                Target::Remote(node) => self.fwd.close_link(node, link),
                _ => self.fwd.forget_link(link),
            }
        }
        self.wake_publishers(&mut state);
    }

    /// Close the publishing link at `node` if nothing is in flight on it
    /// (a later publish opens another, `publisher_link`): an open one kept
    /// an idle queue in use, probed twice a second for good, and with
    /// quiet quorum groups those probes were most of an idle cluster's
    /// traffic (1,000 queues published to through a follower).
    pub(super) fn close_idle_publisher(&self, node: NodeId) {
        let mut state = self.lock();
        let idle = state.pending.is_empty() && state.backlog.is_empty();
        if idle && state.target == Target::Remote(node) {
            if let Some(link) = state.pub_link.take() {
                self.fwd.close_link(node, link);
            }
        }
    }

    /// Links this queue holds at `node` now (for probes).
    pub(super) fn links_at(&self, state: &State, node: NodeId) -> Vec<u64> {
        let mut links: Vec<u64> = state
            .consumers
            .values()
            .filter_map(|c| match c.at {
                At::Remote { node: n, link, .. } if n == node => Some(link),
                _ => None,
            })
            .collect();
        links.extend(state.pub_link);
        links
    }

    /// Whether the queue has links or publishes that need a live target.
    pub(super) fn in_use(&self) -> bool {
        let state = self.lock();
        state.holds_work() || state.pub_link.is_some()
    }

    /// A search found `target`: move there unless something else did.
    fn found(&self, target: Target) -> bool {
        let mut state = self.lock();
        if !matches!(state.target, Target::Searching(_)) {
            return false;
        }
        self.retarget(&mut state, target);
        true
    }

    /// No leader within the wait, or `cut` off from it: close the
    /// consumers (the engine detaches them) and release the publishes held
    /// for a leader; while cut off, new links are refused too.
    fn give_up(&self, cut: Option<Cut>) {
        let why = match cut {
            Some(cut) => {
                let mut state = self.lock();
                if matches!(state.target, Target::Searching(_)) {
                    state.cut_off = true;
                }
                cut.describe()
            }
            None => "no leader found in time".to_string(),
        };
        tracing::info!(queue = %self.address, why, "closing its links");
        self.close_all(condition::DETACH_FORCED, format!("{}: {why}", self.address));
    }

    /// Close every consumer with `condition` and release what publishers
    /// have held here.
    pub(super) fn close_all(&self, condition: &'static str, description: String) {
        let mut state = self.lock();
        let consumers: Vec<RConsumer> = state.consumers.drain().map(|(_, c)| c).collect();
        for consumer in consumers {
            // What they settled still goes to the leader, once one is known
            // (a deleted queue has none).
            if condition != condition::RESOURCE_DELETED {
                self.orphan_settles(&mut state, consumer.held_settles);
            }
            consumer.sink.send(
                consumer.tag,
                QueueEventKind::Closed {
                    condition,
                    description: description.clone(),
                },
            );
        }
        // Waiting publishers get credit now, and an error on their next
        // publish (see `has_capacity`), rather than waiting forever.
        for (sink, tag) in state.waiters.drain(..) {
            sink.send(tag, QueueEventKind::Capacity);
        }
        for held in state.backlog.drain(..) {
            if let Some(confirm) = held.confirm {
                confirm.report(Outcome::Released);
            }
        }
    }

    /// Where the queue is served now, if that can be found out; else
    /// whether this node looks cut off from it (see `cut_off.rs`).
    async fn locate(&self) -> Result<Target, Option<Cut>> {
        let me = self.fwd.node_id;
        let mut candidates: Vec<NodeId> = Vec::new();
        let mut leads_alone = false;
        let mut own_contact = None;
        if let Some(owner) = self.owner {
            candidates.push(owner);
        } else {
            if let Some(local) = self.local_or_open() {
                if local.sync_leadership() {
                    return Ok(Target::Local);
                }
                leads_alone = local.leads_without_quorum();
                own_contact = local.leader_contact();
                candidates.extend(local.leader());
            }
            candidates.extend(self.fwd.replicas(self.address.name()));
        }
        let rules = self.fwd.cut_rules();
        let mut seen = Sightings::default();
        let mut tried = Vec::new();
        while let Some(node) = candidates.first().copied() {
            candidates.remove(0);
            if node == me || tried.contains(&node) {
                continue;
            }
            tried.push(node);
            match self.probe(node, Vec::new()).await {
                Some(Reply::Probed {
                    serves: true,
                    shipped,
                    ..
                }) => {
                    if !self.fwd.streams.adopt(node, shipped) {
                        // A new stream: other queues' links there are gone.
                        self.fwd.resync(node);
                    }
                    return Ok(Target::Remote(node));
                }
                Some(Reply::Probed {
                    leader,
                    leader_heard_ms,
                    ..
                }) => {
                    let heard = leader_heard_ms.map(Duration::from_millis);
                    seen.answered(&rules, leader, heard);
                    if let Some(leader) = leader {
                        candidates.insert(0, leader);
                    }
                }
                Some(_) => seen.answered(&rules, None, None),
                None => seen.silent(node),
            }
        }
        // A transient queue has no replicas to tell a cut from a restart
        // of its owner: it keeps the plain leader wait.
        if self.owner.is_some() {
            return Err(None);
        }
        Err(seen.verdict(&rules, me, leads_alone, own_contact))
    }

    /// The local replica, opened since this queue was made if need be.
    fn local_or_open(&self) -> Option<&Arc<crate::quorum::QuorumQueue>> {
        if self.local().is_none() {
            if let Some(queue) = self.fwd.quorum.get(&self.address) {
                let _ = self.local.set(queue);
            }
        }
        self.local()
    }

    async fn probe(&self, node: NodeId, links: Vec<u64>) -> Option<Reply> {
        let request = Request::Probe {
            address: self.address.to_string(),
            links,
        };
        tokio::time::timeout(CALL_TIMEOUT, self.fwd.call(node, &request))
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Check a remote target: still serving, still knowing our links?
    async fn check_remote(&self, node: NodeId) {
        let links = self.links_at(&self.lock(), node);
        let reply = self.probe(node, links).await;
        if let Some(Reply::Probed { shipped, .. }) = &reply {
            if !self.fwd.streams.probed(node, *shipped) {
                tracing::info!(queue = %self.address, node, "lost shipments or a new stream; re-opening links");
                self.fwd.resync(node);
                return;
            }
        }
        let mut state = self.lock();
        if state.target != Target::Remote(node) {
            return;
        }
        match reply {
            Some(Reply::Probed {
                serves: true,
                unknown,
                ..
            }) => {
                if !unknown.is_empty() {
                    // It dropped links of ours (a partition healed): give
                    // them fresh ones there.
                    tracing::debug!(queue = %self.address, node, "re-attaching dropped links");
                    self.retarget(&mut state, Target::Remote(node));
                }
            }
            _ => self.lose_target(&mut state),
        }
    }
}

/// The follower task of one routed queue; ends when the queue is dropped.
pub(super) async fn follow(queue: Weak<RoutedQueue>) {
    let mut gave_up = false;
    let mut cut_watch = CutWatch::default();
    // When the last target was found; see `flapping` below.
    let mut last_found: Option<Instant> = None;
    loop {
        let Some(q) = queue.upgrade() else {
            return;
        };
        let target = q.target();
        if !matches!(target, Target::Searching(_)) {
            cut_watch.clear();
        }
        match target {
            Target::Searching(since) => {
                let cut = match q.locate().await {
                    Ok(found) => {
                        cut_watch.clear();
                        // The target found last time was lost again at
                        // once: two views of the leader disagree (an
                        // isolated old leader still answering that it
                        // leads, while this node's replica follows a new
                        // one). Look again after a pause instead of
                        // cycling locate / found / lost at full speed (it
                        // spun at 100% of a core in forwarding_cut_off).
                        let flapping = last_found.is_some_and(|t| t.elapsed() < SEARCH_PAUSE);
                        if flapping {
                            last_found = None;
                            drop(q);
                            tokio::time::sleep(SEARCH_PAUSE).await;
                            continue;
                        }
                        if q.found(found) {
                            last_found = Some(Instant::now());
                            gave_up = false;
                            continue;
                        }
                        None
                    }
                    Err(verdict) => cut_watch.observe(&q.fwd.cut_rules(), verdict, Instant::now()),
                };
                // Undeclared for a while (not a declaration that has not
                // reached this node's metadata yet).
                let deleted = q.owner.is_none()
                    && since.elapsed() > DELETED_GRACE
                    && q.fwd.quorum.declaration(q.address.name()) == Some(false);
                if deleted && !gave_up {
                    // Deleted by an operator: no leader will come back.
                    q.close_all(
                        condition::RESOURCE_DELETED,
                        format!("queue {} was deleted", q.address),
                    );
                    gave_up = true;
                    continue;
                }
                let waited = since.elapsed() > q.fwd.leader_wait() || cut.is_some();
                if waited && !gave_up {
                    q.give_up(cut);
                    gave_up = true;
                }
                let pause = if waited {
                    SEARCH_PAUSE_SLOW
                } else {
                    SEARCH_PAUSE
                };
                drop(q);
                tokio::time::sleep(pause).await;
            }
            Target::Local => {
                q.flush_orphans().await;
                let Some(local) = q.local().cloned() else {
                    q.lose_target(&mut q.lock());
                    continue;
                };
                // Taken before the sync, so a flip after it wakes the wait.
                // Not the Raft metrics: openraft sends those at every turn
                // of the group's core, several per publish.
                let flips = local.leading_flips();
                if !local.sync_leadership() {
                    q.lose_target(&mut q.lock());
                    continue;
                }
                let recheck = q.in_use().then_some(LOCAL_RECHECK);
                let kick = q.kick.clone();
                // Not held while waiting (up to 30 s): a node stopped or
                // crashed in this process lets go of its log store only
                // once its queues are gone.
                drop((local, q));
                tokio::select! {
                    _ = flips.notified() => {}
                    _ = kick.notified() => {}
                    _ = sleep_for(recheck) => {}
                }
            }
            Target::Remote(node) => {
                q.flush_orphans().await;
                // The local replica's leader (server metrics: not woken
                // at every turn of the group's core).
                let metrics = q.local_or_open().map(|l| l.server_metrics());
                let probe = if q.in_use() {
                    Some(PROBE_INTERVAL)
                } else {
                    metrics.is_none().then_some(IDLE_RECHECK)
                };
                let leader_moved = async {
                    match metrics {
                        Some(mut m) => {
                            drop(m.borrow_and_update());
                            // A stopped group's metrics end at once and
                            // for good: then only the probe interval or a
                            // kick wakes this loop (it spun at 100% of a
                            // core before).
                            if m.changed().await.is_err() {
                                std::future::pending::<()>().await;
                            }
                        }
                        None => std::future::pending::<()>().await,
                    }
                };
                let kick = q.kick.clone();
                drop(q); // not held while waiting (see above)
                tokio::select! {
                    _ = leader_moved => {}
                    _ = kick.notified() => {}
                    _ = sleep_for(probe) => {}
                }
                let Some(q) = queue.upgrade() else {
                    return;
                };
                if q.target() != Target::Remote(node) {
                    continue;
                }
                let local_view = q.local().and_then(|l| {
                    if l.sync_leadership() {
                        Some(q.fwd.node_id)
                    } else {
                        l.leader()
                    }
                });
                q.expire_pending(q.fwd.publish_timeout());
                q.close_idle_publisher(node);
                if local_view.is_some_and(|leader| leader != node) {
                    q.lose_target(&mut q.lock());
                } else if q.in_use() {
                    q.check_remote(node).await;
                }
            }
        }
    }
}
