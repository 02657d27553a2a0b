//! Authorization of links: a publisher needs the user's `write`
//! permission on the target address, a consumer `read` on the source
//! address, and either needs `configure` when its attach would create the
//! queue. A refusal is amqp:unauthorized-access on that link alone.
//!
//! The permissions come from the login (`crate::auth`); this file only
//! decides which one an attach needs. Forwarded links are checked here,
//! on the node the client is attached to, never again on the serving node.

use super::state::State;
use crate::auth::Access;
use crate::codec::definitions::condition;
use crate::codec::{Attach, Error, Role};
use crate::queue::QueueAddress;

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
        // No address (a coordinator, a dynamic node, the anonymous relay):
        // nothing to check here; what such a link reaches is checked where
        // its address becomes known (`State::authorize`).
        let Some(address) = address else {
            return Ok(());
        };
        self.authorize(access, address)?;
        let creates = QueueAddress::parse(address)
            .map(|parsed| !self.context.queues.exists(&parsed))
            .unwrap_or(false);
        if creates {
            self.authorize(Access::Configure, address)?;
        }
        Ok(())
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
