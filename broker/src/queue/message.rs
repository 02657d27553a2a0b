//! A message as queues hold it: the received bytes, untouched, plus the few
//! header fields the broker needs. Bodies are never decoded or copied here.

use bytes::Bytes;

use crate::codec::Header;

/// A queue-assigned, per-queue increasing message number (FIFO order).
pub type MessageId = u64;

/// One message: the whole encoded message as received (all sections,
/// bare and annotated), and its decoded header section if it had one.
#[derive(Debug, Clone)]
pub struct Message {
    /// The encoded message, a slice of (or a join of) the received frames.
    pub bytes: Bytes,
    /// The header section, if the message starts with one.
    pub header: Option<Header>,
    /// Bytes the header section takes at the start of `bytes`.
    pub header_len: u32,
}

impl Message {
    /// A message with no bytes (a placeholder where one was consumed).
    pub fn empty() -> Message {
        Message {
            bytes: bytes::Bytes::new(),
            header: None,
            header_len: 0,
        }
    }

    /// Body size used for queue byte limits.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the encoded message is empty (never, for a valid message).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// delivery-count from the header as published.
    pub fn published_delivery_count(&self) -> u32 {
        self.header.as_ref().map_or(0, |h| h.delivery_count)
    }
}

/// A message handed to a consumer.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Which message, for settlement.
    pub id: MessageId,
    /// The message.
    pub message: Message,
    /// Failed delivery attempts so far (the header's delivery-count to send).
    pub delivery_count: u32,
    /// Whether this is a redelivery (first-acquirer must then be false).
    pub redelivered: bool,
}
