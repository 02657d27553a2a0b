//! [`NodePolicies`]: replacing the node's queue policy set at run time
//! (`Broker::set_policies`: SIGHUP in `ramqp-brokerd`, `PUT /api/policies`)
//! and putting it in force on every open queue: the transient queues of
//! the registry and this node's quorum-queue replicas. New queues resolve
//! their policy when they open (`Registry::create`, `QuorumNode::ensure_open`).

use std::sync::Arc;

use super::registry::Registry;
use crate::config::PolicyConfig;
use crate::lock_order::{OrderedMutex, Rank};
use crate::queue::{Policies, PolicyError, PolicySet, QueueAddress, QueueKind, QueuePolicy};
use crate::quorum::QuorumNode;

/// The node's policy set and the queues it applies to.
pub(crate) struct NodePolicies {
    pub(crate) policies: Arc<Policies>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) quorum: Arc<QuorumNode>,
    /// One change at a time, so two changes cannot leave queues with a
    /// mix of both sets.
    changing: OrderedMutex<()>,
}

impl NodePolicies {
    pub(crate) fn new(
        policies: Arc<Policies>,
        registry: Arc<Registry>,
        quorum: Arc<QuorumNode>,
    ) -> NodePolicies {
        NodePolicies {
            policies,
            registry,
            quorum,
            changing: OrderedMutex::new(Rank::PolicyChange, ()),
        }
    }

    /// Check `configs` and put them in force on every queue of this node;
    /// the number of policies. A refused set changes nothing.
    pub(crate) fn replace(&self, configs: &[PolicyConfig]) -> Result<usize, PolicyError> {
        let set = PolicySet::compile(configs)?;
        let n = set.len();
        let _one_at_a_time = self.changing.lock();
        self.policies.replace(set);
        self.registry.apply_policies();
        self.quorum.apply_policies();
        tracing::info!(policies = n, "queue policies in force");
        Ok(n)
    }

    /// The policies in force, as written.
    pub(crate) fn current(&self) -> Vec<PolicyConfig> {
        self.policies.current().to_config()
    }

    /// The policy a queue of this node has now (`None` for no policy or
    /// no such queue here).
    pub(crate) fn of_queue(&self, address: &QueueAddress) -> Option<Arc<QueuePolicy>> {
        match address.kind() {
            QueueKind::Transient => self.registry.transient(address)?.policy(),
            QueueKind::Quorum => self.quorum.get(address)?.policy(),
        }
    }
}
