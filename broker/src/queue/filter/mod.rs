//! Message filters of consuming links: which messages of a queue one
//! consumer takes. A [`MessageFilter`] is built from the filter set of a
//! receiver's source and keeps exactly the entries it applies: JMS
//! selectors (`apache.org:selector-filter:string`) and the equality
//! filters of AMQP Filter Expressions (`amqp:properties-filter`,
//! `amqp:application-properties-filter`). Entries of other types are not
//! applied and not kept, so the attach reply, which echoes the kept ones,
//! states what is in place. The forwarding protocol ships the kept entries
//! in their AMQP encoding to the serving node, where the same code
//! rebuilds the filter.
//!
//! A message is checked against all of a filter's entries with its
//! sections decoded at most once for that check, and only the sections an
//! entry reads (`fields.rs`).
//!
//! It must not know links, nodes or Raft: it sees a filter set and
//! [`Message`]s.

mod ast;
mod equality;
mod eval;
mod fields;
#[doc(hidden)]
pub mod fuzz_check;
mod lexer;
mod like;
mod parser;
mod value;

#[cfg(test)]
mod tests;

use bytes::{Bytes, BytesMut};

use super::message::Message;
use crate::codec::{Descriptor, Fields, Symbol, Value};
use equality::{EqualityFilter, Section};
use fields::MessageFields;

pub use parser::SELECTOR_BYTES_MAX;

/// The JMS selector filter's descriptor code (Apache's registered domain
/// 0x0000468C, id 4) and name, as Qpid JMS and Proton's `Selector` send it.
pub const SELECTOR_CODE: u64 = 0x0000_468C_0000_0004;
/// The JMS selector filter's symbolic descriptor.
pub const SELECTOR_NAME: &str = "apache.org:selector-filter:string";
/// `amqp:properties-filter`'s code (AMQP Filter Expressions).
pub const PROPERTIES_FILTER_CODE: u64 = 0x173;
/// `amqp:application-properties-filter`'s code.
pub const APPLICATION_PROPERTIES_FILTER_CODE: u64 = 0x174;

/// Why a selector does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    /// Not a selector.
    #[error("selector syntax: {0}")]
    Syntax(String),
    /// Longer than [`SELECTOR_BYTES_MAX`].
    #[error("selector of {0} bytes is longer than {SELECTOR_BYTES_MAX}")]
    TooLong(usize),
    /// Nested deeper than the parser takes.
    #[error("selector nested too deeply")]
    TooDeep,
}

/// Why a filter set could not be built or read back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FilterError {
    /// A selector that does not parse.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// A known filter type with a value it cannot take.
    #[error("{0}")]
    Invalid(String),
    /// The shipped encoding is not a filter set.
    #[error("bad filter encoding: {0}")]
    Encoding(String),
}

/// One applied filter entry.
#[derive(Debug, Clone, PartialEq)]
enum Applied {
    Selector(ast::Expr),
    Equality(EqualityFilter),
}

/// What kind of filter a filter-set entry is, by its descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Selector,
    Equality(Section),
}

fn kind(descriptor: &Descriptor) -> Option<Kind> {
    match descriptor {
        Descriptor::Code(SELECTOR_CODE) => Some(Kind::Selector),
        Descriptor::Code(PROPERTIES_FILTER_CODE) => Some(Kind::Equality(Section::Properties)),
        Descriptor::Code(APPLICATION_PROPERTIES_FILTER_CODE) => {
            Some(Kind::Equality(Section::Application))
        }
        Descriptor::Symbol(s) => match s.as_str() {
            SELECTOR_NAME => Some(Kind::Selector),
            "amqp:properties-filter" => Some(Kind::Equality(Section::Properties)),
            "amqp:application-properties-filter" => Some(Kind::Equality(Section::Application)),
            _ => None,
        },
        Descriptor::Code(_) => None,
    }
}

/// The filters one consumer applies (all of them must match).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageFilter {
    /// The filter-set entries applied, exactly as the client sent them.
    applied: Fields,
    filters: Vec<Applied>,
}

impl MessageFilter {
    /// The filter for a source's filter set: `None` when no entry is of a
    /// type this broker applies; an error when an entry of such a type is
    /// bad (a selector that does not parse: the attach is refused with
    /// amqp:invalid-field).
    pub fn from_filter_set(set: &Fields) -> Result<Option<MessageFilter>, FilterError> {
        let mut applied = Fields::new();
        let mut filters = Vec::new();
        for (key, value) in set {
            let Value::Described(described) = value else {
                continue; // the legacy untyped form: not known, not applied
            };
            let (descriptor, inner) = &**described;
            let Some(kind) = kind(descriptor) else {
                continue;
            };
            filters.push(match kind {
                Kind::Selector => {
                    let text = match inner {
                        Value::String(s) => s.as_str(),
                        Value::Symbol(s) => s.as_str(),
                        other => {
                            return Err(FilterError::Invalid(format!(
                                "selector filter {key:?}: {other:?} is not a string"
                            )))
                        }
                    };
                    Applied::Selector(parser::parse(text)?)
                }
                Kind::Equality(section) => Applied::Equality(EqualityFilter::new(section, inner)?),
            });
            applied.push((key.clone(), value.clone()));
        }
        if filters.is_empty() {
            return Ok(None);
        }
        Ok(Some(MessageFilter { applied, filters }))
    }

    /// The filter-set entries this filter applies, for the attach reply.
    pub fn applied(&self) -> &Fields {
        &self.applied
    }

    /// Whether `message` passes every filter.
    pub fn matches(&self, message: &Message) -> bool {
        let fields = MessageFields::new(message);
        self.filters.iter().all(|filter| match filter {
            Applied::Selector(expr) => eval::matches(expr, &fields),
            Applied::Equality(equality) => equality.matches(&fields),
        })
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
        let mut set = Fields::with_capacity(pairs.len());
        for (key, value) in pairs {
            let Value::Symbol(key) = key else {
                return Err(FilterError::Encoding("a key is not a symbol".to_owned()));
            };
            set.push((key, value));
        }
        MessageFilter::from_filter_set(&set)?
            .ok_or_else(|| FilterError::Encoding("no filter it applies".to_owned()))
    }
}

/// A selector filter-set entry (for tests and tools): `key` → the
/// described selector.
pub fn selector_entry(key: &str, selector: &str) -> (Symbol, Value) {
    (
        Symbol::from(key),
        Value::Described(Box::new((
            Descriptor::Code(SELECTOR_CODE),
            Value::String(selector.to_owned()),
        ))),
    )
}

/// The fuzz check of the selector parser and evaluator: parse `text`;
/// when it parses, evaluate it against `message`. Must never panic.
#[doc(hidden)]
pub fn fuzz_selector(text: &str, message: &Message) -> Option<bool> {
    let expr = parser::parse(text).ok()?;
    Some(eval::matches(&expr, &MessageFields::new(message)))
}
