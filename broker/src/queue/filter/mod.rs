//! Message filters of consuming links: which messages of a queue one
//! consumer takes. A [`MessageFilter`] is built from the filters a
//! receiver's source asked for and keeps exactly the ones it applies (the
//! attach reply echoes those, and the forwarding protocol ships them to the
//! serving node in their AMQP encoding, where the same code rebuilds it).
//!
//! It must not know links, nodes or Raft: it sees a filter set and
//! [`Message`]s.

use bytes::{Bytes, BytesMut};

use super::message::Message;
use crate::codec::{Fields, Value};

/// Why a filter set could not be built or read back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FilterError {
    /// The shipped encoding is not a filter set.
    #[error("bad filter encoding: {0}")]
    Encoding(String),
}

/// The filters one consumer applies (all of them must match).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageFilter {
    /// The filter set entries applied, as the client sent them.
    applied: Fields,
}

impl MessageFilter {
    /// The filter-set entries this filter applies, for the attach reply.
    pub fn applied(&self) -> &Fields {
        &self.applied
    }

    /// Whether `message` passes every filter.
    pub fn matches(&self, _message: &Message) -> bool {
        true
    }

    /// The applied filter set in its AMQP encoding (a map), for the
    /// forwarding protocol.
    pub fn to_wire(&self) -> Vec<u8> {
        let map = Value::Map(
            self.applied
                .iter()
                .map(|(k, v)| (Value::Symbol(k.clone()), v.clone()))
                .collect(),
        );
        let mut out = BytesMut::new();
        map.encode(&mut out);
        out.to_vec()
    }

    /// Read back [`MessageFilter::to_wire`]'s encoding.
    pub fn from_wire(bytes: &[u8]) -> Result<MessageFilter, FilterError> {
        let mut input = Bytes::copy_from_slice(bytes);
        let value = Value::decode(&mut input).map_err(|e| FilterError::Encoding(e.to_string()))?;
        let Value::Map(pairs) = value else {
            return Err(FilterError::Encoding("not a map".to_owned()));
        };
        let mut applied = Fields::with_capacity(pairs.len());
        for (key, value) in pairs {
            let Value::Symbol(key) = key else {
                return Err(FilterError::Encoding("a key is not a symbol".to_owned()));
            };
            applied.push((key, value));
        }
        Ok(MessageFilter { applied })
    }
}
