//! The tokens of a JMS message selector (JMS 1.1 section 3.8.1.1): string
//! literals with `''` for a quote, exact and approximate numerals,
//! identifiers (Java-style, or double-quoted with `""` for a quote, as
//! Artemis accepts for keys such as `x-colour`), keywords (any case) and
//! operators.
//!
//! It must not know what the tokens mean together (`parser.rs`).

use super::SelectorError;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    /// An identifier, as written (case matters).
    Ident(String),
    /// A string literal, unquoted.
    Str(String),
    /// An exact numeral.
    Long(i64),
    /// An approximate numeral.
    Double(f64),
    /// A keyword, upper-cased.
    Keyword(Keyword),
    /// `=` `<>` `<` `>` `<=` `>=` `+` `-` `*` `/` `(` `)` `,`
    Op(&'static str),
}

/// The selector keywords (SQL 92's, as JMS uses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keyword {
    And,
    Or,
    Not,
    Between,
    Like,
    Escape,
    In,
    Is,
    Null,
    True,
    False,
}

impl Keyword {
    fn parse(word: &str) -> Option<Keyword> {
        const WORDS: [(&str, Keyword); 11] = [
            ("AND", Keyword::And),
            ("OR", Keyword::Or),
            ("NOT", Keyword::Not),
            ("BETWEEN", Keyword::Between),
            ("LIKE", Keyword::Like),
            ("ESCAPE", Keyword::Escape),
            ("IN", Keyword::In),
            ("IS", Keyword::Is),
            ("NULL", Keyword::Null),
            ("TRUE", Keyword::True),
            ("FALSE", Keyword::False),
        ];
        WORDS
            .iter()
            .find(|(w, _)| w.eq_ignore_ascii_case(word))
            .map(|(_, k)| *k)
    }
}

const OPERATORS: [&str; 13] = [
    "<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "(", ")", ",",
];

/// Split `text` into tokens.
pub(super) fn tokens(text: &str) -> Result<Vec<Token>, SelectorError> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let c = bytes[at];
        if c.is_ascii_whitespace() {
            at += 1;
        } else if c == b'\'' {
            let (s, next) = quoted(text, at, '\'')?;
            out.push(Token::Str(s));
            at = next;
        } else if c == b'"' {
            let (s, next) = quoted(text, at, '"')?;
            out.push(Token::Ident(s));
            at = next;
        } else if c.is_ascii_digit()
            || (c == b'.' && bytes.get(at + 1).is_some_and(u8::is_ascii_digit))
        {
            let (token, next) = number(text, at)?;
            out.push(token);
            at = next;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let end = text[at..]
                .find(|ch: char| {
                    !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '$' || ch == '.')
                })
                .map_or(text.len(), |n| at + n);
            let word = &text[at..end];
            out.push(match Keyword::parse(word) {
                Some(k) => Token::Keyword(k),
                None => Token::Ident(word.to_owned()),
            });
            at = end;
        } else if let Some(op) = OPERATORS.iter().find(|op| text[at..].starts_with(**op)) {
            out.push(Token::Op(op));
            at += op.len();
        } else {
            let ch = text[at..].chars().next().unwrap_or('?');
            return Err(SelectorError::Syntax(format!("unexpected {ch:?} at {at}")));
        }
    }
    Ok(out)
}

/// A literal quoted by `quote` starting at `start`, a doubled quote
/// standing for one; the text and where it ends.
fn quoted(text: &str, start: usize, quote: char) -> Result<(String, usize), SelectorError> {
    let mut out = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((i, ch)) = chars.next() {
        if ch != quote {
            out.push(ch);
            continue;
        }
        let after = start + 1 + i + 1;
        if text[after..].starts_with(quote) {
            out.push(quote);
            chars.next();
            continue;
        }
        return Ok((out, after));
    }
    Err(SelectorError::Syntax(format!(
        "unterminated {quote}...{quote} at {start}"
    )))
}

/// A numeral starting at `start`: decimal digits with an optional `L`
/// (exact), or with a fraction and/or exponent (approximate), or a `0x`
/// hexadecimal (exact).
fn number(text: &str, start: usize) -> Result<(Token, usize), SelectorError> {
    let rest = &text[start..];
    let bad = || SelectorError::Syntax(format!("bad number at {start}"));
    if rest.len() > 2 && (rest.starts_with("0x") || rest.starts_with("0X")) {
        let digits = rest[2..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len() - 2);
        let value = i64::from_str_radix(&rest[2..2 + digits], 16).map_err(|_| bad())?;
        return Ok((Token::Long(value), start + 2 + digits));
    }
    let b = rest.as_bytes();
    let mut end = 0;
    let mut approximate = false;
    while end < b.len() && b[end].is_ascii_digit() {
        end += 1;
    }
    if end < b.len() && b[end] == b'.' {
        approximate = true;
        end += 1;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
    }
    if end < b.len() && (b[end] == b'e' || b[end] == b'E') {
        let mut e = end + 1;
        if e < b.len() && (b[e] == b'+' || b[e] == b'-') {
            e += 1;
        }
        if e < b.len() && b[e].is_ascii_digit() {
            approximate = true;
            while e < b.len() && b[e].is_ascii_digit() {
                e += 1;
            }
            end = e;
        }
    }
    let literal = &rest[..end];
    if approximate {
        let mut next = end;
        if next < b.len() && matches!(b[next], b'd' | b'D' | b'f' | b'F') {
            next += 1;
        }
        let value: f64 = literal.parse().map_err(|_| bad())?;
        return Ok((Token::Double(value), start + next));
    }
    let mut next = end;
    if next < b.len() && matches!(b[next], b'l' | b'L') {
        next += 1;
    }
    match literal.parse::<i64>() {
        Ok(value) => Ok((Token::Long(value), start + next)),
        // Too big for a long: as SQL, an approximate value.
        Err(_) => Ok((
            Token::Double(literal.parse().map_err(|_| bad())?),
            start + next,
        )),
    }
}
