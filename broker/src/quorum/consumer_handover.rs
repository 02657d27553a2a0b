//! How a quorum queue's consumer order (priorities, registration order, the
//! single active consumer) survives a leader change.
//!
//! The order lives in the leader's dispatcher (`queue/consumer_order.rs`):
//! each consumer has a registration *stamp*, and the active one is the first
//! by (priority, stamp). When the leadership moves, every consumer comes back
//! to the new leader through its routed queue (`forward/follow.rs`), in no
//! particular order, bringing its priority and its stamp (`ConsumerOptions`;
//! a forwarded consumer learns its stamp from `QueueEventKind::Registered`).
//! So the new leader orders them as the old one did, whoever comes first:
//!
//! - its own stamps start above every earlier leader's: the Raft term is the
//!   stamps' high bits (each leader has a higher term);
//! - with a single active consumer, it activates nobody for
//!   [`REATTACH_GRACE`] after it starts leading, so that the consumer that
//!   was active (the first in order) is back before anyone is chosen. Not at
//!   term 1: no leader came before, so no consumer can be on its way back.
//!
//! The cost: on a queue with a single active consumer, no deliveries for up
//! to [`REATTACH_GRACE`] after each leader change, and 8 bytes more in a
//! forwarded subscribe; nothing in the Raft log. The limit: a consumer that
//! takes longer than the grace to come back (its node cut off, or down) is
//! passed over, and the next in order becomes active; once back it waits,
//! first in line, for the active one to go. Stamps are not in the log and
//! are kept only while the policy asks for a single active consumer, so a
//! consumer attached before it did has none and gets a new one at the
//! next leader.
//!
//! It must not know the forwarding protocol: it decides when the new
//! leader's dispatcher may choose, and nothing else.

use std::sync::Arc;
use std::time::Duration;

use super::state_machine::{Inner, Shared};

/// How long a new leader of a queue with a single active consumer waits for
/// the consumers of the earlier leader to come back before it activates
/// one. Routed queues find a new leader within a search pause (100 ms) of
/// hearing of it, and hear of it within a probe interval (500 ms).
pub(crate) const REATTACH_GRACE: Duration = Duration::from_millis(2000);

/// This node just became the leader in `term` (under the state lock).
pub(super) fn start_leading(shared: &Arc<Shared>, inner: &mut Inner, term: u64) {
    inner.dispatcher.set_epoch(term);
    if term <= 1 || !inner.dispatcher.single_active() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return; // no timer to end a hold: do not hold
    };
    let hold = inner.dispatcher.hold_activation();
    let weak = Arc::downgrade(shared);
    runtime.spawn(async move {
        tokio::time::sleep(REATTACH_GRACE).await;
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let mut inner = shared.lock();
        if inner.dispatcher.release_activation(hold) {
            inner.refill(&shared.queue);
        }
    });
}
