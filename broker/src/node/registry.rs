//! The node's queues by address: lookup, auto-create on first attach, and
//! the list for management and metrics. Transient queues owned by this
//! node live here; quorum queues are opened (and created) through the
//! node's [`QuorumNode`]. Every `/quorum/` address and every transient
//! queue owned by another node is served through a [`RoutedQueue`], which
//! follows the queue's leader or owner.
//!
//! It implements the engine's [`QueueDirectory`] and forwarding's
//! [`LocalQueues`]; neither layer sees this type.
//!
//! A routed queue nothing uses is let go (`drop_unused_routes`, swept by
//! `route_sweep.rs`); the next attach makes it again.
//!
//! Locks: `queues` and `routed` are each held only for a map operation,
//! never together and never while calling into a queue or the quorum node,
//! except that the sweep looks at each routed queue's state under the
//! `routed` write lock (a routed queue never takes it; `lock_order.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::config::QueuesConfig;
use crate::forward::{Forwarder, LocalQueues, RoutedQueue, Target};
use crate::queue::dead_letter::SharedRouter;
use crate::queue::{
    LookupError, Policies, PrepareFuture, Queue, QueueAddress, QueueDirectory, QueueKind,
    QueueStats, TransientQueue, DYNAMIC_PREFIX,
};
use crate::quorum::QuorumNode;

/// All queues of this node.
pub(crate) struct Registry {
    config: QueuesConfig,
    queues: RwLock<HashMap<QueueAddress, Arc<TransientQueue>>>,
    /// Dynamic queues made so far (part of their generated names).
    dynamic_made: AtomicU64,
    /// Random per registry, so generated names differ across restarts.
    dynamic_salt: u64,
    quorum: Arc<QuorumNode>,
    forwarder: Arc<Forwarder>,
    routed: RwLock<HashMap<QueueAddress, Arc<RoutedQueue>>>,
    /// The routed queues the last sweep found unused (dropped if the next
    /// one finds them so again).
    unused_routes: Mutex<HashSet<QueueAddress>>,
    /// The node's queue policies, resolved when a transient queue is made.
    policies: Arc<Policies>,
    /// Handed to every transient queue made here.
    dead_letters: SharedRouter,
}

/// Names tried for a dynamic queue before giving up (see `dynamic_address`).
const DYNAMIC_NAME_TRIES: usize = 10_000;

