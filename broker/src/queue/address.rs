//! Validated queue addresses: `/queues/<name>` (transient) and
//! `/quorum/<name>` (replicated). Everything else is not a queue.

use std::fmt;

/// Longest queue name we accept, in bytes.
pub const QUEUE_NAME_MAX_BYTES: usize = 255;

/// The kind of queue an address names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueKind {
    /// `/queues/<name>`: in memory on one node.
    Transient,
    /// `/quorum/<name>`: one Raft group.
    Quorum,
}

/// A checked queue address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueAddress {
    kind: QueueKind,
    name: String,
}

/// Why a string is not a queue address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Neither `/queues/` nor `/quorum/`.
    #[error("address {0:?} is not /queues/<name> or /quorum/<name>")]
    UnknownPrefix(String),
    /// Empty, too long, or containing `/`, whitespace or control characters.
    #[error("invalid queue name {0:?}: 1 to 255 bytes, no '/', whitespace or control characters")]
    InvalidName(String),
}

impl QueueAddress {
    /// Parse an address from an attach's source or target.
    pub fn parse(address: &str) -> Result<QueueAddress, AddressError> {
        let (kind, name) = if let Some(name) = address.strip_prefix("/queues/") {
            (QueueKind::Transient, name)
        } else if let Some(name) = address.strip_prefix("/quorum/") {
            (QueueKind::Quorum, name)
        } else {
            return Err(AddressError::UnknownPrefix(address.to_owned()));
        };
        let valid = !name.is_empty()
            && name.len() <= QUEUE_NAME_MAX_BYTES
            && !name
                .chars()
                .any(|c| c == '/' || c.is_whitespace() || c.is_control());
        if !valid {
            return Err(AddressError::InvalidName(name.to_owned()));
        }
        Ok(QueueAddress {
            kind,
            name: name.to_owned(),
        })
    }

    /// Transient or quorum.
    pub fn kind(&self) -> QueueKind {
        self.kind
    }

    /// The name without its prefix.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for QueueAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = match self.kind {
            QueueKind::Transient => "/queues/",
            QueueKind::Quorum => "/quorum/",
        };
        write!(f, "{prefix}{}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_kinds() {
        let a = QueueAddress::parse("/queues/orders").unwrap();
        assert_eq!((a.kind(), a.name()), (QueueKind::Transient, "orders"));
        let q = QueueAddress::parse("/quorum/q-1.x").unwrap();
        assert_eq!((q.kind(), q.name()), (QueueKind::Quorum, "q-1.x"));
        assert_eq!(q.to_string(), "/quorum/q-1.x");
    }

    #[test]
    fn rejects_others() {
        for bad in [
            "orders",
            "/queue/x",
            "/queues/",
            "/queues/a/b",
            "/queues/a b",
            "/topics/x",
        ] {
            assert!(QueueAddress::parse(bad).is_err(), "{bad}");
        }
        assert!(QueueAddress::parse(&format!("/queues/{}", "x".repeat(256))).is_err());
    }
}
