//! [`LocalTransport`]: every node of an embedded cluster in one process
//! registers its handler here. Calls run the target's handler directly;
//! sends are delivered synchronously, in order, on the caller's thread (so
//! a handler's `message` must not call back into its sender's locks; the
//! broker's handlers only hand work to channels). Links can be cut to test
//! partitions; a cut link drops sends as well as calls.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock, Weak};

use super::{CallFuture, Envelope, NodeHandler, NodeId, NodeTransport, TransportError};

/// An in-process transport with cuttable links.
#[derive(Default)]
pub struct LocalTransport {
    nodes: RwLock<HashMap<NodeId, Weak<dyn NodeHandler>>>,
    cut: RwLock<HashSet<(NodeId, NodeId)>>,
    /// When each node not registered now was unregistered (stopped).
    gone: RwLock<HashMap<NodeId, tokio::time::Instant>>,
}

impl LocalTransport {
    /// A transport with no nodes.
    pub fn new() -> Arc<LocalTransport> {
        Arc::new(LocalTransport::default())
    }

    /// Cut (or heal) the link between two nodes, both directions.
    pub fn set_cut(&self, a: NodeId, b: NodeId, cut: bool) {
        let mut links = self.cut.write().unwrap_or_else(|p| p.into_inner());
        if cut {
            links.insert((a, b));
            links.insert((b, a));
        } else {
            links.remove(&(a, b));
            links.remove(&(b, a));
        }
    }

    /// The target's handler if it is registered and the link is up.
    fn reach(&self, from: NodeId, target: NodeId) -> Option<Arc<dyn NodeHandler>> {
        if self
            .cut
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(from, target))
        {
            return None;
        }
        self.nodes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&target)
            .and_then(Weak::upgrade)
    }
}

impl NodeTransport for LocalTransport {
    fn call(&self, from: NodeId, target: NodeId, envelope: Envelope) -> CallFuture {
        match self.reach(from, target) {
            Some(handler) => handler.handle(from, envelope),
            None => Box::pin(async move { Err(TransportError::Unreachable(target)) }),
        }
    }

    fn send(&self, from: NodeId, target: NodeId, envelope: Envelope) -> Result<(), TransportError> {
        // No lock of ours is held while the handler runs.
        let handler = self
            .reach(from, target)
            .ok_or(TransportError::Unreachable(target))?;
        handler.message(from, envelope);
        Ok(())
    }

    fn register(&self, node: NodeId, handler: Weak<dyn NodeHandler>) {
        self.gone
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&node);
        self.nodes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node, handler);
    }

    /// A node unregistered (stopped, or crashed: `Cluster::crash`
    /// unregisters it at once) is not running since then, whether or not
    /// the link to it is cut; a registered one behind a cut link is only
    /// cut off.
    fn not_listening_since(&self, _from: NodeId, target: NodeId) -> Option<tokio::time::Instant> {
        self.gone
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&target)
            .copied()
    }

    fn unregister(&self, node: NodeId) {
        self.gone
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node, tokio::time::Instant::now());
        self.nodes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&node);
    }
}