/// Poll period while an attach waits for a routed queue to find its target.
const TARGET_POLL: Duration = Duration::from_millis(10);

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// A registry with the configured queues declared.
    pub(crate) fn new(
        config: QueuesConfig,
        quorum: Arc<QuorumNode>,
        forwarder: Arc<Forwarder>,
        policies: Arc<Policies>,
        dead_letters: SharedRouter,
    ) -> Registry {
        let registry = Registry {
            queues: RwLock::new(HashMap::new()),
            dynamic_made: AtomicU64::new(0),
            dynamic_salt: {
                use std::hash::{BuildHasher, Hasher};
                // std seeds RandomState from the OS's randomness.
                std::collections::hash_map::RandomState::new()
                    .build_hasher()
                    .finish()
            },
            config,
            quorum,
            forwarder,
            routed: RwLock::new(HashMap::new()),
            unused_routes: Mutex::new(HashSet::new()),
            policies,
            dead_letters,
        };
        for name in registry.config.declare.clone() {
            if let Ok(address) = QueueAddress::parse(&format!("/queues/{name}")) {
                if registry.owns(&address) {
                    registry.create(address);
                }
            }
        }
        registry
    }

    /// Whether this node holds the transient queue at `address` itself.
    fn owns(&self, address: &QueueAddress) -> bool {
        self.forwarder.owner_of(address.name()) == self.forwarder.node_id
    }

    fn create(&self, address: QueueAddress) -> Arc<dyn Queue> {
        // Resolved under the map's write lock: `apply_policies` replaces
        // the set before it lists the map, so a queue made meanwhile has
        // either the new policy or is in the list.
        write(&self.queues)
            .entry(address.clone())
            .or_insert_with(|| {
                tracing::info!(queue = %address, "queue created");
                let policy = self.policies.resolve(&address);
                let queue =
                    TransientQueue::new(address, self.config.max_messages, self.config.max_bytes)
                        .with_alarm(self.quorum.alarm())
                        .with_dead_letter_router(self.dead_letters.clone());
                queue.set_policy(policy);
                Arc::new(queue)
            })
            .clone()
    }

    /// Set every transient queue's policy from the node's current set
    /// (after it was replaced).
    pub(crate) fn apply_policies(&self) {
        let set = self.policies.current();
        let queues: Vec<Arc<TransientQueue>> = read(&self.queues).values().cloned().collect();
        for queue in queues {
            queue.set_policy(set.resolve(queue.address()));
        }
    }

    /// Remove the expired messages at the head of every transient queue
    /// held here (`expiry_sweep.rs`).
    pub(crate) fn sweep_expired(&self) {
        let queues: Vec<Arc<TransientQueue>> = read(&self.queues).values().cloned().collect();
        for queue in queues {
            queue.sweep_expired();
        }
    }

    /// The transient queue at `address` held here, if there is one.
    pub(crate) fn transient(&self, address: &QueueAddress) -> Option<Arc<TransientQueue>> {
        read(&self.queues).get(address).cloned()
    }

    /// A fresh dynamic queue name that this node owns (a transient queue
    /// lives on `owner_of(name)`, so replies from other nodes find it).
    fn dynamic_address(&self) -> Option<QueueAddress> {
        // With n members one name in n is ours; this bound is never near.
        for _ in 0..DYNAMIC_NAME_TRIES {
            let n = self.dynamic_made.fetch_add(1, Ordering::Relaxed);
            let name = format!(
                "{DYNAMIC_PREFIX}{}-{:016x}-{n}",
                self.forwarder.node_id, self.dynamic_salt
            );
            let address = QueueAddress::parse(&format!("/queues/{name}")).ok()?;
            if self.owns(&address) {
                return Some(address);
            }
        }
        None
    }

    fn knows_routed(&self, address: &QueueAddress) -> bool {
        let stale = match read(&self.routed).get(address) {
            None => return false,
            // A deleted quorum queue's: a new declaration gets a new one.
            Some(routed) => {
                routed.is_stale()
                    || (address.kind() == QueueKind::Quorum
                        && self.quorum.declaration(address.name()) == Some(false))
            }
        };
        if stale {
            write(&self.routed).remove(address);
        }
        !stale
    }

    /// The node that holds transient queue `address`.
    pub(crate) fn owner_of(&self, address: &QueueAddress) -> u64 {
        self.forwarder.owner_of(address.name())
    }

    /// Delete transient queue `address` held here; how many messages it
    /// held, or `None` if there is no such queue here.
    pub(crate) fn delete_transient(&self, address: &QueueAddress) -> Option<usize> {
        let queue = write(&self.queues).remove(address)?;
        let stats = queue.stats();
        queue.delete();
        tracing::info!(queue = %address, "queue deleted");
        Some(stats.ready + stats.unsettled)
    }

    /// The stats of the transient queues held here, unsorted.
    pub(crate) fn transient_stats(&self) -> Vec<QueueStats> {
        let queues: Vec<Arc<TransientQueue>> = read(&self.queues).values().cloned().collect();
        queues.iter().map(|q| q.stats()).collect()
    }

    /// Purge transient queue `address` held here; how many messages were
    /// dropped, or `None` if there is no such queue here.
    pub(crate) fn purge_transient(&self, address: &QueueAddress) -> Option<usize> {
        let queue = read(&self.queues).get(address).cloned()?;
        Some(queue.purge())
    }

    /// The routed queue for `address`, made on first use.
    fn routed(&self, address: &QueueAddress) -> Arc<RoutedQueue> {
        if self.knows_routed(address) {
            if let Some(queue) = read(&self.routed).get(address) {
                return queue.clone();
            }
        }
        // Looked up before the write lock: the quorum node takes its own.
        let (local, owner) = match address.kind() {
            QueueKind::Quorum => (self.quorum.get(address), None),
            _ => (None, Some(self.forwarder.owner_of(address.name()))),
        };
        write(&self.routed)
            .entry(address.clone())
            .or_insert_with(|| {
                RoutedQueue::new(address.clone(), self.forwarder.clone(), local, owner)
            })
            .clone()
    }

    /// Drop the routed queues nothing uses: held by no link (the map's
    /// handle is their only one) and with nothing in them
    /// ([`RoutedQueue::is_unused`]), at the second sweep in a row that
    /// finds them so, which spares one just made for an attach under way.
    /// How many were dropped.
    pub(crate) fn drop_unused_routes(&self) -> usize {
        let mut seen = self.unused_routes.lock().unwrap_or_else(|p| p.into_inner());
        let mut unused = HashSet::new();
        let mut dropped = Vec::new();
        write(&self.routed).retain(|address, queue| {
            // Only the map holds it, so no new handle can appear meanwhile.
            if Arc::strong_count(queue) > 1 || !queue.is_unused() {
                return true;
            }
            if seen.contains(address) {
                // Dropped after the map's lock: its `Drop` sends on the
                // node transport.
                dropped.push(queue.clone());
                return false;
            }
            unused.insert(address.clone());
            true
        });
        *seen = unused;
        dropped.len()
    }

    /// How many routed queues the node holds now.
    pub(crate) fn routes(&self) -> usize {
        read(&self.routed).len()
    }

    async fn prepare_address(&self, address: &QueueAddress) -> Result<(), LookupError> {
        if address.kind() != QueueKind::Quorum {
            if !self.owns(address) {
                self.wait_for_target(&self.routed(address)).await;
            }
            return Ok(());
        }
        let unavailable = |e: String| LookupError::QuorumUnavailable(address.to_string(), e);
        let exists = self.knows_routed(address) || self.quorum.get(address).is_some();
        if !exists {
            // Declared but not open here: a non-replica whose routed queue
            // was let go (or a replica that has not opened it yet).
            let declared = self.quorum.is_declared(address.name());
            if !declared && !self.config.auto_create {
                return Err(LookupError::NotFound(address.to_string()));
            }
            // Declared in the cluster metadata first: its members decide
            // where the replicas are (see `quorum/placement.rs`).
            let members = self
                .quorum
                .place(address.name())
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            if members.contains(&self.quorum.node_id()) {
                self.quorum
                    .ensure(address.name())
                    .await
                    .map_err(|e| unavailable(e.to_string()))?;
            } else {
                self.forwarder
                    .create_remote(address)
                    .await
                    .map_err(unavailable)?;
            }
        }
        self.wait_for_target(&self.routed(address)).await;
        Ok(())
    }

    /// Wait (bounded by the leader wait) until `routed` knows its target,
    /// so a fresh link starts without a search. A search that gave up
    /// because this node is cut off is waited for only the shorter
    /// cut-off grace (the network may just have healed): the link is then
    /// answered with an error rather than after the whole leader wait.
    async fn wait_for_target(&self, routed: &RoutedQueue) {
        let started = tokio::time::Instant::now();
        let grace = self.forwarder.cut_off_grace();
        let _ = tokio::time::timeout(self.forwarder.leader_wait(), async {
            while matches!(routed.target(), Target::Searching(_))
                && !(routed.given_up() && started.elapsed() >= grace)
            {
                tokio::time::sleep(TARGET_POLL).await;
            }
        })
        .await;
    }

    fn local_transient(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, LookupError> {
        if let Some(queue) = read(&self.queues).get(address) {
            return Ok(queue.clone());
        }
        if !self.config.auto_create || address.name().starts_with(DYNAMIC_PREFIX) {
            return Err(LookupError::NotFound(address.to_string()));
        }
        Ok(self.create(address.clone()))
    }
}

