//! The Prometheus text format for the large families of a scrape: one
//! sample per queue or per Raft group, each with one label, many thousands
//! of lines with 10,000 queues. Written straight into the answer's buffer
//! with each series' `{label="value"}` escaped once and reused by every
//! family, instead of going through `prometheus-client`'s generic encoder
//! (which formats every label and value through `fmt` machinery and
//! buffers the whole text once more): that encoder took most of an 8 ms
//! scrape of 10,000 queues.
//!
//! Only the format lives here; what the figures mean is `metrics.rs`'s.

/// What a family is, for its `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A count since the process started; its samples get `_total`.
    Counter,
}

/// A series' label set, `{name="value"}`, escaped as the text format asks
/// (backslash, double quote and newline in the value).
pub(super) fn label_set(name: &str, value: &str) -> String {
    let mut out = String::with_capacity(name.len() + value.len() + 5);
    out.push('{');
    out.push_str(name);
    out.push_str("=\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push_str("\"}");
    out
}

/// Writes one family: its `# HELP` and `# TYPE` lines, then one sample per
/// `(label set, value)` row.
pub(super) fn family<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    kind: Kind,
    rows: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let (type_name, suffix) = match kind {
        Kind::Gauge => ("gauge", ""),
        Kind::Counter => ("counter", "_total"),
    };
    // The text format (unlike OpenMetrics) names a counter's family with
    // its `_total`, as `prometheus-client` does for the other families.
    out.push_str("# HELP ");
    out.push_str(name);
    out.push_str(suffix);
    out.push(' ');
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push_str(suffix);
    out.push(' ');
    out.push_str(type_name);
    out.push('\n');
    let mut digits = itoa::Buffer::new();
    for (labels, value) in rows {
        out.push_str(name);
        out.push_str(suffix);
        out.push_str(labels);
        out.push(' ');
        out.push_str(digits.format(value));
        out.push('\n');
    }
}

/// The same family as text, for tests comparing with another encoder.
#[cfg(test)]
fn family_string<'a>(
    name: &str,
    help: &str,
    kind: Kind,
    rows: impl IntoIterator<Item = (&'a str, u64)>,
) -> String {
    let mut out = String::new();
    family(&mut out, name, help, kind, rows);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_and_counter_lines() {
        let a = label_set("address", "/queues/a");
        let b = label_set("address", "/quorum/b");
        let text = family_string(
            "ramqp_x",
            "Help with a \\ and\na newline.",
            Kind::Counter,
            [(a.as_str(), 0), (b.as_str(), u64::MAX)],
        );
        assert_eq!(
            text,
            "# HELP ramqp_x_total Help with a \\\\ and\\na newline.\n# TYPE ramqp_x_total counter\n\
             ramqp_x_total{address=\"/queues/a\"} 0\n\
             ramqp_x_total{address=\"/quorum/b\"} 18446744073709551615\n"
        );
        let mut out = String::new();
        family(&mut out, "ramqp_g", "G.", Kind::Gauge, [(a.as_str(), 7)]);
        assert_eq!(
            out,
            "# HELP ramqp_g G.\n# TYPE ramqp_g gauge\nramqp_g{address=\"/queues/a\"} 7\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            label_set("group", "a\"b\\c\nd"),
            "{group=\"a\\\"b\\\\c\\nd\"}"
        );
    }
}
