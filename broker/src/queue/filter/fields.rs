//! A message as a filter reads it: the header the queue already decoded,
//! the properties section decoded on first use, once, and the
//! application-properties section found on first use, once, with only the
//! values asked for decoded (`codec::sections` skips the others by
//! their size prefixes; the body is never touched). A message whose section
//! cannot be read has, for a filter, no such section.
//!
//! It must not know selectors or filter types.

use std::cell::OnceCell;

use bytes::Bytes;

use crate::codec::message::PRIORITY_DEFAULT;
use crate::codec::sections::{self, Properties};
use crate::codec::Value;

use super::super::message::Message;

/// The lazily decoded fields of one message, for one filter check.
pub(crate) struct MessageFields<'m> {
    message: &'m Message,
    properties: OnceCell<Option<Properties>>,
    /// The application-properties map, still encoded.
    application: OnceCell<Option<Bytes>>,
}

impl<'m> MessageFields<'m> {
    pub(crate) fn new(message: &'m Message) -> Self {
        MessageFields {
            message,
            properties: OnceCell::new(),
            application: OnceCell::new(),
        }
    }

    /// header.priority (the spec's default when absent).
    pub(crate) fn priority(&self) -> u8 {
        self.message
            .header
            .as_ref()
            .map_or(PRIORITY_DEFAULT, |h| h.priority)
    }

    /// header.durable.
    pub(crate) fn durable(&self) -> bool {
        self.message.header.as_ref().is_some_and(|h| h.durable)
    }

    /// The properties section, if the message has a readable one.
    pub(crate) fn properties(&self) -> Option<&Properties> {
        self.properties
            .get_or_init(|| sections::properties(&self.message.bytes).ok().flatten())
            .as_ref()
    }

    /// The application property `key` (keys are strings; a symbol key is
    /// taken too). The first entry wins if a key repeats. The section is
    /// found once per check; each lookup scans the encoded map and decodes
    /// only the value it returns.
    pub(crate) fn application(&self, key: &str) -> Option<Value> {
        let map = self
            .application
            .get_or_init(|| {
                sections::application_properties_encoded(&self.message.bytes)
                    .ok()
                    .flatten()
            })
            .as_ref()?;
        sections::map_lookup(map, key).ok().flatten()
    }
}
