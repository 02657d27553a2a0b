//! A dead-lettered message: the death history RabbitMQ 4 records in an
//! AMQP 1.0 message's *message-annotations* when a queue dead-letters it,
//! written into a copy of the message as received.
//!
//! What changes (as RabbitMQ does it, `mc:record_death` and
//! `mc_amqp:protocol_state`):
//! - `x-opt-deaths`: a list of maps (RabbitMQ: an array of maps, see
//!   `record_death` for why a list), most recent first, one per
//!   (queue, reason): `queue` (string), `reason` (symbol: rejected,
//!   expired, maxlen, delivery_limit), `count` (ulong), `first-time`,
//!   `last-time` (timestamps) and, when the message had a header ttl, `ttl`
//!   (uint). A second death for the same (queue, reason) raises its count,
//!   moves its last-time and moves it to the front. (RabbitMQ's `exchange`
//!   and `routing-keys` are left out: this broker has no exchanges.)
//! - `x-first-death-queue` / `x-first-death-reason` on the first death
//!   only, `x-last-death-queue` / `x-last-death-reason` on every one.
//! - The header: the ttl is removed (kept in the death record, so the
//!   message does not expire again where it goes) and the delivery-count
//!   starts again at 0 in the next queue; durable and priority stay.
//! - Delivery-annotations are dropped: they are for one hop, and the
//!   dead-lettering is a new one (RabbitMQ drops them too).
//! - Properties, application-properties, the body and the footer are the
//!   received bytes, untouched (one copy into the new message).
//!
//! The queue's address (`/queues/x`, `/quorum/x`) is the `queue` value:
//! this broker's two kinds of queue may share a name.
//!
//! A dead-lettering may carry a *dead-letter key* (`x-opt-dead-letter-key`,
//! a uuid, the first entry of the map), which a quorum queue receiving the
//! message uses to take each dead-lettering once; [`dead_letter_key`] finds
//! it in O(1) without allocating, so checking every enqueued message for
//! one costs a few byte comparisons.
//!
//! Input comes from clients: nothing here panics on any bytes, and an
//! annotation of an unexpected type is replaced, not trusted.

use bytes::{BufMut, Bytes, BytesMut};

use super::codes::{self, dc, fc};
use super::decode::Decoder;
use super::error::CodecError;
use super::message::{Header, MessageView};
use super::value::{Symbol, Value};

/// The annotation that carries the death history.
pub const DEATHS: &str = "x-opt-deaths";
/// The dead-letter key annotation (see the module documentation).
pub const DEAD_LETTER_KEY: &str = "x-opt-dead-letter-key";
const FIRST_QUEUE: &str = "x-first-death-queue";
const FIRST_REASON: &str = "x-first-death-reason";
const LAST_QUEUE: &str = "x-last-death-queue";
const LAST_REASON: &str = "x-last-death-reason";

/// Why a message was dead-lettered (RabbitMQ's reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DeathReason {
    /// A consumer settled it `rejected`.
    Rejected,
    /// Its ttl (header or queue) ran out.
    Expired,
    /// The queue was full and dropped its oldest message (drop-head).
    Maxlen,
    /// It failed delivery as often as the queue's delivery limit allows.
    DeliveryLimit,
}

impl DeathReason {
    /// The reason as RabbitMQ writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeathReason::Rejected => "rejected",
            DeathReason::Expired => "expired",
            DeathReason::Maxlen => "maxlen",
            DeathReason::DeliveryLimit => "delivery_limit",
        }
    }
}

/// One dead-lettering.
#[derive(Debug, Clone, Copy)]
pub struct Death<'a> {
    /// The address of the queue that dead-letters the message.
    pub queue: &'a str,
    /// Why.
    pub reason: DeathReason,
    /// When, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The address the message goes to (for cycle detection).
    pub target: &'a str,
    /// The dead-letter key to carry, if any.
    pub key: Option<u128>,
}

/// The dead-lettered copy of a message.
#[derive(Debug, Clone)]
pub struct DeadLettered {
    /// The new message.
    pub bytes: Bytes,
    /// The target already dead-lettered this message and no death since
    /// (this one included) was a rejection: the message would go round in
    /// a cycle with no client deciding anything, so RabbitMQ drops it.
    pub cycle: bool,
}

/// The sections in front of the bare message.
struct Leading {
    header: Option<Header>,
    annotations: Option<Vec<(Value, Value)>>,
    /// Where the bare message (or the footer) starts.
    rest: usize,
}

