//! [`QueueControl`]: what the operator's requests need to delete or purge
//! a queue, handed in by the node assembly (which owns the registry, the
//! quorum node and the metadata). Admin knows only the answers: done here,
//! or served by another node (the request is then sent there).

use std::future::Future;
use std::pin::Pin;

/// A boxed future of [`QueueControl`].
pub type ControlFuture<'a> =
    Pin<Box<dyn Future<Output = Result<QueueChange, QueueControlError>> + Send + 'a>>;

/// What became of a delete or purge asked of this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueChange {
    /// Done; a summary for the operator.
    Done(String),
    /// Another node must do it (a transient queue's owner, a quorum
    /// queue's leader or replica): ask that one.
    Elsewhere(u64),
}

/// Why a delete or purge failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueControlError {
    /// Not `/queues/<name>` or `/quorum/<name>`.
    #[error("{0}")]
    BadAddress(String),
    /// No such queue.
    #[error("queue {0} does not exist")]
    NotFound(String),
    /// The queue could not be changed now (no leader, no quorum, ...).
    #[error("{0}")]
    Failed(String),
}

/// Deleting and purging queues, as this node can.
pub trait QueueControl: Send + Sync + 'static {
    /// Delete the queue at `address`: its links are detached with
    /// amqp:resource-deleted and its messages are gone.
    fn delete<'a>(&'a self, address: &'a str) -> ControlFuture<'a>;
    /// Drop the messages waiting in the queue at `address` (those out with
    /// consumers stay theirs to settle).
    fn purge<'a>(&'a self, address: &'a str) -> ControlFuture<'a>;
}
