//! Replays every checked-in fuzz input of the targets whose checks live in
//! this crate (`fuzz/corpus/<target>/` and `fuzz/seeds/<target>/`) through
//! `ramqpd_broker::fuzz_checks`, the very code the cargo-fuzz targets run, on the
//! stable toolchain. A decoder change that makes a once-fine input panic or
//! fail its round-trip check fails this test, naming the file. The seeds
//! the real writers make (`fuzz_checks::seeds`) are replayed too; with
//! `RAMQP_WRITE_FUZZ_SEEDS=1` they are also written to `fuzz/seeds/`.

use crate::common;

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use common::workspace_root;
use ramqpd_broker::fuzz_checks::{seeds, TARGETS};

/// Targets in `fuzz/Cargo.toml` whose check lives in another crate.
const ELSEWHERE: &[&str] = &["fabric_batch"];

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = workspace_root().join("fuzz");
    let mut files = Vec::new();
    for dir in ["corpus", "seeds"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
            continue;
        };
        files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_file()));
    }
    files.sort();
    files
}

/// Run `check` on `data`; the panic message if it fails.
fn run(check: fn(&[u8]), data: &[u8]) -> Option<String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| check(data)));
    let payload = outcome.err()?;
    let text = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()));
    Some(text.unwrap_or_else(|| "panic".to_owned()))
}

fn write_seeds(generated: &[(&str, Vec<u8>)]) {
    let root = workspace_root().join("fuzz").join("seeds");
    let mut per_target = std::collections::BTreeMap::<&str, usize>::new();
    for (target, bytes) in generated {
        let n = per_target.entry(target).or_default();
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("writer-{n:02}")), bytes).unwrap();
        *n += 1;
    }
}

#[test]
fn every_corpus_file_and_seed_passes_its_target_check() {
    let generated = seeds();
    if std::env::var_os("RAMQP_WRITE_FUZZ_SEEDS").is_some() {
        write_seeds(&generated);
    }
    let mut failures = Vec::new();
    let mut n_replayed = 0usize;
    for (target, check) in TARGETS {
        for file in inputs(target) {
            let data = std::fs::read(&file).unwrap();
            n_replayed += 1;
            if let Some(why) = run(*check, &data) {
                failures.push(format!("{}: {why}", file.display()));
            }
        }
    }
    for (n, (target, data)) in generated.iter().enumerate() {
        let check = TARGETS
            .iter()
            .find(|(name, _)| name == target)
            .map(|(_, check)| *check)
            .unwrap_or_else(|| panic!("seed for unknown target {target}"));
        if let Some(why) = run(check, data) {
            failures.push(format!("generated seed {n} of {target}: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n_replayed} fuzz inputs fail their check:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every target with a check in this crate has seeds from the writers
    // or corpus files, else the replay proves nothing for it.
    for (target, _) in TARGETS {
        let has_input = !inputs(target).is_empty() || generated.iter().any(|(t, _)| t == target);
        assert!(has_input, "no corpus, seed or generated seed for {target}");
    }
}

#[test]
fn the_check_table_names_every_fuzz_target() {
    let dir = workspace_root().join("fuzz").join("fuzz_targets");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let stem = Path::new(&path).file_stem()?.to_str()?.to_owned();
            Some(stem)
        })
        .collect();
    let known: BTreeSet<String> = TARGETS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .chain(ELSEWHERE.iter().map(|name| (*name).to_owned()))
        .collect();
    assert_eq!(
        on_disk, known,
        "fuzz/fuzz_targets and ramqpd_broker::fuzz_checks::TARGETS (plus targets checked \
         elsewhere) must name the same targets, so every corpus is replayed"
    );
}
