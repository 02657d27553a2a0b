//! [`AddressPattern`]: the glob a queue policy matches queue addresses
//! with. `*` matches any run of characters (none included) except `/`,
//! `?` exactly one character except `/`, everything else itself. So `*`
//! never crosses from the kind into the name: `/quorum/orders-*` matches
//! `/quorum/orders-eu` and not `/queues/orders-eu`, and `/*/orders` both
//! `/queues/orders` and `/quorum/orders`. (Queue names hold no `/`, so a
//! `*` in the name part matches the rest of any name.)
//!
//! Knows addresses as strings only; what a policy does is `policy.rs`'s.

use std::fmt;

/// Longest pattern accepted, in bytes (a prefix and a name of 255).
const PATTERN_MAX_BYTES: usize = 512;

/// A checked address glob.
#[derive(Clone, PartialEq, Eq)]
pub struct AddressPattern {
    source: String,
    chars: Vec<char>,
}

/// Why a string is not an address pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pattern {pattern:?}: {why}")]
pub struct PatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl AddressPattern {
    /// Check a pattern: `/<kind>/<name>`, each part non-empty, where kind
    /// and name may hold `*` and `?`; no whitespace or control characters.
    pub fn parse(pattern: &str) -> Result<AddressPattern, PatternError> {
        let error = |why| PatternError {
            pattern: pattern.to_owned(),
            why,
        };
        if pattern.len() > PATTERN_MAX_BYTES {
            return Err(error("longer than 512 bytes"));
        }
        if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(error("holds whitespace or a control character"));
        }
        let Some(rest) = pattern.strip_prefix('/') else {
            return Err(error("must start with '/' (e.g. /quorum/orders-*)"));
        };
        match rest.split_once('/') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() && !name.contains('/') => {}
            _ => return Err(error("must be /<kind>/<name>, e.g. /quorum/orders-*")),
        }
        Ok(AddressPattern {
            source: pattern.to_owned(),
            chars: pattern.chars().collect(),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `address` (e.g. `/quorum/orders-eu`) matches.
    pub fn matches(&self, address: &str) -> bool {
        let text: Vec<char> = address.chars().collect();
        glob(&self.chars, &text)
    }
}

/// Iterative glob with one backtrack point per `*` run (the classic
/// linear-space matcher): on a mismatch after a `*`, let that `*` take one
/// more character, unless that character is `/`.
fn glob(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some('?') if text[t] != '/' => {
                p += 1;
                t += 1;
                continue;
            }
            Some(&c) if c != '*' && c != '?' && c == text[t] => {
                p += 1;
                t += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, st)) if text[st] != '/' => {
                star = Some((sp, st + 1));
                p = sp + 1;
                t = st + 1;
            }
            _ => return false,
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

impl fmt::Display for AddressPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl fmt::Debug for AddressPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AddressPattern({:?})", self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, address: &str) -> bool {
        AddressPattern::parse(pattern).unwrap().matches(address)
    }

    #[test]
    fn star_and_question_mark_stay_within_a_segment() {
        assert!(m("/quorum/orders-*", "/quorum/orders-eu"));
        assert!(m("/quorum/orders-*", "/quorum/orders-"));
        assert!(!m("/quorum/orders-*", "/queues/orders-eu"));
        assert!(!m("/quorum/orders-*", "/quorum/order"));
        assert!(m("/*/orders", "/queues/orders"));
        assert!(m("/*/orders", "/quorum/orders"));
        assert!(m("/*/*", "/queues/x"));
        assert!(m("/queues/a?c", "/queues/abc"));
        assert!(!m("/queues/a?c", "/queues/ac"));
        assert!(!m("/queue?/x", "/queue//x"));
        assert!(!m("/*/x", "/a/b/x"));
        assert!(m("/queues/*-dlq", "/queues/orders-x-dlq"));
        assert!(!m("/queues/*-dlq", "/queues/orders-dlq-x"));
        assert!(m("/queues/exact", "/queues/exact"));
        assert!(!m("/queues/exact", "/queues/exactly"));
        assert!(m("/queues/**", "/queues/x"));
        assert!(m("/queues/é*", "/queues/é1"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "",
            "orders-*",
            "/quorum",
            "/*",
            "/queues?x",
            "/quorum/",
            "//x",
            "/quorum/a/b",
            "/quorum/a b",
            "/quorum/a\tb",
        ] {
            assert!(AddressPattern::parse(bad).is_err(), "{bad:?}");
        }
        assert!(AddressPattern::parse(&format!("/queues/{}", "x".repeat(600))).is_err());
    }
}
