//! Dead-lettering as a queue sees it (its policy's `delivery_limit` and
//! `dead_letter_address` say when and where): the dead-lettered copy of a message (the death history
//! written by `codec::dead_letter`), and the [`DeadLetterRouter`] through
//! which the copy is published to the dead-letter address.
//!
//! The router is handed in by `node/` when it assembles the queues: it
//! publishes the way a client publish goes (the address prepared under the
//! auto-create rules, looked up in the registry, forwarded when another
//! node serves it), so a queue never learns where its dead-letter queue
//! lives. Queues must not know the node, the registry or forwarding.

use std::sync::Arc;

use super::address::QueueAddress;
use super::message::Message;
use super::PublishConfirm;
use crate::codec::dead_letter::{record_death, Death};
use crate::codec::MessageView;

pub use crate::codec::dead_letter::DeathReason;

/// Publishes dead-lettered messages to their address, the way a client
/// publish goes. Implemented by `node/` (over the registry); never blocks:
/// the publish happens on a task, in the order of the calls.
pub trait DeadLetterRouter: Send + Sync + std::fmt::Debug + 'static {
    /// Publish `message` to the queue at `address` (created if the
    /// auto-create rules allow). With `confirm`, the outcome is reported
    /// there: `accepted` once the queue took it (a quorum queue: committed),
    /// `released` when it could not be published (no such queue, no
    /// leader in time, shutting down).
    fn publish(&self, address: QueueAddress, message: Message, confirm: Option<PublishConfirm>);
}

/// The router and settings a queue dead-letters with.
pub type SharedRouter = Arc<dyn DeadLetterRouter>;

/// The dead-lettered copy of `message`, leaving `queue` for `target`;
/// `None` when it must be dropped instead: a cycle without a rejection
/// (RabbitMQ drops those), or bytes that are not a message (never for one
/// the broker took in). Both are logged.
pub fn dead_letter_copy(
    message: &Message,
    queue: &QueueAddress,
    target: &QueueAddress,
    reason: DeathReason,
    time_ms: i64,
    key: Option<u128>,
) -> Option<Message> {
    let queue_name = queue.to_string();
    let target_name = target.to_string();
    let death = Death {
        queue: &queue_name,
        reason,
        time_ms,
        target: &target_name,
        key,
    };
    let dead = match record_death(&message.bytes, &death) {
        Ok(dead) => dead,
        Err(error) => {
            tracing::warn!(queue = %queue, %error, "dead-lettering: message dropped, it cannot be annotated");
            return None;
        }
    };
    if dead.cycle {
        tracing::warn!(
            queue = %queue, target = %target, reason = reason.as_str(),
            "dead-lettering: message dropped, it would go round a dead-letter cycle with no rejection"
        );
        return None;
    }
    let view = MessageView::scan(&dead.bytes).ok()?;
    Some(Message {
        header: view.header,
        header_len: view.header_len as u32,
        bytes: dead.bytes,
    })
}

/// Milliseconds since the Unix epoch now (a death's time).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Hand messages a queue gave up on to its dead-letter address, best
/// effort (no confirm: a transient queue has forgotten them already), or
/// drop them without an address or router. Call it without the queue's
/// lock held.
pub(crate) fn send_best_effort(
    router: Option<&SharedRouter>,
    queue: &QueueAddress,
    target: Option<&QueueAddress>,
    given_up: Vec<(Message, DeathReason)>,
) {
    let (Some(router), Some(target)) = (router, target) else {
        return;
    };
    let time_ms = now_ms();
    for (message, reason) in given_up {
        if let Some(copy) = dead_letter_copy(&message, queue, target, reason, time_ms, None) {
            router.publish(target.clone(), copy, None);
        }
    }
}
