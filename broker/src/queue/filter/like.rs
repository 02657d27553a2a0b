//! SQL `LIKE` patterns: `%` any run of characters, `_` one character, and
//! an optional escape character that makes the next `%`, `_` or itself
//! literal. Matching is iterative (one backtrack point for the last `%`),
//! so a hostile pattern costs at most pattern length × text length steps
//! and no stack.
//!
//! It must not know selectors or messages.

use super::SelectorError;

/// One element of a compiled pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// This character.
    Char(char),
    /// `_`
    One,
    /// `%`
    Any,
}

/// A compiled `LIKE` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LikePattern {
    parts: Vec<Part>,
}

impl LikePattern {
    /// Compile `pattern` with an optional `escape` character.
    pub(crate) fn new(pattern: &str, escape: Option<char>) -> Result<LikePattern, SelectorError> {
        let mut parts = Vec::with_capacity(pattern.len());
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            if Some(c) == escape {
                match chars.next() {
                    Some(next) => parts.push(Part::Char(next)),
                    None => {
                        return Err(SelectorError::Syntax(
                            "LIKE pattern ends with its escape character".to_owned(),
                        ))
                    }
                }
                continue;
            }
            parts.push(match c {
                '%' => Part::Any,
                '_' => Part::One,
                other => Part::Char(other),
            });
        }
        Ok(LikePattern { parts })
    }

    /// Whether `text` matches the whole pattern.
    pub(crate) fn matches(&self, text: &str) -> bool {
        let parts = &self.parts;
        let (mut p, mut t) = (0usize, 0usize);
        // Where the last `%` was and the text position it now stands for.
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            let c = text[t..].chars().next().unwrap_or('\0');
            match parts.get(p) {
                Some(Part::Any) => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                Some(Part::One) => {
                    p += 1;
                    t += c.len_utf8();
                    continue;
                }
                Some(Part::Char(want)) if *want == c => {
                    p += 1;
                    t += c.len_utf8();
                    continue;
                }
                _ => {}
            }
            // Mismatch: let the last `%` take one more character.
            let Some((star_p, star_t)) = star else {
                return false;
            };
            let skipped = text[star_t..].chars().next().map_or(1, char::len_utf8);
            star = Some((star_p, star_t + skipped));
            p = star_p + 1;
            t = star_t + skipped;
        }
        parts[p.min(parts.len())..]
            .iter()
            .all(|part| *part == Part::Any)
    }
}
