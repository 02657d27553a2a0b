//! The architecture, checked: this test reads the source tree and fails on
//! what `docs/architecture.md` forbids, with a message that says why.
//!
//! - Imports inside `broker/src` point down the layer order (below). Two
//!   modules on the same layer never import each other (`quorum` and
//!   `meta`, `net` and `queue`). A lower layer that needs a higher one gets
//!   a small trait or a callback handed in by `node` (the assembly).
//! - No source file over 600 lines in broker, brokerd, fabric, store-redb.
//! - Every module file opens with a `//!` header saying what it owns.
//! - `store-redb` and `fabric` know nothing of the broker: they do not
//!   depend on it.

use crate::common;

use common::{rust_files, workspace_root as root};

/// The layers of `broker/src`, bottom to top. A module may import only
/// from modules on a lower layer (and from itself).
const LAYERS: &[(&str, u32, &str)] = &[
    (
        "codec",
        0,
        "the AMQP wire format: bytes in, values out, no IO",
    ),
    ("config", 1, "every limit and switch, plain data"),
    ("lock_order", 1, "the lock order, checked in debug builds"),
    (
        "process",
        1,
        "what the process costs the machine, from /proc",
    ),
    (
        "crash_point",
        1,
        "named crash points, armed by crash tests only",
    ),
    (
        "latency",
        1,
        "a latency histogram of relaxed atomics, knows nothing it times",
    ),
    (
        "net",
        2,
        "node-to-node transport primitives and the one NodeId",
    ),
    (
        "queue",
        2,
        "the Queue trait, messages, dispatch, transient queues",
    ),
    (
        "paging",
        2,
        "message bodies in segment files, knows no queue",
    ),
    (
        "auth",
        2,
        "credentials, SCRAM, permissions, the login throttle; knows no frame",
    ),
    (
        "tls",
        2,
        "TLS on the AMQP port: certificates, reload, the first bytes",
    ),
    (
        "ws",
        2,
        "AMQP over WebSocket: the HTTP upgrade, binary messages as bytes",
    ),
    (
        "engine",
        3,
        "AMQP connections, sessions and links over the Queue trait",
    ),
    (
        "raft",
        4,
        "plumbing every Raft group shares: network, store, hand-off steps",
    ),
    ("quorum", 5, "quorum queues, one Raft group each"),
    ("meta", 5, "the cluster-metadata Raft group"),
    (
        "forward",
        6,
        "client traffic between nodes, over quorum and queue",
    ),
    ("admin", 7, "the operator's requests and their answers"),
    (
        "http",
        8,
        "health, readiness, Prometheus metrics and the management API over admin",
    ),
    (
        "node",
        9,
        "the assembly: Broker, registry, fabric adapter, Cluster",
    ),
    (
        "fuzz_checks",
        10,
        "the checks of the fuzz targets and the corpus replay, over every decoder",
    ),
];

/// Most lines in one source file.
const FILE_LINES_MAX: usize = 600;

fn layer_of(module: &str) -> Option<u32> {
    LAYERS
        .iter()
        .find(|(name, _, _)| *name == module)
        .map(|(_, layer, _)| *layer)
}

/// The `crate::<module>` names a line of code refers to (comments and doc
/// comments skipped).
fn crate_refs(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut refs = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // e.g. `$crate::` or `other_crate::`
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            refs.push(name);
        }
    }
    // `use crate::{a, b}` form.
    if let Some(at) = code.find("crate::{") {
        let inner = &code[at + "crate::{".len()..];
        for part in inner.split(['{', '}', ',']) {
            let name: String = part
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                refs.push(name);
            }
        }
    }
    refs
}

#[test]
fn imports_point_down_the_layers() {
    let src = root().join("broker/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap_or(file);
        let first = relative
            .components()
            .next()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_owned()
            })
            .unwrap_or_default();
        if first == "lib" {
            continue;
        }
        let Some(own) = layer_of(&first) else {
            problems.push(format!(
                "{}: module `{first}` is not in the layer table of tests/architecture.rs; \
                 add it there and to docs/architecture.md",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (number, line) in text.lines().enumerate() {
            for target in crate_refs(line) {
                if target == first || target == "self" || target == "super" {
                    continue;
                }
                // Items at the crate root re-exported from `node`/`config`
                // (`crate::Broker`, `crate::BrokerConfig`) are not modules.
                let Some(theirs) = layer_of(&target) else {
                    continue;
                };
                if theirs >= own {
                    problems.push(format!(
                        "{}:{}: `{first}` (layer {own}) imports `crate::{target}` (layer {theirs}): \
                         imports must point down; invert it with a trait or callback wired in `node`",
                        relative.display(),
                        number + 1
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_layer_module_exists() {
    let src = root().join("broker/src");
    for (name, _, why) in LAYERS {
        let dir = src.join(name);
        let file = src.join(format!("{name}.rs"));
        assert!(
            dir.is_dir() || file.is_file(),
            "layer table names `{name}` ({why}) but broker/src has no such module"
        );
    }
}

#[test]
fn source_files_stay_small_and_say_what_they_own() {
    let mut problems = Vec::new();
    for krate in ["broker", "brokerd", "fabric", "store-redb"] {
        let mut files = Vec::new();
        rust_files(&root().join(krate), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let lines = text.lines().count();
            let name = file
                .strip_prefix(root())
                .unwrap_or(&file)
                .display()
                .to_string();
            if lines > FILE_LINES_MAX {
                problems.push(format!(
                    "{name}: {lines} lines (at most {FILE_LINES_MAX}); split it by concept"
                ));
            }
            let in_src = file.components().any(|c| c.as_os_str() == "src");
            if in_src && !text.starts_with("//!") {
                problems.push(format!(
                    "{name}: no `//!` header saying what the module owns and must not know"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn generic_crates_know_nothing_of_the_broker() {
    for krate in ["fabric", "store-redb"] {
        let manifest =
            std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap_or_default();
        assert!(
            !manifest.contains("ramqpd-broker"),
            "{krate} depends on the broker: it must stay generic (bytes and openraft types only)"
        );
        let mut files = Vec::new();
        rust_files(&root().join(krate).join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for word in ["QueueAddress", "quorum::", "MessageIndex"] {
                assert!(
                    !text.contains(word),
                    "{}: mentions `{word}`; {krate} must not know what a queue is",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_checker_sees_an_upward_import() {
    // The parser itself: a `use crate::node::...` line is found, a comment
    // is not, and the braced form is split.
    assert_eq!(crate_refs("use crate::node::Registry;"), vec!["node"]);
    assert!(crate_refs("// see crate::node").is_empty());
    let braced = crate_refs("use crate::{meta, quorum::X};");
    assert!(braced.contains(&"meta".to_owned()) && braced.contains(&"quorum".to_owned()));
    assert!(crate_refs("$crate::node").is_empty());
}
