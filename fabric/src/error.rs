//! Errors: [`CallError`] for calls and sends, [`FabricError`] for starting a
//! node or connecting a client.

use crate::NodeId;

/// Why a call or a one-way send failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No stream to the node: unknown peer, not connected (yet), blocked, or
    /// the stream broke while the call was outstanding. The call may or may
    /// not have reached the handler in the last case.
    #[error("node {0} is unreachable")]
    Unreachable(NodeId),
    /// The remote handler answered with an error (or refused the frame).
    #[error("remote error: {0}")]
    Remote(String),
    /// No answer within the call timeout.
    #[error("call timed out")]
    Timeout,
    /// The envelope is over the configured maximum; nothing was sent.
    #[error("envelope of {size} bytes is over the limit of {max} bytes")]
    TooLarge {
        /// Size of the envelope (`meta` + `payload`).
        size: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The peer's bounded outbound queue is full; nothing was queued.
    #[error("outbound queue is full")]
    Backpressure,
    /// This fabric or client has shut down.
    #[error("fabric is shut down")]
    Closed,
}

/// Why a node could not start or a client could not connect.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Binding the listen address failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The node refused the stream (e.g. wrong cluster name).
    #[error("refused by the node: {0}")]
    Refused(String),
    /// The node could not be reached within the connect timeout.
    #[error("cannot connect: {0}")]
    Connect(String),
}
