//! The file's layout version: created with a new file, checked at every
//! open, and older layouts converted (`store_format`'s `"version"`, see
//! [`crate::tables`]).
//!
//! | layout | what changed |
//! |---|---|
//! | 1 | first layout: entries, and the vote, committed and last-purged ids in `raft_meta` |
//! | 2 | the committed log id moved into `raft_entries`, at `COMMITTED_INDEX` after the group's entries |
//! | 3 | appends may wait in the journal beside the file (`journal.rs`); `store_format` keeps the last folded generation |
//!
//! Layout 1 and 2 files are converted in the open's first transaction
//! (whole or not at all; from 2 only the version changes); a file of a
//! layout this build does not know is refused with
//! [`Error::UnsupportedFormat`], as a build that reads only layout 2
//! refuses a layout 3 file (it would not replay the journal). Knows redb
//! tables, not Raft.

use redb::{Database, ReadableTable};

use crate::error::Error;
use crate::tables::{
    MetaKind, COMMITTED_INDEX, ENTRIES, FORMAT, FORMAT_KEY, FORMAT_VERSION,
    FORMAT_VERSION_CONVERTED, FORMAT_VERSION_WITHOUT_JOURNAL, JOURNAL_FOLDED_KEY, META,
};

/// Creates the tables and checks the format version; converts a layout 1
/// or 2 file (see [`convert_from_layout_1`]). Returns the last journal
/// generation folded into the tables.
pub(crate) fn init_tables(db: &Database) -> Result<u64, Error> {
    let txn = db.begin_write()?;
    let folded;
    {
        let mut format = txn.open_table(FORMAT)?;
        let found = format.get(FORMAT_KEY)?.map(|v| v.value());
        match found {
            None => {
                format.insert(FORMAT_KEY, FORMAT_VERSION)?;
            }
            Some(FORMAT_VERSION) => {}
            Some(FORMAT_VERSION_WITHOUT_JOURNAL) => {
                format.insert(FORMAT_KEY, FORMAT_VERSION)?;
                tracing::info!("store-redb: the log file is now layout 3 (with a journal)");
            }
            Some(FORMAT_VERSION_CONVERTED) => {
                let moved = convert_from_layout_1(&txn)?;
                format.insert(FORMAT_KEY, FORMAT_VERSION)?;
                tracing::info!(
                    committed_rows_moved = moved,
                    "store-redb: converted the log file from layout 1 to layout 3"
                );
            }
            Some(found) => {
                return Err(Error::UnsupportedFormat {
                    found,
                    supported: FORMAT_VERSION,
                })
            }
        }
        folded = format.get(JOURNAL_FOLDED_KEY)?.map_or(0, |v| v.value());
        txn.open_table(ENTRIES)?;
        txn.open_table(META)?;
    }
    txn.commit()?;
    Ok(folded)
}

/// Layout 1 kept each group's committed log id in `raft_meta`; layout 2
/// keeps it in `raft_entries` at [`COMMITTED_INDEX`]. Moves every such row,
/// byte for byte (its checksum covers the same record key, the group's
/// committed row, in both layouts), inside the caller's transaction, so the
/// file is converted whole or not at all. Returns how many rows moved.
fn convert_from_layout_1(txn: &redb::WriteTransaction) -> Result<u64, Error> {
    let mut meta = txn.open_table(META)?;
    let mut entries = txn.open_table(ENTRIES)?;
    let mut rows = Vec::new();
    for row in meta.range::<(u64, u8)>(..)? {
        let (key, value) = row?;
        let (group_id, kind) = key.value();
        if kind == MetaKind::Committed as u8 {
            rows.push((group_id, value.value().to_vec()));
        }
    }
    for (group_id, record) in &rows {
        entries.insert((*group_id, COMMITTED_INDEX), record.as_slice())?;
        meta.remove(MetaKind::Committed.key(*group_id))?;
    }
    Ok(rows.len() as u64)
}

#[cfg(test)]
mod tests {
    use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
    use openraft::vote::leader_id_adv::CommittedLeaderId;
    use openraft::vote::RaftLeaderId;
    use openraft::{Entry, EntryPayload, LogId, RaftLogReader, Vote};
    use redb::{ReadableDatabase, ReadableTableMetadata};

    use super::*;
    use crate::record;
    use crate::tables::RecordKey;
    use crate::tests::TestConfig;
    use crate::{GroupLogStore, LogStore, LogStoreOptions};

    fn log_id(index: u64) -> LogId<CommittedLeaderId<u64, u64>> {
        LogId::new(CommittedLeaderId::new(1, 0), index)
    }

    fn entry(index: u64) -> openraft::alias::EntryOf<TestConfig> {
        Entry {
            log_id: log_id(index),
            payload: EntryPayload::Normal(format!("i{index}")),
        }
    }

    fn meta_key(group_id: u64, kind: MetaKind) -> RecordKey {
        RecordKey::Meta {
            group_id,
            kind: Ok(kind),
        }
    }

