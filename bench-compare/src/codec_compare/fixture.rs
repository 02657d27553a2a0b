//! The one message and the performatives both codecs are measured on, as
//! plain constants: a publisher's transfer (header, properties,
//! application-properties, one data section) and a consumer's ranged
//! `accepted` disposition. `ours.rs` and `theirs.rs` each build their own
//! typed form from these, so both sides start from the same values.

/// Frame channel of every frame.
pub const CHANNEL: u16 = 1;
/// Link handle of the transfer.
pub const HANDLE: u32 = 2;
/// delivery-id of the transfer (a four-byte uint on the wire).
pub const DELIVERY_ID: u32 = 42_000;
/// delivery-tag of the transfer: eight bytes, as a counter would make.
pub const DELIVERY_TAG: [u8; 8] = [0, 0, 0, 0, 0, 0, 0xa4, 0x10];

/// header.durable
pub const DURABLE: bool = true;
/// header.priority (not the default 4, so both sides write it)
pub const PRIORITY: u8 = 7;
/// header.ttl in milliseconds
pub const TTL_MS: u32 = 60_000;

/// properties.message-id (a string id)
pub const MESSAGE_ID: &str = "msg-000000042000";
/// properties.to
pub const TO: &str = "/queues/bench";
/// properties.subject
pub const SUBJECT: &str = "orders.created";
/// properties.reply-to
pub const REPLY_TO: &str = "/queues/replies";
/// properties.correlation-id (a ulong id)
pub const CORRELATION_ID: u64 = 41_999;
/// properties.content-type (a symbol)
pub const CONTENT_TYPE: &str = "application/octet-stream";
/// properties.creation-time, ms since the epoch
pub const CREATION_TIME_MS: i64 = 1_764_720_000_000;

/// application-properties: "tenant" (string)
pub const APP_TENANT: &str = "acme";
/// application-properties: "region" (string)
pub const APP_REGION: &str = "eu-west-1";
/// application-properties: "seq" (long)
pub const APP_SEQ: i64 = 42_000;
/// application-properties: "retry" (boolean)
pub const APP_RETRY: bool = false;

/// The consumer's disposition: role receiver, first..last accepted, settled.
pub const DISPOSITION_FIRST: u32 = 42_000;
/// last of the disposition's range.
pub const DISPOSITION_LAST: u32 = 42_063;

/// The body sizes measured: 256 B (the benchmarks' usual size) and 4 KiB.
pub const BODY_SIZES: [usize; 2] = [256, 4096];

/// A body of `len` bytes with a pattern (not zeros, which a codec could
/// special-case).
pub fn body(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}
