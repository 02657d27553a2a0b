//! The Raft log file of a real 0.1.0 node (layout 1, from the release's
//! data-directory fixture, `tests/fixtures/data-dir-0.1.0.tar.gz` at the
//! repository root) opens with this build: converted to the current layout at open,
//! every record still verifies, and each group's committed log id moved
//! byte for byte from `raft_meta` to `raft_entries`. The broker-level read
//! of the same data directory is `tests/interop/test_release_data.py`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use ramqpd_store_redb::{LogStore, LogStoreOptions, MetaKind};
use redb::{Database, ReadableDatabase, ReadableTableMetadata, TableDefinition};

const ENTRIES: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("raft_entries");
const META: TableDefinition<(u64, u8), &[u8]> = TableDefinition::new("raft_meta");
const FORMAT: TableDefinition<&str, u64> = TableDefinition::new("store_format");

/// What the file holds: layout version, committed records by group (from
/// whichever table the layout keeps them in), rows of the entries table
/// that are entries, rows of `raft_meta`.
struct Census {
    version: u64,
    committed: BTreeMap<u64, Vec<u8>>,
    n_entries: u64,
    n_meta: u64,
}

fn census(path: &Path) -> Census {
    let db = Database::create(path).unwrap();
    let txn = db.begin_read().unwrap();
    let version = txn
        .open_table(FORMAT)
        .unwrap()
        .get("version")
        .unwrap()
        .unwrap()
        .value();
    let meta = txn.open_table(META).unwrap();
    let entries = txn.open_table(ENTRIES).unwrap();
    let mut committed = BTreeMap::new();
    for row in meta.range::<(u64, u8)>(..).unwrap() {
        let (key, value) = row.unwrap();
        let (group, kind) = key.value();
        if kind == MetaKind::Committed as u8 {
            committed.insert(group, value.value().to_vec());
        }
    }
    let mut n_entries = 0;
    for row in entries.range::<(u64, u64)>(..).unwrap() {
        let (key, value) = row.unwrap();
        let (group, index) = key.value();
        if index == u64::MAX {
            assert!(
                committed.insert(group, value.value().to_vec()).is_none(),
                "group {group}'s committed id is in both tables"
            );
        } else {
            n_entries += 1;
        }
    }
    Census {
        version,
        committed,
        n_entries,
        n_meta: meta.len().unwrap(),
    }
}

#[test]
fn the_0_1_0_log_file_is_converted_and_verifies() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/data-dir-0.1.0.tar.gz")
        .canonicalize()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&fixture)
        .arg("-C")
        .arg(dir.path())
        .arg("data-dir-0.1.0/data/quorum/raft-log.redb")
        .status()
        .unwrap();
    assert!(status.success(), "tar failed: {status}");
    let path = dir.path().join("data-dir-0.1.0/data/quorum/raft-log.redb");

    let before = census(&path);
    assert_eq!(before.version, 1);
    assert!(
        !before.committed.is_empty(),
        "the fixture has committed ids"
    );

    let groups = {
        let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
        let report = store.verify().unwrap();
        assert_eq!(report.n_entries, before.n_entries);
        assert_eq!(report.n_meta, before.n_meta);
        store.groups().unwrap()
    };
    assert!(!groups.is_empty());

    let after = census(&path);
    // Layout 1 is converted straight to the current layout, 3.
    assert_eq!(after.version, 3);
    assert_eq!(after.committed, before.committed);
    assert_eq!(after.n_entries, before.n_entries);
    assert_eq!(
        after.n_meta,
        before.n_meta - before.committed.len() as u64,
        "the committed rows left raft_meta"
    );
    // A second open finds layout 3 and changes nothing.
    drop(LogStore::open(&path, LogStoreOptions::default()).unwrap());
    let again = census(&path);
    assert_eq!((again.version, again.committed), (3, after.committed));
}