fn leading_sections(message: &Bytes) -> Result<Leading, CodecError> {
    // Checks the whole message's section structure first.
    let view = MessageView::scan(message)?;
    let mut rest = message.clone();
    let mut d = Decoder::new(&mut rest);
    let mut leading = Leading {
        header: view.header,
        annotations: None,
        rest: message.len(),
    };
    while d.remaining() > 0 {
        let at = message.len() - d.remaining();
        if d.u8()? != fc::DESCRIBED {
            return Err(CodecError::InvalidValue("message section"));
        }
        let descriptor = d.descriptor()?;
        let code = codes::descriptor_code(&descriptor)
            .ok_or_else(|| CodecError::UnknownDescriptor(codes::describe(&descriptor)))?;
        match code {
            dc::HEADER | dc::DELIVERY_ANNOTATIONS => d.skip_value()?,
            dc::MESSAGE_ANNOTATIONS => {
                let start = message.len() - d.remaining();
                // Its end by its size prefix (scan checked it), so a map
                // that fails to decode cannot move where the rest starts.
                d.skip_value()?;
                leading.rest = message.len() - d.remaining();
                let mut value = message.slice(start..leading.rest);
                // Annotations that do not decode as a map are replaced.
                leading.annotations = match Value::decode(&mut value) {
                    Ok(Value::Map(entries)) => Some(entries),
                    _ => Some(Vec::new()),
                };
                return Ok(leading);
            }
            _ => {
                leading.rest = at;
                return Ok(leading);
            }
        }
        leading.rest = message.len() - d.remaining();
    }
    Ok(leading)
}

fn symbol_key(key: &Value, name: &str) -> bool {
    matches!(key, Value::Symbol(s) if s.as_str() == name)
}

fn text(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        Value::Symbol(s) => Some(s.as_str()),
        _ => None,
    }
}

fn field<'v>(map: &'v [(Value, Value)], name: &str) -> Option<&'v Value> {
    map.iter()
        .find(|(k, _)| symbol_key(k, name))
        .map(|(_, v)| v)
}

fn upsert(map: &mut Vec<(Value, Value)>, name: &str, value: Value) {
    match map.iter_mut().find(|(k, _)| symbol_key(k, name)) {
        Some(entry) => entry.1 = value,
        None => map.push((Value::Symbol(Symbol::from(name)), value)),
    }
}

/// The death records of `x-opt-deaths`, if it holds maps (an array, or a
/// list from a lenient client); anything else counts as no history.
fn death_records(value: Option<&Value>) -> Vec<Vec<(Value, Value)>> {
    let items = match value {
        Some(Value::Array(array)) => &array.items,
        Some(Value::List(items)) => items,
        _ => return Vec::new(),
    };
    items
        .iter()
        .filter_map(|item| match item {
            Value::Map(map) => Some(map.clone()),
            _ => None,
        })
        .collect()
}