impl QueueDirectory for Registry {
    /// Make sure the queue at `address` can be looked up: opens or creates
    /// a quorum queue's Raft group (on a replica; a non-replica asks one),
    /// and waits, bounded, until a routed queue knows where it is served.
    fn prepare<'a>(&'a self, address: &'a QueueAddress) -> PrepareFuture<'a> {
        Box::pin(self.prepare_address(address))
    }

    /// The queue at `address` as the engine uses it: a routed queue for a
    /// quorum queue (served here or forwarded) or a transient queue owned
    /// elsewhere, else this node's transient queue (created if auto-create
    /// is on).
    fn exists(&self, address: &QueueAddress) -> bool {
        if self.knows_routed(address) {
            return true;
        }
        match address.kind() {
            QueueKind::Quorum => {
                self.quorum.get(address).is_some() || self.quorum.is_declared(address.name())
            }
            // A transient queue owned by another node that this node has
            // never routed to: unknown here, so counted as new (the
            // careful answer: it asks for configure).
            _ => self.owns(address) && read(&self.queues).contains_key(address),
        }
    }

    fn held_elsewhere(&self, address: &QueueAddress) -> Option<u64> {
        (address.kind() == QueueKind::Transient && !self.owns(address))
            .then(|| self.owner_of(address))
    }

