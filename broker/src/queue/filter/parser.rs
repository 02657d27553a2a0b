//! The selector grammar (JMS 1.1 section 3.8.1.1, SQL 92's conditional
//! expressions), by recursive descent over the lexer's tokens:
//!
//! ```text
//! or        := and (OR and)*
//! and       := not (AND not)*
//! not       := NOT not | predicate
//! predicate := sum [cmp sum | [NOT] BETWEEN sum AND sum
//!                  | [NOT] IN ( literal, ... ) | [NOT] LIKE 'p' [ESCAPE 'c']
//!                  | IS [NOT] NULL]
//! sum       := product ((+|-) product)*
//! product   := unary ((*|/) unary)*
//! unary     := (+|-) unary | literal | identifier | ( or )
//! ```
//!
//! A selector is outside input: its length, the parser's recursion and the
//! tree's depth are bounded, and every error is a [`SelectorError`].
//!
//! It must not know how the tree is evaluated.

use super::ast::{Arith, Compare, Expr, Field, Literal};
use super::lexer::{tokens, Keyword, Token};
use super::like::LikePattern;
use super::SelectorError;

/// Longest selector taken, in bytes.
pub const SELECTOR_BYTES_MAX: usize = 8 * 1024;
/// Deepest nesting of parentheses, NOTs and signs.
const NESTING_MAX: usize = 64;
/// Deepest expression tree (AND/OR chains are flat and count once).
const EXPR_DEPTH_MAX: usize = 64;

/// Parse a selector.
pub(super) fn parse(text: &str) -> Result<Expr, SelectorError> {
    if text.len() > SELECTOR_BYTES_MAX {
        return Err(SelectorError::TooLong(text.len()));
    }
    let mut parser = Parser {
        tokens: tokens(text)?,
        at: 0,
        nesting: 0,
    };
    if parser.tokens.is_empty() {
        return Err(SelectorError::Syntax("empty selector".to_owned()));
    }
    let (expr, _) = parser.or()?;
    match parser.peek() {
        None => Ok(expr),
        Some(token) => Err(SelectorError::Syntax(format!("unexpected {token:?}"))),
    }
}

/// An expression and the depth of its tree.
type Parsed = (Expr, usize);

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    nesting: usize,
}