    /// `(rows of raft_meta, rows of raft_entries, layout version)`.
    fn census(path: &std::path::Path) -> (u64, u64, u64) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_read().unwrap();
        let meta = txn.open_table(META).unwrap().len().unwrap();
        let entries = txn.open_table(ENTRIES).unwrap().len().unwrap();
        let version = txn
            .open_table(FORMAT)
            .unwrap()
            .get(FORMAT_KEY)
            .unwrap()
            .unwrap()
            .value();
        (meta, entries, version)
    }

    /// The committed log id rides in the entries table: no `raft_meta`
    /// row for it, it survives a truncate of the entries before it and a
    /// reopen, and `verify` counts it as metadata.
    #[tokio::test]
    async fn committed_is_stored_after_the_groups_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.redb");
        {
            let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
            let mut group: GroupLogStore<TestConfig> = store.group(7).unwrap();
            group.blocking_append((0..5).map(entry)).await.unwrap();
            group.save_committed(Some(log_id(2))).await.unwrap();
            group.blocking_append([entry(5)]).await.unwrap();
            group.truncate_after(Some(log_id(2))).await.unwrap();
            let report = store.verify().unwrap();
            assert_eq!((report.n_entries, report.n_meta), (3, 1));
        }
        assert_eq!(census(&path), (0, 4, FORMAT_VERSION));
        let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
        let mut group: GroupLogStore<TestConfig> = store.group(7).unwrap();
        assert_eq!(group.read_committed().await.unwrap(), Some(log_id(2)));
        let state = group.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(log_id(2)));
        let got = group.try_get_log_entries(0..10).await.unwrap();
        assert_eq!(got.len(), 3);
        drop(group);
        store.remove_group(7).await.unwrap();
        assert!(store.groups().unwrap().is_empty());
    }

    /// A file written in layout 1 (the committed log id in `raft_meta`)
    /// opens, is converted once, and reads back the same log, vote and
    /// committed log id.
    #[tokio::test]
    async fn a_layout_1_file_is_converted_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.redb");
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut format = txn.open_table(FORMAT).unwrap();
                format.insert(FORMAT_KEY, FORMAT_VERSION_CONVERTED).unwrap();
                let mut meta = txn.open_table(META).unwrap();
                let mut entries = txn.open_table(ENTRIES).unwrap();
                for group_id in [1u64, 2] {
                    let committed = Some(log_id(group_id));
                    let rec = record::encode(meta_key(group_id, MetaKind::Committed), &committed)
                        .unwrap();
                    meta.insert(MetaKind::Committed.key(group_id), rec.as_slice())
                        .unwrap();
                    let vote: openraft::alias::VoteOf<TestConfig> = Vote::new_committed(1, 0);
                    let rec = record::encode(meta_key(group_id, MetaKind::Vote), &vote).unwrap();
                    meta.insert(MetaKind::Vote.key(group_id), rec.as_slice())
                        .unwrap();
                    for index in 0..4 {
                        let key = RecordKey::Entry { group_id, index };
                        let rec = record::encode(key, &entry(index)).unwrap();
                        entries.insert((group_id, index), rec.as_slice()).unwrap();
                    }
                }
            }
            txn.commit().unwrap();
        }
        assert_eq!(census(&path), (4, 8, 1));
        {
            let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
            assert_eq!(store.groups().unwrap(), vec![1, 2]);
            for group_id in [1u64, 2] {
                let mut group: GroupLogStore<TestConfig> = store.group(group_id).unwrap();
                assert_eq!(
                    group.read_committed().await.unwrap(),
                    Some(log_id(group_id))
                );
                assert_eq!(
                    group.read_vote().await.unwrap(),
                    Some(Vote::new_committed(1, 0))
                );
                let state = group.get_log_state().await.unwrap();
                assert_eq!(state.last_log_id, Some(log_id(3)));
                assert_eq!(group.try_get_log_entries(0..10).await.unwrap().len(), 4);
            }
            let report = store.verify().unwrap();
            assert_eq!((report.n_entries, report.n_meta), (8, 4));
        }
        // The two votes stay in raft_meta; the committed rows moved.
        assert_eq!(census(&path), (2, 10, FORMAT_VERSION));
    }

    /// A layout this build does not know (a newer one) is refused, not
    /// misread.
    #[test]
    fn an_unknown_layout_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.redb");
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(FORMAT)
                .unwrap()
                .insert(FORMAT_KEY, FORMAT_VERSION + 1)
                .unwrap();
            txn.commit().unwrap();
        }
        match LogStore::open(&path, LogStoreOptions::default()) {
            Err(Error::UnsupportedFormat { found, supported }) => {
                assert_eq!((found, supported), (FORMAT_VERSION + 1, FORMAT_VERSION));
            }
            Err(other) => panic!("expected UnsupportedFormat, got {other}"),
            Ok(_) => panic!("a file of layout {} opened", FORMAT_VERSION + 1),
        }
    }
}
