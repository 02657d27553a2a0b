//! Neutral, codec-independent forms of what a decoder found in a frame, so
//! the two codecs' results can be compared field by field. Each side's
//! module converts its own decoded types into these; a value is written as
//! `type:text` (`string:abc`, `ulong:7`, `timestamp:1764...`), so a decoder
//! that reads a field as another AMQP type than the other does disagrees.

use std::fmt::Write;

/// The transfer performative's fields and the frame's channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferFields {
    /// Frame channel.
    pub channel: u16,
    /// handle
    pub handle: u32,
    /// delivery-id
    pub delivery_id: Option<u32>,
    /// delivery-tag
    pub delivery_tag: Option<Vec<u8>>,
    /// message-format
    pub message_format: Option<u32>,
    /// settled
    pub settled: Option<bool>,
    /// more
    pub more: bool,
}

/// The header section, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderFields {
    /// durable
    pub durable: bool,
    /// priority
    pub priority: u8,
    /// ttl
    pub ttl: Option<u32>,
    /// first-acquirer
    pub first_acquirer: bool,
    /// delivery-count
    pub delivery_count: u32,
}

/// Every section of a fully decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageFields {
    /// The header section.
    pub header: Option<HeaderFields>,
    /// The properties section's 13 fields in order (`None`: null or absent).
    pub properties: Option<Vec<Option<String>>>,
    /// The application-properties map, keys as text, values as `type:text`.
    pub application_properties: Option<Vec<(String, String)>>,
    /// The data sections' bytes.
    pub body: Vec<Vec<u8>>,
}

/// A transfer frame decoded in full: performative and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullTransfer {
    /// The performative.
    pub transfer: TransferFields,
    /// The message.
    pub message: MessageFields,
}

/// A transfer frame as the broker's hot path reads it: the performative,
/// the header, how many sections the message has, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedTransfer {
    /// The performative.
    pub transfer: TransferFields,
    /// The header section, if any.
    pub header: Option<HeaderFields>,
    /// Number of sections, header included.
    pub sections: usize,
    /// The message bytes (the transfer's payload).
    pub message: Vec<u8>,
}

/// The disposition performative's fields and the frame's channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispositionFields {
    /// Frame channel.
    pub channel: u16,
    /// role: true for receiver
    pub receiver: bool,
    /// first
    pub first: u32,
    /// last
    pub last: Option<u32>,
    /// settled
    pub settled: bool,
    /// state, by name (`accepted`, ...), if any
    pub state: Option<String>,
    /// batchable
    pub batchable: bool,
}

/// Number of fields of the properties section (messaging 3.2.4).
pub const PROPERTIES_FIELDS: usize = 13;

/// Lower-case hex of `bytes`, for binary values in `type:text` form.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// `fields` padded with `None` to the 13 properties fields, so that a
/// codec that trims trailing nulls and one that writes them agree.
pub fn pad_properties(mut fields: Vec<Option<String>>) -> Vec<Option<String>> {
    fields.resize(PROPERTIES_FIELDS.max(fields.len()), None);
    fields
}
