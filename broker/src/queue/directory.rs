//! [`QueueDirectory`]: how the engine (and the operator's view) find queues
//! by address, without knowing which kind serves them or where. The node
//! assembly (`crate::node::Registry`) implements it over transient queues,
//! quorum queues and forwarding.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{Queue, QueueAddress, QueueStats};

/// The name prefix of dynamic (temporary) queues, `/queues/amq.dyn-...`.
/// Names with it are reserved: never auto-created by an attach or a
/// relayed message, so a reply sent after the queue went away is
/// `amqp:not-found` rather than a new queue nobody reads.
pub const DYNAMIC_PREFIX: &str = "amq.dyn-";

/// Why an address cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The queue does not exist and auto-create is off.
    #[error("queue {0} does not exist")]
    NotFound(String),
    /// The quorum queue could not be opened or created here.
    #[error("quorum queue {0} is unavailable: {1}")]
    QuorumUnavailable(String, String),
}

/// A boxed future of [`QueueDirectory::prepare`].
pub type PrepareFuture<'a> = Pin<Box<dyn Future<Output = Result<(), LookupError>> + Send + 'a>>;

/// The queues a node serves, by address.
pub trait QueueDirectory: Send + Sync + 'static {
    /// Make sure the queue at `address` can be looked up (create it if the
    /// rules allow; wait, bounded, until it is reachable).
    fn prepare<'a>(&'a self, address: &'a QueueAddress) -> PrepareFuture<'a>;
    /// The queue at `address` as a link uses it.
    fn lookup(&self, address: &QueueAddress) -> Result<Arc<dyn Queue>, LookupError>;
    /// Whether the queue at `address` exists already, as far as this node
    /// can tell without asking another: an attach to one that does not
    /// would create it, which needs the `configure` permission.
    fn exists(&self, address: &QueueAddress) -> bool;
    /// The node that holds the transient queue at `address` when that is
    /// another node (a declaration made here would not create it there);
    /// `None` for a queue of this node, and for quorum queues.
    fn held_elsewhere(&self, address: &QueueAddress) -> Option<u64> {
        let _ = address;
        None
    }
    /// Depth and consumers of every queue held here, sorted by address.
    fn stats(&self) -> Vec<QueueStats>;
    /// A new temporary transient queue on this node, for a dynamic
    /// receiver (its address is generated and unique; see
    /// [`DYNAMIC_PREFIX`]).
    fn create_dynamic(&self) -> Result<Arc<dyn Queue>, LookupError>;
    /// Delete a queue made by [`QueueDirectory::create_dynamic`] (its link
    /// went away); its other links are closed with amqp:resource-deleted.
    fn delete_dynamic(&self, address: &QueueAddress);
}
