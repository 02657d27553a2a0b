//! Guards against new sleep-to-synchronise in the workspace's tests: a test
//! that sleeps "long enough" for something to happen is slow when it works
//! and flaky when the machine is busy. Await the condition instead
//! (`eventually` in `common/wait.rs`, or a notification), and for a check
//! that nothing happens use a named quiet window (`holds_for`,
//! `expect_nothing`).
//!
//! A ratchet, not a ban: the sleeps that exist today are counted per file in
//! `BASELINE` (polling loops bounded by a deadline, pacing, quiet windows
//! and fault durations). A file that gains a sleep fails here; one that
//! loses a sleep should lower its count (not enforced, so that parallel
//! branches removing sleeps do not trip over each other).
//!
//! Scans test code only (test directories and store-redb's crate-internal
//! `src/tests.rs`), by path relative to the workspace root.

use std::collections::BTreeMap;
use std::fs;

use crate::common;

use common::{rust_files, workspace_root};

/// Directories (recursive) and single files scanned, from the workspace root.
const SCANNED: &[&str] = &[
    "broker/tests",
    "brokerd/tests",
    "fabric/tests",
    "store-redb/tests",
    "store-redb/src/tests.rs",
];

/// This check's own sample code is not a test that sleeps.
const THIS_FILE: &str = "broker/tests/tidy_sleeps.rs";

/// Sleeps allowed per file, and why they are not synchronisation.
const BASELINE: &[(&str, usize)] = &[
    // `eventually` and `holds_for`: polling between checks, bounded.
    ("broker/tests/common/wait.rs", 2),
    // `keep_publishing`: pacing of a background load.
    ("broker/tests/common/quorum.rs", 1),
    // `publish_until`: a pause before publishing again after a released
    // or timed-out publish (no quorum during a two-node power cut), and
    // before opening a failed connection again, so the load does not
    // spin.
    ("broker/tests/quorum_lost_writes.rs", 2),
    // Durations of injected faults (a link cut for 2 s) and a leader lease
    // let run out; not audited in detail.
    ("broker/tests/forwarding_restarts.rs", 4),
    // A negative check: no idle close within 3 s of silence.
    ("broker/tests/amqp_idle_timeout.rs", 1),
    // Polling loops bounded by a deadline, written out in place.
    ("broker/tests/meta_cluster.rs", 3),
    ("broker/tests/quorum_queues.rs", 3),
    ("broker/tests/quorum_placement.rs", 1),
    ("fabric/tests/mesh.rs", 1),
    // The SLOW handler's work, and `eventually`'s polling.
    ("fabric/tests/common/mod.rs", 2),
    // Pacing between fail-fast samples across the redial backoff.
    ("fabric/tests/faults.rs", 1),
    // `wait_until` and `holds_for`: polling between checks, bounded.
    ("store-redb/src/tests.rs", 2),
    // The reopen after openraft's groups shut down: a bounded retry while
    // their last tasks still hold the file (nothing to await on).
    ("store-redb/tests/store_raft.rs", 1),
    // A pause between reconnect attempts while a closed connection's task
    // frees its per-address slot, which nothing outside the broker can
    // observe; bounded by a 5 s deadline.
    ("broker/tests/amqp_preauth_limits.rs", 1),
    // Pacing of the publisher, so the alarm comes while it has credit.
    ("broker/tests/transient_memory_alarm.rs", 1),
    // `get_until`: polling an HTTP answer (readiness, a scrape) between
    // requests, bounded by a deadline; HTTP has no change to await.
    ("broker/tests/http_endpoint.rs", 1),
    // `connections_until`: polling the API's connection list until a
    // closed connection's task has ended, bounded by a deadline.
    ("broker/tests/http_api.rs", 1),
];

/// `sleep(` calls outside comments.
fn count_sleeps(text: &str) -> usize {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .map(|code| code.matches("sleep(").count())
        .sum()
}

#[test]
fn no_new_sleeps_in_tests() {
    let root = workspace_root();
    let mut files = Vec::new();
    for scanned in SCANNED {
        rust_files(&root.join(scanned), &mut files);
    }
    assert!(
        files.len() > 10,
        "scanned only {} files under {}: paths moved?",
        files.len(),
        root.display()
    );
    let baseline: BTreeMap<&str, usize> = BASELINE.iter().copied().collect();
    let mut over = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap_or(file);
        let name = relative.to_string_lossy().replace('\\', "/");
        if name == THIS_FILE {
            continue;
        }
        let text = fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let n_sleeps = count_sleeps(&text);
        let allowed = baseline.get(name.as_str()).copied().unwrap_or(0);
        if n_sleeps > allowed {
            over.push(format!("{name}: {n_sleeps} sleeps, {allowed} allowed"));
        }
    }
    assert!(
        over.is_empty(),
        "new sleep in test code (await the condition instead: eventually / \
         holds_for in broker/tests/common/wait.rs; if it really is not \
         synchronisation, raise BASELINE in broker/tests/tidy_sleeps.rs and \
         say why):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_counter_sees_sleeps_and_skips_comments() {
    let code = "tokio::time::sleep(d).await;\n\
                std::thread::sleep(d); // a sleep(\n\
                // tokio::time::sleep(d)\n";
    assert_eq!(count_sleeps(code), 2);
}
