//! Records whose bytes changed on disk are reported, never served: the test
//! writes through the store, flips bytes of stored values through redb
//! directly (as a failing disk or a stray write would), and checks that
//! reads, group loading and `LogStore::verify` report the CRC32C mismatch
//! while the intact records stay readable.

use std::path::Path;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId, RaftLogReader, Vote};
use ramqpd_store_redb::{Error, LogStore, LogStoreOptions, MetaKind, RecordKey};
use redb::{Database, ReadableTable, TableDefinition};

openraft::declare_raft_types!(TypeConfig);

const ENTRIES: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("raft_entries");
const META: TableDefinition<(u64, u8), &[u8]> = TableDefinition::new("raft_meta");
const GROUP: u64 = 3;

async fn write_group(path: &Path) {
    let store = LogStore::open(path, LogStoreOptions::default()).unwrap();
    let mut group = store.group::<TypeConfig>(GROUP).unwrap();
    let entries = (0..10).map(|i| Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 0), i),
        payload: EntryPayload::Normal(format!("entry {i} of group {GROUP}")),
    });
    group.blocking_append(entries).await.unwrap();
    group.save_vote(&Vote::new(1, 0)).await.unwrap();
}

/// Rewrites one stored value through redb, bypassing the store.
fn tamper<K: redb::Key + 'static>(
    path: &Path,
    table: TableDefinition<K, &[u8]>,
    key: K::SelfType<'_>,
    change: impl FnOnce(&mut Vec<u8>),
) where
    for<'a> K::SelfType<'a>: Clone,
{
    let db = Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(table).unwrap();
        let mut value = t
            .get(key.clone())
            .unwrap()
            .expect("record present")
            .value()
            .to_vec();
        change(&mut value);
        t.insert(key, value.as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

fn flip_last_byte(v: &mut [u8]) {
    if let Some(b) = v.last_mut() {
        *b ^= 0x40;
    }
}

#[tokio::test]
async fn a_flipped_byte_in_an_entry_is_reported_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    write_group(&path).await;
    tamper(&path, ENTRIES, (GROUP, 4), |v| flip_last_byte(v));

    let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
    match store.verify() {
        Err(Error::ChecksumMismatch {
            key,
            stored,
            computed,
        }) => {
            assert_eq!(
                key,
                RecordKey::Entry {
                    group_id: GROUP,
                    index: 4
                }
            );
            assert_ne!(stored, computed);
        }
        other => panic!("verify must report the mismatch: {other:?}"),
    }

    let mut group = store.group::<TypeConfig>(GROUP).unwrap();
    let err = group.try_get_log_entries(0..10).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("checksum mismatch") && message.contains("index 4"),
        "{message}"
    );
    // The intact records around it are still served.
    assert_eq!(group.try_get_log_entries(0..4).await.unwrap().len(), 4);
    assert_eq!(group.try_get_log_entries(5..10).await.unwrap().len(), 5);
}

#[tokio::test]
async fn a_corrupted_vote_or_last_entry_fails_loading_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    write_group(&path).await;
    tamper(&path, META, (GROUP, MetaKind::Vote as u8), |v| {
        flip_last_byte(v)
    });
    {
        let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
        match store.group::<TypeConfig>(GROUP) {
            Err(Error::ChecksumMismatch { key, .. }) => assert_eq!(
                key,
                RecordKey::Meta {
                    group_id: GROUP,
                    kind: Ok(MetaKind::Vote)
                }
            ),
            Err(other) => panic!("wrong error: {other:?}"),
            Ok(_) => panic!("a corrupted vote must not load"),
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    write_group(&path).await;
    // Cut the last entry's record to two bytes: shorter than its header.
    tamper(&path, ENTRIES, (GROUP, 9), |v| v.truncate(2));
    let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
    assert!(matches!(
        store.group::<TypeConfig>(GROUP),
        Err(Error::RecordTruncated { n_bytes: 2, .. })
    ));
    assert!(matches!(store.verify(), Err(Error::RecordTruncated { .. })));
}

#[tokio::test]
async fn a_record_moved_to_another_key_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    write_group(&path).await;
    // Copy entry 2's intact bytes over entry 3: a misdirected write.
    let db = Database::open(&path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(ENTRIES).unwrap();
        let two = t.get((GROUP, 2)).unwrap().unwrap().value().to_vec();
        t.insert((GROUP, 3), two.as_slice()).unwrap();
    }
    txn.commit().unwrap();
    drop(db);
    let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
    let mut group = store.group::<TypeConfig>(GROUP).unwrap();
    let err = group.try_get_log_entries(3..4).await.unwrap_err();
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
}
