//! [`AdminHandler`]: what the fabric adapter (`crate::node`) hands an
//! arriving operator request to. Bytes in, bytes out: the adapter knows
//! nothing of the requests themselves.

use std::sync::Arc;

use bytes::Bytes;

/// Answers operator requests that arrive over the fabric.
pub trait AdminHandler: Send + Sync + 'static {
    /// Answer one request (a postcard [`super::AdminRequest`]) with a
    /// postcard [`super::AdminResponse`].
    fn admin(self: Arc<Self>, payload: Bytes) -> fabric::BoxFuture<'static, Bytes>;
}
