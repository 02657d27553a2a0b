//! Queue policies: [`QueuePolicy`] (what one policy asks of the queues it
//! matches), [`PolicySet`] (the node's policies, checked, in order: a
//! queue takes the FIRST whose pattern matches its address, as RabbitMQ
//! picks one policy per queue) and [`Policies`] (the node's current set,
//! replaced whole at run time).
//!
//! How a queue reads its policy: each queue keeps its effective policy as
//! an `Option<Arc<QueuePolicy>>` in its [`Dispatcher`](super::dispatch)
//! (`Dispatcher::policy`), under the lock the queue already takes for
//! every publish and delivery. A queue with no policy holds `None`, so it
//! pays one branch per message, no allocation and no extra lock. The
//! owner of the queues (the registry for transient queues, the quorum
//! node for quorum queues) resolves it when the queue opens and sets it
//! again on every open queue when the set changes.
//!
//! Per node: every node has its own set (its config file, its API). A
//! transient queue follows its owner node's set; a quorum queue's
//! decisions (expiry times, reject or drop) are made by its leader with
//! the leader's set and written into the Raft log, so replicas never
//! re-derive them from their own.
//!
//! Knows addresses and plain config; no node, no Raft.

use std::sync::{Arc, RwLock};

use super::address::QueueAddress;
use super::directory::DYNAMIC_PREFIX;
use super::pattern::{AddressPattern, PatternError};
use crate::config::{Overflow, PolicyConfig};

/// What one policy asks of the queues it applies to. Fields mirror
/// [`PolicyConfig`]; `None` is "no limit" / "not set".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuePolicy {
    /// Which addresses it applies to.
    pub pattern: AddressPattern,
    /// Most messages held (waiting and unsettled).
    pub max_length: Option<u64>,
    /// Most bytes of messages held.
    pub max_length_bytes: Option<u64>,
    /// What a full queue does with one more message.
    pub overflow: Overflow,
    /// Time to live from enqueue, ms (a shorter header ttl wins).
    pub message_ttl_ms: Option<u64>,
    /// Deliveries after which a message is dead-lettered (or dropped).
    pub delivery_limit: Option<u32>,
    /// Where dead-lettered messages go, checked to be a queue address.
    pub dead_letter_address: Option<QueueAddress>,
    /// Only one consumer at a time gets messages.
    pub single_active_consumer: bool,
}

impl QueuePolicy {
    /// Check one configured policy.
    pub fn compile(config: &PolicyConfig) -> Result<QueuePolicy, PolicyError> {
        let pattern = AddressPattern::parse(&config.pattern)?;
        let dead_letter_address = match &config.dead_letter_address {
            None => None,
            Some(dla) => {
                let address =
                    QueueAddress::parse(dla).map_err(|e| PolicyError::DeadLetterAddress {
                        pattern: config.pattern.clone(),
                        why: e.to_string(),
                    })?;
                if address.name().starts_with(DYNAMIC_PREFIX) {
                    return Err(PolicyError::DeadLetterAddress {
                        pattern: config.pattern.clone(),
                        why: format!(
                            "{dla} is a dynamic queue's name ({DYNAMIC_PREFIX}...), \
                             deleted with its link"
                        ),
                    });
                }
                Some(address)
            }
        };
        if config.delivery_limit == Some(0) {
            return Err(PolicyError::Invalid {
                pattern: config.pattern.clone(),
                why: "delivery_limit must be at least 1".into(),
            });
        }
        Ok(QueuePolicy {
            pattern,
            max_length: config.max_length,
            max_length_bytes: config.max_length_bytes,
            overflow: config.overflow,
            message_ttl_ms: config.message_ttl_ms,
            delivery_limit: config.delivery_limit,
            dead_letter_address,
            single_active_consumer: config.single_active_consumer,
        })
    }

