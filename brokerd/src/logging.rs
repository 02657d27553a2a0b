//! Structured `tracing` logs on stderr, as text or JSON lines.
//!
//! stdout is reserved for the single "listening on" line that scripts and
//! tests wait for, so nothing here ever writes to it.

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;
use crate::settings::{ConfigError, LogConfig};

/// Build the filter; a bad directive is a configuration error (exit 2),
/// not something to silently replace with a default.
pub fn filter(level: &str) -> Result<EnvFilter, ConfigError> {
    EnvFilter::try_new(level).map_err(|e| ConfigError(format!("invalid log level {level:?}: {e}")))
}

/// Install the global subscriber. Call once, before the broker starts.
pub fn init(config: &LogConfig) -> Result<(), ConfigError> {
    let filter = filter(&config.level)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match config.format {
        // ANSI colours only when a person is likely watching.
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    installed.map_err(|e| ConfigError(format!("cannot install the log subscriber: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_directives_are_accepted() {
        for level in ["info", "debug", "warn,broker=trace", "off"] {
            assert!(filter(level).is_ok(), "{level}");
        }
    }

    #[test]
    fn garbage_level_is_rejected() {
        let error = filter("info,broker=loud").unwrap_err().to_string();
        assert!(error.contains("invalid log level"), "{error}");
    }
}
