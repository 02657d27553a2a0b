//! Why a connection ends, and the one place that turns internal errors into
//! the AMQP error a peer sees in `close`.

use crate::codec::definitions::condition;
use crate::codec::{CodecError, Error};

/// What ends a connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    /// The peer broke the protocol: we send `close` with this error.
    #[error("protocol error {}: {}", .0.condition.as_str(), .0.description.as_deref().unwrap_or(""))]
    Protocol(Error),
    /// The socket failed or the peer went away.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection (sent `close`, or EOF after it).
    #[error("closed by peer")]
    ClosedByPeer,
    /// The broker is shutting down.
    #[error("broker shutting down")]
    Shutdown,
    /// An operator closed this connection (the management API).
    #[error("closed by an operator")]
    ClosedByOperator,
}

impl ConnectionError {
    pub(crate) fn protocol(condition: &str, description: impl Into<String>) -> Self {
        ConnectionError::Protocol(Error::new(condition, description))
    }

    pub(crate) fn illegal_state(description: impl Into<String>) -> Self {
        Self::protocol(condition::ILLEGAL_STATE, description)
    }
}

impl From<CodecError> for ConnectionError {
    fn from(error: CodecError) -> Self {
        let description = match &error {
            CodecError::FrameTooLarge { .. } => format!("{error} (announced in open)"),
            _ => error.to_string(),
        };
        ConnectionError::protocol(error.condition(), description)
    }
}
