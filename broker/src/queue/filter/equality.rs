//! The equality filters of AMQP Filter Expressions (OASIS working draft,
//! as RabbitMQ 4.1 implements them): `amqp:properties-filter` (0x173) on
//! the properties section and `amqp:application-properties-filter` (0x174)
//! on application-properties. Each is a map of key to expected value; a
//! message matches when every key matches. A string expected value may
//! start with `&p:` (the message's text starts with the rest), `&s:` (ends
//! with the rest); `&&` stands for a literal leading `&`. A null expected
//! value matches when the key is present. Numbers compare by value across
//! integer widths and floats; strings and symbols compare as text.
//!
//! It must not know selectors or links.

use super::ast::Compare;
use super::fields::MessageFields;
use super::value::{compare, Sql};
use super::FilterError;
use crate::codec::sections::Properties;
use crate::codec::Value;

/// Which section the keys name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Section {
    /// properties, keys are field names (`subject`, `message-id`, ...).
    Properties,
    /// application-properties, keys are the application's.
    Application,
}

/// What one key must hold.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    /// Present, whatever the value.
    Present,
    /// Equal to this value.
    Exact(Value),
    /// Text starting with this.
    Prefix(String),
    /// Text ending with this.
    Suffix(String),
}

/// One properties or application-properties filter.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EqualityFilter {
    section: Section,
    keys: Vec<(String, Expected)>,
}

impl EqualityFilter {
    /// Build from the filter's described value (a map).
    pub(super) fn new(section: Section, value: &Value) -> Result<EqualityFilter, FilterError> {
        let Value::Map(pairs) = value else {
            return Err(FilterError::Invalid(
                "an equality filter's value must be a map".to_owned(),
            ));
        };
        let mut keys = Vec::with_capacity(pairs.len());
        for (key, expected) in pairs {
            let key = match key {
                Value::String(k) => k.clone(),
                Value::Symbol(k) => k.as_str().to_owned(),
                other => {
                    return Err(FilterError::Invalid(format!(
                        "filter key {other:?} is not text"
                    )))
                }
            };
            if section == Section::Properties && !Properties::is_field_name(&key) {
                return Err(FilterError::Invalid(format!(
                    "{key} is not a properties field"
                )));
            }
            keys.push((key, Expected::of(expected)));
        }
        Ok(EqualityFilter { section, keys })
    }

    /// Whether every key matches.
    pub(super) fn matches(&self, fields: &MessageFields<'_>) -> bool {
        self.keys.iter().all(|(key, expected)| match self.section {
            Section::Application => fields
                .application(key)
                .is_some_and(|actual| expected.matches(&actual)),
            Section::Properties => fields
                .properties()
                .and_then(|p| p.named(key))
                .is_some_and(|actual| expected.matches(actual)),
        })
    }
}

impl Expected {
    fn of(value: &Value) -> Expected {
        match value {
            Value::Null => Expected::Present,
            Value::String(s) => {
                if let Some(rest) = s.strip_prefix("&p:") {
                    Expected::Prefix(rest.to_owned())
                } else if let Some(rest) = s.strip_prefix("&s:") {
                    Expected::Suffix(rest.to_owned())
                } else if let Some(rest) = s.strip_prefix("&&") {
                    Expected::Exact(Value::String(format!("&{rest}")))
                } else {
                    Expected::Exact(value.clone())
                }
            }
            other => Expected::Exact(other.clone()),
        }
    }

    fn matches(&self, actual: &Value) -> bool {
        let text = match actual {
            Value::String(s) => Some(s.as_str()),
            Value::Symbol(s) => Some(s.as_str()),
            _ => None,
        };
        match self {
            Expected::Present => true,
            Expected::Prefix(p) => text.is_some_and(|t| t.starts_with(p.as_str())),
            Expected::Suffix(p) => text.is_some_and(|t| t.ends_with(p.as_str())),
            Expected::Exact(want) => {
                if want == actual {
                    return true;
                }
                match (Sql::amqp(want), Sql::amqp(actual)) {
                    // Numbers by value, text by text; nothing else is equal
                    // unless identical (checked above).
                    (a @ (Sql::Long(_) | Sql::Double(_) | Sql::Str(_)), b) => {
                        compare(Compare::Eq, &a, &b) == Some(true)
                    }
                    _ => false,
                }
            }
        }
    }
}
