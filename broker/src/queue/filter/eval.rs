//! Evaluating a parsed selector against one message under SQL's
//! three-valued logic: a message matches only when the selector is
//! *true* (unknown and false both leave it to other consumers). The tree's
//! depth is bounded by the parser, so the recursion is too.
//!
//! It must not know the selector's text.

use std::borrow::Cow;

use super::ast::{Compare, Expr, Field};
use super::fields::MessageFields;
use super::value::{arith, compare, negate, tri, Sql};
use crate::codec::Value;

/// Whether `expr` is true for the message.
pub(super) fn matches(expr: &Expr, fields: &MessageFields<'_>) -> bool {
    eval(expr, fields).truth() == Some(true)
}

fn eval<'a>(expr: &'a Expr, fields: &'a MessageFields<'_>) -> Sql<'a> {
    match expr {
        Expr::Literal(literal) => Sql::literal(literal),
        Expr::Field(field) => read(field, fields),
        Expr::Neg(e) => negate(&eval(e, fields)),
        Expr::Arith(op, a, b) => arith(*op, &eval(a, fields), &eval(b, fields)),
        Expr::Compare(op, a, b) => tri(compare(*op, &eval(a, fields), &eval(b, fields))),
        Expr::Not(e) => tri(eval(e, fields).truth().map(|b| !b)),
        Expr::And(list) => {
            // False wins over unknown, unknown over true.
            let mut unknown = false;
            for e in list {
                match eval(e, fields).truth() {
                    Some(false) => return Sql::Bool(false),
                    None => unknown = true,
                    Some(true) => {}
                }
            }
            tri((!unknown).then_some(true))
        }
        Expr::Or(list) => {
            // True wins over unknown, unknown over false.
            let mut unknown = false;
            for e in list {
                match eval(e, fields).truth() {
                    Some(true) => return Sql::Bool(true),
                    None => unknown = true,
                    Some(false) => {}
                }
            }
            tri((!unknown).then_some(false))
        }
        Expr::Between {
            value,
            low,
            high,
            negated,
        } => {
            let v = eval(value, fields);
            let above = compare(Compare::Ge, &v, &eval(low, fields));
            let below = compare(Compare::Le, &v, &eval(high, fields));
            let within = match (above, below) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            tri(within.map(|b| b != *negated))
        }
        Expr::In {
            value,
            list,
            negated,
        } => {
            let v = eval(value, fields);
            if v == Sql::Null {
                return Sql::Null;
            }
            let found = list
                .iter()
                .any(|l| compare(Compare::Eq, &v, &Sql::literal(l)) == Some(true));
            Sql::Bool(found != *negated)
        }
        Expr::Like {
            value,
            pattern,
            negated,
        } => match eval(value, fields) {
            Sql::Str(s) => Sql::Bool(pattern.matches(&s) != *negated),
            // Unknown for a missing value and for one that is not text.
            _ => Sql::Null,
        },
        Expr::IsNull { value, negated } => {
            Sql::Bool((eval(value, fields) == Sql::Null) != *negated)
        }
    }
}

/// A field's value (see `ast::Field` for the JMS header mapping).
fn read<'a>(field: &'a Field, fields: &'a MessageFields<'_>) -> Sql<'a> {
    let text = |s: Option<&'a str>| s.map_or(Sql::Null, |s| Sql::Str(Cow::Borrowed(s)));
    let value = |v: Option<&'a Value>| v.map_or(Sql::Null, Sql::amqp);
    match field {
        Field::Application(key) => fields.application(key).map_or(Sql::Null, Sql::owned),
        Field::Priority => Sql::Long(i64::from(fields.priority())),
        Field::DeliveryMode => Sql::Str(Cow::Borrowed(if fields.durable() {
            "PERSISTENT"
        } else {
            "NON_PERSISTENT"
        })),
        Field::MessageId => value(fields.properties().and_then(|p| p.message_id())),
        Field::CorrelationId => value(fields.properties().and_then(|p| p.correlation_id())),
        Field::Timestamp => value(fields.properties().and_then(|p| p.creation_time())),
        Field::Expiration => value(fields.properties().and_then(|p| p.absolute_expiry_time())),
        Field::Type => text(fields.properties().and_then(|p| p.subject())),
        Field::Destination => text(fields.properties().and_then(|p| p.to())),
        Field::ReplyTo => text(fields.properties().and_then(|p| p.reply_to())),
        Field::GroupId => text(fields.properties().and_then(|p| p.group_id())),
        Field::GroupSeq => value(fields.properties().and_then(|p| p.group_sequence())),
        Field::UserId => match fields.properties().and_then(|p| p.user_id()) {
            Some(Value::Binary(b)) => {
                std::str::from_utf8(b).map_or(Sql::Null, |s| Sql::Str(Cow::Borrowed(s)))
            }
            other => value(other),
        },
    }
}
