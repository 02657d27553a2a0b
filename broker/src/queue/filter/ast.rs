//! A parsed selector: the expression tree the evaluator walks, with each
//! identifier already resolved to the message field it names (so nothing
//! is looked up by name per message).
//!
//! It must not know the selector's text (`lexer.rs`, `parser.rs`) nor how a
//! message is read (`fields.rs`).

use super::like::LikePattern;

/// A message field an identifier names: a JMS header mapped to the AMQP
/// header or properties section, or an application property.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Field {
    /// JMSMessageID: properties.message-id.
    MessageId,
    /// JMSCorrelationID: properties.correlation-id.
    CorrelationId,
    /// JMSPriority: header.priority (4 when absent).
    Priority,
    /// JMSDeliveryMode: header.durable, as 'PERSISTENT' / 'NON_PERSISTENT'.
    DeliveryMode,
    /// JMSTimestamp: properties.creation-time (ms).
    Timestamp,
    /// JMSExpiration: properties.absolute-expiry-time (ms).
    Expiration,
    /// JMSType: properties.subject.
    Type,
    /// JMSDestination: properties.to.
    Destination,
    /// JMSReplyTo: properties.reply-to.
    ReplyTo,
    /// JMSXUserID: properties.user-id (as UTF-8 text).
    UserId,
    /// JMSXGroupID: properties.group-id.
    GroupId,
    /// JMSXGroupSeq: properties.group-sequence.
    GroupSeq,
    /// Any other identifier: the application property of that name.
    Application(String),
}

impl Field {
    /// The field an identifier names.
    pub(super) fn named(name: &str) -> Field {
        match name {
            "JMSMessageID" => Field::MessageId,
            "JMSCorrelationID" => Field::CorrelationId,
            "JMSPriority" => Field::Priority,
            "JMSDeliveryMode" => Field::DeliveryMode,
            "JMSTimestamp" => Field::Timestamp,
            "JMSExpiration" => Field::Expiration,
            "JMSType" => Field::Type,
            "JMSDestination" => Field::Destination,
            "JMSReplyTo" => Field::ReplyTo,
            "JMSXUserID" => Field::UserId,
            "JMSXGroupID" => Field::GroupId,
            "JMSXGroupSeq" => Field::GroupSeq,
            other => Field::Application(other.to_owned()),
        }
    }
}

/// A literal value of the selector.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Literal {
    /// 'text'
    Str(String),
    /// An exact numeral.
    Long(i64),
    /// An approximate numeral.
    Double(f64),
    /// TRUE / FALSE.
    Bool(bool),
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compare {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

/// One node of the expression tree. Its depth is bounded by the parser
/// (`EXPR_DEPTH_MAX`), so walking it recursively is safe.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    Literal(Literal),
    Field(Field),
    /// Unary minus.
    Neg(Box<Expr>),
    Arith(Arith, Box<Expr>, Box<Expr>),
    Compare(Compare, Box<Expr>, Box<Expr>),
    /// Every operand (n-ary, so long chains stay shallow).
    And(Vec<Expr>),
    /// Any operand.
    Or(Vec<Expr>),
    Not(Box<Expr>),
    /// `e [NOT] BETWEEN low AND high`
    Between {
        value: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    /// `e [NOT] IN (literal, ...)`
    In {
        value: Box<Expr>,
        list: Vec<Literal>,
        negated: bool,
    },
    /// `e [NOT] LIKE 'pattern' [ESCAPE 'c']`
    Like {
        value: Box<Expr>,
        pattern: LikePattern,
        negated: bool,
    },
    /// `e IS [NOT] NULL`
    IsNull {
        value: Box<Expr>,
        negated: bool,
    },
}