fn deeper(depth: usize) -> Result<usize, SelectorError> {
    let depth = depth + 1;
    if depth > EXPR_DEPTH_MAX {
        return Err(SelectorError::TooDeep);
    }
    Ok(depth)
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn eat_keyword(&mut self, keyword: Keyword) -> bool {
        if self.peek() == Some(&Token::Keyword(keyword)) {
            self.at += 1;
            return true;
        }
        false
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Token::Op(o)) if *o == op) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expect_op(&mut self, op: &str) -> Result<(), SelectorError> {
        if self.eat_op(op) {
            return Ok(());
        }
        Err(SelectorError::Syntax(format!(
            "expected {op:?}, found {:?}",
            self.peek()
        )))
    }

    /// Run `step` one nesting level deeper.
    fn nested<T>(
        &mut self,
        step: impl FnOnce(&mut Self) -> Result<T, SelectorError>,
    ) -> Result<T, SelectorError> {
        if self.nesting >= NESTING_MAX {
            return Err(SelectorError::TooDeep);
        }
        self.nesting += 1;
        let result = step(self);
        self.nesting -= 1;
        result
    }

    fn or(&mut self) -> Result<Parsed, SelectorError> {
        self.chain(Keyword::Or, Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Parsed, SelectorError> {
        self.chain(Keyword::And, Self::not, Expr::And)
    }

    /// `item (keyword item)*`, flattened into one n-ary node.
    fn chain(
        &mut self,
        keyword: Keyword,
        item: fn(&mut Self) -> Result<Parsed, SelectorError>,
        node: fn(Vec<Expr>) -> Expr,
    ) -> Result<Parsed, SelectorError> {
        let (first, mut depth) = item(self)?;
        if !matches!(self.peek(), Some(Token::Keyword(k)) if *k == keyword) {
            return Ok((first, depth));
        }
        let mut items = vec![first];
        while self.eat_keyword(keyword) {
            let (next, d) = item(self)?;
            depth = depth.max(d);
            items.push(next);
        }
        Ok((node(items), deeper(depth)?))
    }

    fn not(&mut self) -> Result<Parsed, SelectorError> {
        if self.eat_keyword(Keyword::Not) {
            let (inner, depth) = self.nested(Self::not)?;
            return Ok((Expr::Not(Box::new(inner)), deeper(depth)?));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Parsed, SelectorError> {
        let (left, depth) = self.sum()?;
        let compare = match self.peek() {
            Some(Token::Op("=")) => Some(Compare::Eq),
            Some(Token::Op("<>")) => Some(Compare::Ne),
            Some(Token::Op("<")) => Some(Compare::Lt),
            Some(Token::Op(">")) => Some(Compare::Gt),
            Some(Token::Op("<=")) => Some(Compare::Le),
            Some(Token::Op(">=")) => Some(Compare::Ge),
            _ => None,
        };
        if let Some(op) = compare {
            self.at += 1;
            let (right, d) = self.sum()?;
            let depth = deeper(depth.max(d))?;
            return Ok((Expr::Compare(op, Box::new(left), Box::new(right)), depth));
        }
        let value = Box::new(left);
        if self.eat_keyword(Keyword::Is) {
            let negated = self.eat_keyword(Keyword::Not);
            if !self.eat_keyword(Keyword::Null) {
                return Err(SelectorError::Syntax("expected NULL after IS".to_owned()));
            }
            return Ok((Expr::IsNull { value, negated }, deeper(depth)?));
        }
        let negated = self.eat_keyword(Keyword::Not);
        if self.eat_keyword(Keyword::Between) {
            let (low, dl) = self.sum()?;
            if !self.eat_keyword(Keyword::And) {
                return Err(SelectorError::Syntax("expected AND in BETWEEN".to_owned()));
            }
            let (high, dh) = self.sum()?;
            let depth = deeper(depth.max(dl).max(dh))?;
            let node = Expr::Between {
                value,
                low: Box::new(low),
                high: Box::new(high),
                negated,
            };
            return Ok((node, depth));
        }
        if self.eat_keyword(Keyword::In) {
            self.expect_op("(")?;
            let mut list = vec![self.literal()?];
            while self.eat_op(",") {
                list.push(self.literal()?);
            }
            self.expect_op(")")?;
            let node = Expr::In {
                value,
                list,
                negated,
            };
            return Ok((node, deeper(depth)?));
        }
        if self.eat_keyword(Keyword::Like) {
            let Some(Token::Str(pattern)) = self.next() else {
                return Err(SelectorError::Syntax("LIKE needs a string".to_owned()));
            };
            let escape = if self.eat_keyword(Keyword::Escape) {
                let Some(Token::Str(escape)) = self.next() else {
                    return Err(SelectorError::Syntax("ESCAPE needs a string".to_owned()));
                };
                let mut chars = escape.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => Some(c),
                    _ => {
                        return Err(SelectorError::Syntax(
                            "ESCAPE takes one character".to_owned(),
                        ))
                    }
                }
            } else {
                None
            };
            let node = Expr::Like {
                value,
                pattern: LikePattern::new(&pattern, escape)?,
                negated,
            };
            return Ok((node, deeper(depth)?));
        }
        if negated {
            return Err(SelectorError::Syntax(
                "NOT must be followed by BETWEEN, IN or LIKE here".to_owned(),
            ));
        }
        Ok((*value, depth))
    }

    fn sum(&mut self) -> Result<Parsed, SelectorError> {
        let (mut left, mut depth) = self.product()?;
        loop {
            let op = if self.eat_op("+") {
                Arith::Add
            } else if self.eat_op("-") {
                Arith::Sub
            } else {
                return Ok((left, depth));
            };
            let (right, d) = self.product()?;
            depth = deeper(depth.max(d))?;
            left = Expr::Arith(op, Box::new(left), Box::new(right));
        }
    }

    fn product(&mut self) -> Result<Parsed, SelectorError> {
        let (mut left, mut depth) = self.unary()?;
        loop {
            let op = if self.eat_op("*") {
                Arith::Mul
            } else if self.eat_op("/") {
                Arith::Div
            } else {
                return Ok((left, depth));
            };
            let (right, d) = self.unary()?;
            depth = deeper(depth.max(d))?;
            left = Expr::Arith(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Parsed, SelectorError> {
        if self.eat_op("-") {
            let (inner, depth) = self.nested(Self::unary)?;
            return Ok(match inner {
                // A negative literal, not an operation on one.
                Expr::Literal(Literal::Long(v)) => {
                    (Expr::Literal(Literal::Long(v.wrapping_neg())), depth)
                }
                Expr::Literal(Literal::Double(v)) => (Expr::Literal(Literal::Double(-v)), depth),
                other => (Expr::Neg(Box::new(other)), deeper(depth)?),
            });
        }
        if self.eat_op("+") {
            return self.nested(Self::unary);
        }
        if self.eat_op("(") {
            let inner = self.nested(Self::or)?;
            self.expect_op(")")?;
            return Ok(inner);
        }
        match self.next() {
            Some(Token::Ident(name)) => Ok((Expr::Field(Field::named(&name)), 1)),
            Some(Token::Str(s)) => Ok((Expr::Literal(Literal::Str(s)), 1)),
            Some(Token::Long(v)) => Ok((Expr::Literal(Literal::Long(v)), 1)),
            Some(Token::Double(v)) => Ok((Expr::Literal(Literal::Double(v)), 1)),
            Some(Token::Keyword(Keyword::True)) => Ok((Expr::Literal(Literal::Bool(true)), 1)),
            Some(Token::Keyword(Keyword::False)) => Ok((Expr::Literal(Literal::Bool(false)), 1)),
            other => Err(SelectorError::Syntax(format!("unexpected {other:?}"))),
        }
    }

    /// A literal of an IN list (a sign allowed on numbers).
    fn literal(&mut self) -> Result<Literal, SelectorError> {
        let negative = self.eat_op("-");
        match (self.next(), negative) {
            (Some(Token::Str(s)), false) => Ok(Literal::Str(s)),
            (Some(Token::Long(v)), n) => Ok(Literal::Long(if n { v.wrapping_neg() } else { v })),
            (Some(Token::Double(v)), n) => Ok(Literal::Double(if n { -v } else { v })),
            (Some(Token::Keyword(Keyword::True)), false) => Ok(Literal::Bool(true)),
            (Some(Token::Keyword(Keyword::False)), false) => Ok(Literal::Bool(false)),
            (other, _) => Err(SelectorError::Syntax(format!(
                "IN takes literals, found {other:?}"
            ))),
        }
    }
}
