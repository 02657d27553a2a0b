//! [`FabricControl`]: the operations on the node's fabric links that the
//! operator's requests need (show links, dial a new node, isolate for fault
//! injection), over and above the node transport's calls. The fabric
//! adapter in `crate::node` implements it.

use std::net::SocketAddr;

use crate::net::{NodeId, NodeTransport};

/// The node's fabric, as the admin service uses it.
pub trait FabricControl: NodeTransport {
    /// The address the fabric listens on.
    fn local_addr(&self) -> SocketAddr;
    /// The peers and whether each is connected now.
    fn peers(&self) -> Vec<(NodeId, SocketAddr, bool)>;
    /// Start dialling a new peer.
    fn add_peer(&self, id: NodeId, addr: SocketAddr);
    /// Fault injection: cut (or heal) every peer.
    fn set_isolated(&self, isolated: bool);
}
