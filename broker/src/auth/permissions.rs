//! What a user may do, as RabbitMQ's permissions: three regular
//! expressions matched against a link's address: `configure` (create the
//! queue), `write` (publish to it), `read` (consume from it).
//!
//! As in RabbitMQ a pattern matches anywhere in the address unless it is
//! anchored (`^/queues/orders$`), and the empty pattern matches nothing.
//! Knows nothing of links or frames: an access kind and an address in, a
//! yes or no out.

use regex::Regex;

/// Longest pattern accepted: a users file must not make the broker build
/// a huge automaton.
const PATTERN_MAX_BYTES: usize = 4096;
/// The compiled size limit of one pattern (the regex crate's own guard
/// against patterns that explode when compiled).
const COMPILED_MAX_BYTES: usize = 1 << 20;

/// The three kinds of access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Creating the queue at the address.
    Configure,
    /// Publishing to it.
    Write,
    /// Consuming from it.
    Read,
}

impl Access {
    /// Its name in a users file and in errors.
    pub fn name(self) -> &'static str {
        match self {
            Access::Configure => "configure",
            Access::Write => "write",
            Access::Read => "read",
        }
    }
}

/// One compiled pattern; the empty pattern matches nothing.
#[derive(Debug, Clone)]
struct Pattern(Option<Regex>);

impl Pattern {
    fn new(text: &str) -> Result<Pattern, String> {
        if text.is_empty() {
            return Ok(Pattern(None));
        }
        if text.len() > PATTERN_MAX_BYTES {
            return Err(format!("longer than {PATTERN_MAX_BYTES} bytes"));
        }
        regex::RegexBuilder::new(text)
            .size_limit(COMPILED_MAX_BYTES)
            .build()
            .map(|re| Pattern(Some(re)))
            .map_err(|e| e.to_string())
    }

    fn matches(&self, address: &str) -> bool {
        self.0.as_ref().is_some_and(|re| re.is_match(address))
    }
}

/// A user's permissions, compiled.
#[derive(Debug, Clone)]
pub struct Permissions {
    configure: Pattern,
    write: Pattern,
    read: Pattern,
}

impl Permissions {
    /// Compile the three patterns; the error names the one that failed.
    pub fn new(configure: &str, write: &str, read: &str) -> Result<Permissions, String> {
        let compile = |access: Access, text: &str| {
            Pattern::new(text).map_err(|e| format!("{} pattern {text:?}: {e}", access.name()))
        };
        Ok(Permissions {
            configure: compile(Access::Configure, configure)?,
            write: compile(Access::Write, write)?,
            read: compile(Access::Read, read)?,
        })
    }

    /// Everything everywhere (`.*` three times).
    pub fn all() -> Permissions {
        match Permissions::new(".*", ".*", ".*") {
            Ok(all) => all,
            Err(_) => unreachable!(".* compiles"),
        }
    }

    /// Nothing anywhere.
    pub fn none() -> Permissions {
        Permissions {
            configure: Pattern(None),
            write: Pattern(None),
            read: Pattern(None),
        }
    }

    /// Whether `access` to `address` is allowed.
    pub fn allows(&self, access: Access, address: &str) -> bool {
        match access {
            Access::Configure => self.configure.matches(address),
            Access::Write => self.write.matches(address),
            Access::Read => self.read.matches(address),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_rabbitmq() {
        let p = Permissions::new("^/queues/app-", "^/queues/(app-|shared$)", "").unwrap();
        assert!(p.allows(Access::Configure, "/queues/app-1"));
        assert!(!p.allows(Access::Configure, "/queues/other"));
        assert!(p.allows(Access::Write, "/queues/shared"));
        assert!(!p.allows(Access::Write, "/queues/shared2"));
        // Empty matches nothing, not everything.
        assert!(!p.allows(Access::Read, "/queues/app-1"));
        // Unanchored patterns match anywhere.
        let loose = Permissions::new("", "orders", "").unwrap();
        assert!(loose.allows(Access::Write, "/quorum/orders-eu"));
        assert!(Permissions::all().allows(Access::Read, "/queues/x"));
        assert!(!Permissions::none().allows(Access::Read, "/queues/x"));
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let error = Permissions::new(".*", "(", ".*").unwrap_err();
        assert!(error.starts_with("write pattern \"(\""), "{error}");
        assert!(Permissions::new(&"a".repeat(PATTERN_MAX_BYTES + 1), "", "").is_err());
    }
}
