//! The values a selector computes with, and its operators under SQL's
//! three-valued logic: `Null` is *unknown*. As JMS 1.1 section 3.8.1.2
//! says: numbers compare across exact and approximate (promoted to
//! double); strings and booleans compare only with `=` and `<>`; comparing
//! values of unlike types is false; any comparison or arithmetic with an
//! unknown operand is unknown.
//!
//! It must not know the expression tree or messages.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::ast::{Arith, Compare, Literal};
use crate::codec::Value;

/// A selector value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sql<'a> {
    /// Unknown (an absent property, or a type a selector cannot use).
    Null,
    Bool(bool),
    Long(i64),
    Double(f64),
    Str(Cow<'a, str>),
}

impl<'a> Sql<'a> {
    /// A literal's value.
    pub(crate) fn literal(literal: &'a Literal) -> Sql<'a> {
        match literal {
            Literal::Str(s) => Sql::Str(Cow::Borrowed(s)),
            Literal::Long(v) => Sql::Long(*v),
            Literal::Double(v) => Sql::Double(*v),
            Literal::Bool(b) => Sql::Bool(*b),
        }
    }

    /// An AMQP value as a selector sees it: integers as longs (a ulong
    /// beyond a long as a double), floats as doubles, strings, symbols
    /// and chars as strings, timestamps as milliseconds, uuids as text;
    /// anything else (binary, lists, maps, ...) is unknown.
    pub(crate) fn amqp(value: &'a Value) -> Sql<'a> {
        match value {
            Value::Bool(b) => Sql::Bool(*b),
            Value::Ubyte(v) => Sql::Long(i64::from(*v)),
            Value::Ushort(v) => Sql::Long(i64::from(*v)),
            Value::Uint(v) => Sql::Long(i64::from(*v)),
            Value::Ulong(v) => i64::try_from(*v).map_or(Sql::Double(*v as f64), Sql::Long),
            Value::Byte(v) => Sql::Long(i64::from(*v)),
            Value::Short(v) => Sql::Long(i64::from(*v)),
            Value::Int(v) => Sql::Long(i64::from(*v)),
            Value::Long(v) | Value::Timestamp(v) => Sql::Long(*v),
            Value::Float(v) => Sql::Double(f64::from(*v)),
            Value::Double(v) => Sql::Double(*v),
            Value::String(s) => Sql::Str(Cow::Borrowed(s)),
            Value::Symbol(s) => Sql::Str(Cow::Borrowed(s.as_str())),
            Value::Char(c) => Sql::Str(Cow::Owned(c.to_string())),
            Value::Uuid(u) => Sql::Str(Cow::Owned(uuid_text(u))),
            _ => Sql::Null,
        }
    }

    /// [`Sql::amqp`] of a value the selector may keep (text moves, no copy).
    pub(crate) fn owned(value: Value) -> Sql<'static> {
        match value {
            Value::String(s) => Sql::Str(Cow::Owned(s)),
            Value::Symbol(s) => Sql::Str(Cow::Owned(s.0)),
            other => match Sql::amqp(&other) {
                Sql::Null => Sql::Null,
                Sql::Bool(b) => Sql::Bool(b),
                Sql::Long(v) => Sql::Long(v),
                Sql::Double(v) => Sql::Double(v),
                Sql::Str(s) => Sql::Str(Cow::Owned(s.into_owned())),
            },
        }
    }

    /// The truth value: `Some` for a boolean, `None` for unknown (or a
    /// non-boolean, which a condition cannot use).
    pub(crate) fn truth(&self) -> Option<bool> {
        match self {
            Sql::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Sql::Long(v) => Some(*v as f64),
            Sql::Double(v) => Some(*v),
            _ => None,
        }
    }
}

/// A three-valued result as a value.
pub(crate) fn tri(truth: Option<bool>) -> Sql<'static> {
    truth.map_or(Sql::Null, Sql::Bool)
}

/// `a op b`.
pub(crate) fn compare(op: Compare, a: &Sql<'_>, b: &Sql<'_>) -> Option<bool> {
    let ordering = match (a, b) {
        (Sql::Null, _) | (_, Sql::Null) => return None,
        (Sql::Long(x), Sql::Long(y)) => Some(x.cmp(y)),
        (Sql::Long(_) | Sql::Double(_), Sql::Long(_) | Sql::Double(_)) => {
            // Both numbers: promoted to double (NaN compares as nothing).
            a.number()?.partial_cmp(&b.number()?)
        }
        (Sql::Str(x), Sql::Str(y)) => equality_only(op, x == y),
        (Sql::Bool(x), Sql::Bool(y)) => equality_only(op, x == y),
        // Unlike types.
        _ => return Some(false),
    };
    let Some(ordering) = ordering else {
        return Some(op == Compare::Ne);
    };
    Some(match op {
        Compare::Eq => ordering == Ordering::Equal,
        Compare::Ne => ordering != Ordering::Equal,
        Compare::Lt => ordering == Ordering::Less,
        Compare::Gt => ordering == Ordering::Greater,
        Compare::Le => ordering != Ordering::Greater,
        Compare::Ge => ordering != Ordering::Less,
    })
}

/// Strings and booleans: `=` and `<>` only; an ordering is false.
fn equality_only(op: Compare, equal: bool) -> Option<Ordering> {
    match op {
        Compare::Eq | Compare::Ne => Some(if equal {
            Ordering::Equal
        } else {
            Ordering::Less
        }),
        // Neither less, equal nor greater: every ordering test is false.
        _ => None,
    }
}

/// `a op b` on numbers (exact while both are exact and it fits, else
/// double); unknown for anything that is not a number, and for an exact
/// division by zero.
pub(crate) fn arith(op: Arith, a: &Sql<'_>, b: &Sql<'_>) -> Sql<'static> {
    if let (Sql::Long(x), Sql::Long(y)) = (a, b) {
        let exact = match op {
            Arith::Add => x.checked_add(*y),
            Arith::Sub => x.checked_sub(*y),
            Arith::Mul => x.checked_mul(*y),
            Arith::Div if *y == 0 => return Sql::Null,
            Arith::Div => x.checked_div(*y),
        };
        if let Some(v) = exact {
            return Sql::Long(v);
        }
    }
    let (Some(x), Some(y)) = (a.number(), b.number()) else {
        return Sql::Null;
    };
    Sql::Double(match op {
        Arith::Add => x + y,
        Arith::Sub => x - y,
        Arith::Mul => x * y,
        Arith::Div => x / y,
    })
}

/// `-a`.
pub(crate) fn negate(a: &Sql<'_>) -> Sql<'static> {
    match a {
        Sql::Long(v) => v.checked_neg().map_or(Sql::Double(-(*v as f64)), Sql::Long),
        Sql::Double(v) => Sql::Double(-v),
        _ => Sql::Null,
    }
}

/// A uuid in its usual 8-4-4-4-12 hex form.
fn uuid_text(u: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    for (i, byte) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push_str(&format!("{byte:02x}"));
    }
    out
}