    /// The policy as it would be written (for the API and logs).
    pub fn to_config(&self) -> PolicyConfig {
        PolicyConfig {
            pattern: self.pattern.to_string(),
            max_length: self.max_length,
            max_length_bytes: self.max_length_bytes,
            overflow: self.overflow,
            message_ttl_ms: self.message_ttl_ms,
            delivery_limit: self.delivery_limit,
            dead_letter_address: self.dead_letter_address.as_ref().map(|a| a.to_string()),
            single_active_consumer: self.single_active_consumer,
        }
    }

    /// Whether a queue holding `messages` messages of `bytes` bytes is at
    /// or past its length limits (so one more does not fit): its
    /// publishers get no new credit under reject-publish.
    pub fn is_full(&self, messages: u64, bytes: u64) -> bool {
        self.max_length.is_some_and(|max| messages >= max)
            || self.max_length_bytes.is_some_and(|max| bytes >= max)
    }

    /// Whether one more message of `len` bytes fits in a queue holding
    /// `messages` messages of `bytes` bytes.
    pub fn admits(&self, messages: u64, bytes: u64, len: u64) -> bool {
        self.max_length.is_none_or(|max| messages < max)
            && self
                .max_length_bytes
                .is_none_or(|max| bytes.saturating_add(len) <= max)
    }

    /// Whether a queue holding `messages` messages of `bytes` bytes is
    /// past its limits (drop-head drops from the head until it is not).
    pub fn over_limit(&self, messages: u64, bytes: u64) -> bool {
        self.max_length.is_some_and(|max| messages > max)
            || self.max_length_bytes.is_some_and(|max| bytes > max)
    }

    /// Whether publishes are refused when the queue is full.
    pub fn rejects_publish(&self) -> bool {
        self.overflow == Overflow::RejectPublish
            && (self.max_length.is_some() || self.max_length_bytes.is_some())
    }

    /// Whether the oldest messages are dropped when the queue is full.
    pub fn drops_head(&self) -> bool {
        self.overflow == Overflow::DropHead
            && (self.max_length.is_some() || self.max_length_bytes.is_some())
    }
}

/// Why a policy set was refused (the daemon's start, a SIGHUP reload or
/// `PUT /api/policies`); the old set stays in force on a refused change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The pattern is not an address glob.
    #[error("policies: {0}")]
    Pattern(#[from] PatternError),
    /// The dead-letter address is not one a queue can have.
    #[error("policies: pattern {pattern:?}: dead_letter_address: {why}")]
    DeadLetterAddress {
        /// The policy's pattern.
        pattern: String,
        /// What is wrong.
        why: String,
    },
    /// Another field is out of range.
    #[error("policies: pattern {pattern:?}: {why}")]
    Invalid {
        /// The policy's pattern.
        pattern: String,
        /// What is wrong.
        why: String,
    },
}

/// A node's policies, checked, in the order given.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    policies: Vec<Arc<QueuePolicy>>,
}