fn count_of(record: &[(Value, Value)]) -> u64 {
    match field(record, "count") {
        Some(Value::Ulong(n)) => *n,
        Some(Value::Uint(n)) => u64::from(*n),
        Some(Value::Long(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

/// Whether dead-lettering to `target` closes a cycle without a rejection
/// (RabbitMQ's `is_cycle_v2`): the records from the newest back to the
/// newest one of `target`, inclusive, none of them `rejected`.
fn is_cycle(records: &[Vec<(Value, Value)>], target: &str) -> bool {
    let Some(at) = records
        .iter()
        .position(|r| field(r, "queue").and_then(text) == Some(target))
    else {
        return false;
    };
    records[..=at]
        .iter()
        .all(|r| field(r, "reason").and_then(text) != Some(DeathReason::Rejected.as_str()))
}

/// Record `death` in a copy of `message` (see the module documentation).
/// Fails only when `message` is not a sequence of message sections (which
/// a message the broker took in always is).
pub fn record_death(message: &Bytes, death: &Death<'_>) -> Result<DeadLettered, CodecError> {
    let leading = leading_sections(message)?;
    let mut annotations = leading.annotations.unwrap_or_default();
    annotations.retain(|(k, _)| !symbol_key(k, DEAD_LETTER_KEY));
    let mut records = death_records(field(&annotations, DEATHS));
    let first_death = records.is_empty() && field(&annotations, FIRST_QUEUE).is_none();
    let same = records.iter().position(|r| {
        field(r, "queue").and_then(text) == Some(death.queue)
            && field(r, "reason").and_then(text) == Some(death.reason.as_str())
    });
    let record = match same {
        Some(at) => {
            let mut record = records.remove(at);
            let count = count_of(&record).saturating_add(1);
            upsert(&mut record, "count", Value::Ulong(count));
            upsert(&mut record, "last-time", Value::Timestamp(death.time_ms));
            record
        }
        None => {
            let mut record = vec![
                (
                    Value::Symbol("queue".into()),
                    Value::String(death.queue.into()),
                ),
                (
                    Value::Symbol("reason".into()),
                    Value::Symbol(death.reason.as_str().into()),
                ),
                (Value::Symbol("count".into()), Value::Ulong(1)),
                (
                    Value::Symbol("first-time".into()),
                    Value::Timestamp(death.time_ms),
                ),
                (
                    Value::Symbol("last-time".into()),
                    Value::Timestamp(death.time_ms),
                ),
            ];
            if let Some(ttl) = leading.header.as_ref().and_then(|h| h.ttl) {
                record.push((Value::Symbol("ttl".into()), Value::Uint(ttl)));
            }
            record
        }
    };
    records.insert(0, record);
    // As RabbitMQ: with this death recorded, a rejection never cycles.
    let cycle = death.reason != DeathReason::Rejected && is_cycle(&records, death.target);
    // RabbitMQ writes an array of maps; a list of maps carries the same
    // values and every client decodes it, while fe2o3-amqp 0.18 (serde_amqp)
    // fails a whole delivery holding an array whose elements are maps.
    let deaths = Value::List(records.into_iter().map(Value::Map).collect());
    upsert(&mut annotations, DEATHS, deaths);
    if first_death {
        upsert(
            &mut annotations,
            FIRST_QUEUE,
            Value::String(death.queue.into()),
        );
        upsert(
            &mut annotations,
            FIRST_REASON,
            Value::Symbol(death.reason.as_str().into()),
        );
    }
    upsert(
        &mut annotations,
        LAST_QUEUE,
        Value::String(death.queue.into()),
    );
    upsert(
        &mut annotations,
        LAST_REASON,
        Value::Symbol(death.reason.as_str().into()),
    );
    if let Some(key) = death.key {
        annotations.insert(
            0,
            (
                Value::Symbol(DEAD_LETTER_KEY.into()),
                Value::Uuid(key.to_be_bytes()),
            ),
        );
    }

    let rest = message.slice(leading.rest..);
    let mut out = BytesMut::with_capacity(rest.len() + 256);
    if let Some(header) = leading.header {
        let header = Header {
            ttl: None,
            delivery_count: 0,
            first_acquirer: false,
            ..header
        };
        if header != Header::default() {
            header.encode(&mut out);
        }
    }
    out.put_slice(&[fc::DESCRIBED, fc::SMALLULONG, dc::MESSAGE_ANNOTATIONS as u8]);
    Value::Map(annotations).encode(&mut out);
    out.put_slice(&rest);
    Ok(DeadLettered {
        bytes: out.freeze(),
        cycle,
    })
}

/// The dead-letter key `message` carries, if any: the first entry of its
/// message-annotations, right after the header (where [`record_death`]
/// puts it). Reads a few bytes; never allocates for a section described by
/// a numeric code (as every client sends them).
pub fn dead_letter_key(message: &Bytes) -> Option<u128> {
    let mut rest = message.clone();
    let mut d = Decoder::new(&mut rest);
    let mut code = section_code(&mut d)?;
    if code == dc::HEADER {
        d.skip_value().ok()?;
        code = section_code(&mut d)?;
    }
    if code != dc::MESSAGE_ANNOTATIONS {
        return None;
    }
    let wide = match d.u8().ok()? {
        fc::MAP8 => false,
        fc::MAP32 => true,
        _ => return None,
    };
    let (n_pairs, _) = d.map_header(wide).ok()?;
    if n_pairs == 0 {
        return None;
    }
    if d.u8().ok()? != fc::SYM8 {
        return None;
    }
    let name_len = usize::from(d.u8().ok()?);
    let name = d.raw(name_len).ok()?;
    if name.as_ref() != DEAD_LETTER_KEY.as_bytes() || d.u8().ok()? != fc::UUID {
        return None;
    }
    let key = d.raw(16).ok()?;
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&key);
    Some(u128::from_be_bytes(bytes))
}

fn section_code(d: &mut Decoder<'_>) -> Option<u64> {
    if d.remaining() == 0 || d.u8().ok()? != fc::DESCRIBED {
        return None;
    }
    codes::descriptor_code(&d.descriptor().ok()?)
}

#[cfg(test)]
#[path = "dead_letter_tests.rs"]
mod tests;
