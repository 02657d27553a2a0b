//! Authorization of links: a publisher needs the user's `write`
//! permission on the target address, a consumer `read` on the source
//! address, and either needs `configure` when its attach would create the
//! queue. A refusal is amqp:unauthorized-access on that link alone. A
//! message through the anonymous relay needs the same as a publisher
//! attached to its `to`; a refusal rejects that delivery alone. A dynamic
//! node (a receiver asking for a temporary queue) needs configure on
//! `/queues/amq.dyn-`, the names the broker gives them.
//!
//! The permissions come from the login (`crate::auth`); this file only
//! decides which one an attach needs. Forwarded links are checked here,
//! on the node the client is attached to, never again on the serving node.

use super::state::State;
use crate::auth::Access;
use crate::codec::definitions::condition;
use crate::codec::{Attach, Error, Role};
use crate::queue::{QueueAddress, DYNAMIC_PREFIX};

impl State {
    /// Whether this connection's user may make `attach`; the error to
    /// refuse it with if not.
    pub(crate) fn authorize_attach(&self, attach: &Attach) -> Result<(), Error> {
        let (access, address) = match attach.role {
            Role::Sender => (
                Access::Write,
                attach.target.as_ref().and_then(|t| t.address.as_deref()),
            ),
            Role::Receiver => (
                Access::Read,
                attach.source.as_ref().and_then(|s| s.address.as_deref()),
            ),
        };
        if attach.role == Role::Receiver && attach.source.as_ref().is_some_and(|s| s.dynamic) {
            // A dynamic node is a new queue whose name the broker picks:
            // the user needs configure on the names it picks from.
            return self.authorize(Access::Configure, &format!("/queues/{DYNAMIC_PREFIX}"));
        }
        // No address (a coordinator, the anonymous relay):
        // nothing to check here; what such a link reaches is checked where
        // its address becomes known (`authorize_relay` for the relay).
        let Some(address) = address else {
            return Ok(());
        };
        self.authorize(access, address)?;
        match QueueAddress::parse(address) {
            Ok(parsed) => self.authorize_creation(&parsed),
            // Refused by the attach itself (amqp:not-found).
            Err(_) => Ok(()),
        }
    }

    /// A message through the anonymous relay (`relay.rs`) to `address`:
    /// `write`, and `configure` if it would create the queue. Checked
    /// before the address is prepared, so a refused one creates nothing.
    pub(crate) fn authorize_relay(&self, address: &QueueAddress) -> Result<(), Error> {
        self.authorize(Access::Write, &address.to_string())?;
        self.authorize_creation(address)
    }

    /// `configure`, if `address` does not exist yet.
    fn authorize_creation(&self, address: &QueueAddress) -> Result<(), Error> {
        if self.context.queues.exists(address) {
            return Ok(());
        }
        self.authorize(Access::Configure, &address.to_string())
    }

    /// Whether this connection's user has `access` to `address`.
    pub(crate) fn authorize(&self, access: Access, address: &str) -> Result<(), Error> {
        if self.permissions.allows(access, address) {
            return Ok(());
        }
        tracing::debug!(access = access.name(), address, "refused: no permission");
        Err(Error::new(
            condition::UNAUTHORIZED_ACCESS,
            format!("no {} permission on {address}", access.name()),
        ))
    }
}