    fn lookup(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, LookupError> {
        if address.kind() == QueueKind::Quorum {
            // Declared: prepared, but its routed queue may have been let
            // go since (`drop_unused_routes`); made again here.
            let known = self.knows_routed(address)
                || self.quorum.get(address).is_some()
                || self.quorum.is_declared(address.name());
            if !known {
                return Err(LookupError::NotFound(address.to_string()));
            }
            return Ok(self.routed(address));
        }
        if !self.owns(address) {
            return Ok(self.routed(address));
        }
        self.local_transient(address)
    }

    fn create_dynamic(&self) -> Result<Arc<dyn Queue>, LookupError> {
        let address = self.dynamic_address().ok_or_else(|| {
            LookupError::NotFound("no dynamic queue name owned by this node".into())
        })?;
        tracing::debug!(queue = %address, "dynamic queue created");
        Ok(self.create(address))
    }

    fn delete_dynamic(&self, address: &QueueAddress) {
        if !address.name().starts_with(DYNAMIC_PREFIX) {
            return;
        }
        let removed = write(&self.queues).remove(address);
        if let Some(queue) = removed {
            tracing::debug!(queue = %address, "dynamic queue deleted");
            queue.delete();
        }
    }

    fn stats(&self) -> Vec<QueueStats> {
        let mut queues: Vec<Arc<dyn Queue>> = read(&self.queues)
            .values()
            .map(|q| q.clone() as Arc<dyn Queue>)
            .collect();
        queues.extend(
            self.quorum
                .queues()
                .into_iter()
                .map(|q| q as Arc<dyn Queue>),
        );
        let mut stats: Vec<QueueStats> = queues.iter().map(|q| q.stats()).collect();
        stats.sort_by(|a, b| a.address.cmp(&b.address));
        stats
    }
}

impl LocalQueues for Registry {
    fn local_queue(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, String> {
        if address.kind() == QueueKind::Quorum {
            let queue = self
                .quorum
                .get(address)
                .ok_or_else(|| format!("{address} has no replica here"))?;
            if !queue.sync_leadership() {
                return Err(format!("this node does not lead {address}"));
            }
            return Ok(queue);
        }
        if !self.owns(address) {
            return Err(format!("this node does not own {address}"));
        }
        self.local_transient(address).map_err(|e| e.to_string())
    }
}