impl PolicySet {
    /// Check every policy; the first bad one refuses the whole set.
    pub fn compile(configs: &[PolicyConfig]) -> Result<PolicySet, PolicyError> {
        let policies = configs
            .iter()
            .map(|c| QueuePolicy::compile(c).map(Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(PolicySet { policies })
    }

    /// The policy of the queue at `address`: the first that matches.
    pub fn resolve(&self, address: &QueueAddress) -> Option<Arc<QueuePolicy>> {
        if self.policies.is_empty() {
            return None;
        }
        let text = address.to_string();
        self.policies
            .iter()
            .find(|p| p.pattern.matches(&text))
            .cloned()
    }

    /// The policies as they would be written, in order.
    pub fn to_config(&self) -> Vec<PolicyConfig> {
        self.policies.iter().map(|p| p.to_config()).collect()
    }

    /// How many policies there are.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }
}

/// The node's current policy set, shared by the owners of its queues.
/// Replaced whole; read when a queue opens and when the set changes
/// (never per message: queues keep their own resolved policy).
#[derive(Debug, Default)]
pub struct Policies {
    current: RwLock<Arc<PolicySet>>,
}

impl Policies {
    /// Start with `set`.
    pub fn new(set: PolicySet) -> Policies {
        Policies {
            current: RwLock::new(Arc::new(set)),
        }
    }

    /// The set in force now.
    pub fn current(&self) -> Arc<PolicySet> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Put `set` in force. The caller then re-applies it to the open
    /// queues (a queue opening meanwhile resolves against the new set).
    pub fn replace(&self, set: PolicySet) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
    }

    /// The policy of the queue at `address` under the set in force.
    pub fn resolve(&self, address: &QueueAddress) -> Option<Arc<QueuePolicy>> {
        self.current().resolve(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(pattern: &str) -> PolicyConfig {
        PolicyConfig {
            pattern: pattern.into(),
            ..PolicyConfig::default()
        }
    }

    fn address(a: &str) -> QueueAddress {
        QueueAddress::parse(a).unwrap()
    }

    #[test]
    fn the_first_matching_policy_wins() {
        let set = PolicySet::compile(&[
            PolicyConfig {
                max_length: Some(1),
                ..policy("/quorum/orders-eu")
            },
            PolicyConfig {
                max_length: Some(2),
                ..policy("/quorum/orders-*")
            },
            PolicyConfig {
                max_length: Some(3),
                ..policy("/*/*")
            },
        ])
        .unwrap();
        let limit = |a: &str| set.resolve(&address(a)).and_then(|p| p.max_length);
        assert_eq!(limit("/quorum/orders-eu"), Some(1));
        assert_eq!(limit("/quorum/orders-us"), Some(2));
        assert_eq!(limit("/queues/orders-us"), Some(3));
        assert!(PolicySet::default()
            .resolve(&address("/queues/x"))
            .is_none());
    }

    #[test]
    fn bad_policies_are_refused() {
        assert!(matches!(
            PolicySet::compile(&[policy("orders")]),
            Err(PolicyError::Pattern(_))
        ));
        for dla in ["orders-dlq", "/queues/a/b", "/queues/amq.dyn-1"] {
            let bad = PolicyConfig {
                dead_letter_address: Some(dla.into()),
                ..policy("/queues/*")
            };
            assert!(
                matches!(
                    PolicySet::compile(&[bad]),
                    Err(PolicyError::DeadLetterAddress { .. })
                ),
                "{dla}"
            );
        }
        let zero = PolicyConfig {
            delivery_limit: Some(0),
            ..policy("/queues/*")
        };
        assert!(matches!(
            PolicySet::compile(&[zero]),
            Err(PolicyError::Invalid { .. })
        ));
    }

    #[test]
    fn a_set_reads_back_as_written() {
        let written = vec![PolicyConfig {
            max_length: Some(10),
            max_length_bytes: Some(1000),
            overflow: Overflow::DropHead,
            message_ttl_ms: Some(60_000),
            delivery_limit: Some(20),
            dead_letter_address: Some("/quorum/orders-dlq".into()),
            single_active_consumer: true,
            ..policy("/quorum/orders-*")
        }];
        assert_eq!(PolicySet::compile(&written).unwrap().to_config(), written);
    }

    #[test]
    fn fullness_counts_either_limit() {
        let p = QueuePolicy::compile(&PolicyConfig {
            max_length: Some(2),
            max_length_bytes: Some(100),
            ..policy("/queues/*")
        })
        .unwrap();
        assert!(!p.is_full(1, 99));
        assert!(p.is_full(2, 0));
        assert!(p.is_full(0, 100));
        assert!(p.admits(1, 90, 10));
        assert!(!p.admits(1, 91, 10));
        assert!(!p.admits(2, 0, 0));
        assert!(!p.over_limit(2, 100));
        assert!(p.over_limit(3, 0) && p.over_limit(0, 101));
        assert!(p.rejects_publish() && !p.drops_head());
        let none = QueuePolicy::compile(&policy("/queues/*")).unwrap();
        assert!(!none.is_full(u64::MAX, u64::MAX));
    }
}
