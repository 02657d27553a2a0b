//! What a consumer asks of its queue beyond credit: a filter (only the
//! messages it matches go to this consumer) and a priority. The engine
//! builds them from the attach; every queue kind hands them, unchanged, to
//! the [`Dispatcher`](super::dispatch) of the node that serves the queue,
//! also across the forwarding protocol and after a leader change.
//!
//! It must not know how a filter is written on the wire of a link (that is
//! the engine's) nor how it is shipped between nodes (`forward/`).

use std::sync::Arc;

use super::filter::MessageFilter;

/// A consumer's options, fixed at subscribe time.
#[derive(Debug, Clone, Default)]
pub struct ConsumerOptions {
    /// Only messages this filter matches go to the consumer; the others
    /// stay for the queue's other consumers. `None`: every message.
    pub filter: Option<Arc<MessageFilter>>,
    /// Consumer priority (a link property); 0 when not given. Higher
    /// priorities are served first.
    pub priority: i32,
    /// The registration stamp an earlier leader of a quorum queue gave
    /// this consumer (its place in the consumer order, see
    /// `consumer_order.rs`), kept by its routed queue so that the next
    /// leader orders it the same; `None` for a new consumer.
    pub registered: Option<u64>,
}

impl ConsumerOptions {
    /// Whether these are the defaults (no filter, priority 0): what an
    /// older node assumes for a consumer it is not told options for.
    pub fn is_default(&self) -> bool {
        self.filter.is_none() && self.priority == 0 && self.registered.is_none()
    }
}
