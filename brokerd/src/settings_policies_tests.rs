//! Tests of `settings.rs` for `[[policies]]`: the issue's example, the
//! order kept, and the refusals (unknown key, unknown overflow, bad
//! pattern, bad dead-letter address), each naming what is wrong.

use super::*;
use broker::config::{Overflow, PolicyConfig};

#[test]
fn policies_are_read_in_file_order() {
    let file = r#"
[[policies]]
pattern = "/quorum/orders-*"     # a glob on the address
max_length = 100000              # messages; also max_length_bytes
overflow = "reject-publish"      # or "drop-head"
message_ttl_ms = 60000
delivery_limit = 20
dead_letter_address = "/quorum/orders-dlq"
single_active_consumer = true

[[policies]]
pattern = "/queues/*"
max_length_bytes = 1048576
overflow = "drop-head"
"#;
    let policies = parse_file(file).unwrap().broker.policies;
    assert_eq!(
        policies,
        vec![
            PolicyConfig {
                pattern: "/quorum/orders-*".into(),
                max_length: Some(100_000),
                max_length_bytes: None,
                overflow: Overflow::RejectPublish,
                message_ttl_ms: Some(60_000),
                delivery_limit: Some(20),
                dead_letter_address: Some("/quorum/orders-dlq".into()),
                single_active_consumer: true,
            },
            PolicyConfig {
                pattern: "/queues/*".into(),
                max_length_bytes: Some(1_048_576),
                overflow: Overflow::DropHead,
                ..PolicyConfig::default()
            },
        ]
    );
    assert!(parse_file("").unwrap().broker.policies.is_empty());
}

#[test]
fn bad_policies_are_refused_with_what_is_wrong() {
    let error = |text: &str| parse_file(text).unwrap_err().to_string();
    let unknown = error("[[policies]]\npattern = \"/queues/*\"\nmax_len = 3\n");
    assert!(unknown.contains("unknown field `max_len`"), "{unknown}");
    assert!(unknown.contains("line 3"), "{unknown}");
    let overflow = error("[[policies]]\npattern = \"/queues/*\"\noverflow = \"drop-tail\"\n");
    assert!(overflow.contains("drop-tail"), "{overflow}");
    assert!(overflow.contains("reject-publish"), "{overflow}");
    let missing = error("[[policies]]\nmax_length = 3\n");
    assert!(missing.contains("pattern"), "{missing}");
    let pattern = error("[[policies]]\npattern = \"orders-*\"\n");
    assert!(pattern.contains("orders-*"), "{pattern}");
    assert!(pattern.contains("must start with '/'"), "{pattern}");
    let dla =
        error("[[policies]]\npattern = \"/queues/*\"\ndead_letter_address = \"orders-dlq\"\n");
    assert!(dla.contains("dead_letter_address"), "{dla}");
    assert!(dla.contains("orders-dlq"), "{dla}");
    let negative = error("[[policies]]\npattern = \"/queues/*\"\nmax_length = -1\n");
    assert!(negative.contains("max_length"), "{negative}");
}
