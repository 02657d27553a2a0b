//! How each [`WriteOp`] lands in the tables of one write transaction:
//! the rows an append, a vote, a truncate, a purge or a group removal
//! writes or deletes, and the fold of a journal generation's appends.
//! The writer (`writer.rs`) decides when a transaction begins and commits;
//! this module only fills it.

use std::collections::HashMap;

use redb::{Durability, Table, WriteTransaction};

use crate::error::Error;
use crate::journal_record::JournalAppend;
use crate::purge_backlog::PurgeBacklog;
use crate::stats::CommitTally;
use crate::tables::{MetaKind, COMMITTED_INDEX, ENTRIES, FORMAT, JOURNAL_FOLDED_KEY, META};
use crate::writer::WriteOp;

impl From<JournalAppend> for WriteOp {
    fn from(append: JournalAppend) -> WriteOp {
        WriteOp::Append {
            group_id: append.group_id,
            records: append.records,
            committed: append.committed,
        }
    }
}

/// Writes the appends of a journal generation (`ops`, all appends) and the
/// generation they close in one durable transaction: the fold thread's
/// work (`fold.rs`), and the replay at open, before the writer starts and
/// before any group is loaded from the tables. Returns what it wrote.
///
/// A group's committed log id rides with most of its appends, and each
/// is a row that overwrites the one before: only a group's last one in
/// the generation is written. Nothing in between is ever seen (one
/// transaction), and the table ends as if every one had been; one row
/// less per append (a quorum publish with one in flight folded 3.2 rows,
/// at about 6.7k instructions each).
pub(crate) fn fold_generation(
    db: &redb::Database,
    ops: &[WriteOp],
    generation: u64,
    quick_repair: bool,
) -> Result<CommitTally, Error> {
    let last_committed = last_committed_of_each_group(ops);
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    txn.set_quick_repair(quick_repair);
    let mut tally = CommitTally::default();
    {
        let mut tables = Tables {
            txn: &txn,
            entries: None,
            meta: None,
        };
        // Appends alone never add to the purge backlog.
        let mut backlog = PurgeBacklog::default();
        for (i, op) in ops.iter().enumerate() {
            match op {
                WriteOp::Append {
                    group_id,
                    records,
                    committed,
                } => {
                    let committed = committed
                        .as_deref()
                        .filter(|_| last_committed.get(group_id) == Some(&i));
                    append(&mut tables, *group_id, records, committed, &mut tally)?;
                }
                other => apply(&mut tables, other, &mut tally, &mut backlog)?,
            }
        }
        txn.open_table(FORMAT)?
            .insert(JOURNAL_FOLDED_KEY, generation)?;
    }
    txn.commit()?;
    Ok(tally)
}

/// For each group, the position in `ops` of its last append that carries
/// a committed log id.
fn last_committed_of_each_group(ops: &[WriteOp]) -> HashMap<u64, usize> {
    let mut last = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let WriteOp::Append {
            group_id,
            committed: Some(_),
            ..
        } = op
        {
            last.insert(*group_id, i);
        }
    }
    last
}

/// The rows of one append: the group's committed log id record (if it is
/// to be written) and its entries.
fn append(
    tables: &mut Tables<'_>,
    group_id: u64,
    records: &[(u64, Vec<u8>)],
    committed: Option<&[u8]>,
    tally: &mut CommitTally,
) -> Result<(), Error> {
    // In the entries table, right after the group's entries: the leaf
    // this append dirties anyway (`tables.rs`).
    if let Some(record) = committed {
        tables
            .entries()?
            .insert((group_id, COMMITTED_INDEX), record)?;
        tally.records += 1;
        tally.bytes += record.len() as u64;
    }
    for (index, record) in records {
        tables
            .entries()?
            .insert((group_id, *index), record.as_slice())?;
        tally.bytes += record.len() as u64;
    }
    tally.entries += records.len() as u64;
    tally.records += records.len() as u64;
    Ok(())
}

pub(crate) type EntriesTable<'t> = Table<'t, (u64, u64), &'static [u8]>;
pub(crate) type MetaTable<'t> = Table<'t, (u64, u8), &'static [u8]>;

/// The tables of one write transaction, each opened on first use: a batch
/// of appends does not open `raft_meta` (opening a table costs a lookup and
/// decode of its definition).
pub(crate) struct Tables<'t> {
    pub(crate) txn: &'t WriteTransaction,
    pub(crate) entries: Option<EntriesTable<'t>>,
    pub(crate) meta: Option<MetaTable<'t>>,
}

impl<'t> Tables<'t> {
    pub(crate) fn entries(&mut self) -> Result<&mut EntriesTable<'t>, Error> {
        match &mut self.entries {
            Some(table) => Ok(table),
            slot => Ok(slot.insert(self.txn.open_table(ENTRIES)?)),
        }
    }

    pub(crate) fn meta(&mut self) -> Result<&mut MetaTable<'t>, Error> {
        match &mut self.meta {
            Some(table) => Ok(table),
            slot => Ok(slot.insert(self.txn.open_table(META)?)),
        }
    }
}

pub(crate) fn apply(
    tables: &mut Tables<'_>,
    op: &WriteOp,
    tally: &mut CommitTally,
    backlog: &mut PurgeBacklog,
) -> Result<(), Error> {
    match op {
        WriteOp::Append {
            group_id,
            records,
            committed,
        } => append(tables, *group_id, records, committed.as_deref(), tally)?,
        WriteOp::PutMeta {
            group_id,
            kind,
            record,
        } => {
            tables
                .meta()?
                .insert(kind.key(*group_id), record.as_slice())?;
            tally.records += 1;
            tally.bytes += record.len() as u64;
        }
        WriteOp::Truncate { group_id, since } => {
            let mut n_deleted = 0u64;
            tables.entries()?.retain_in(
                (*group_id, *since)..(*group_id, COMMITTED_INDEX),
                |_, _| {
                    n_deleted += 1;
                    false
                },
            )?;
            tally.records += n_deleted;
        }
        WriteOp::Purge {
            group_id,
            through,
            record,
        } => {
            // The rows go a step per commit (`purge_backlog.rs`); this
            // commit makes the purge durable.
            backlog.add(*group_id, *through);
            tables
                .meta()?
                .insert(MetaKind::LastPurged.key(*group_id), record.as_slice())?;
            tally.records += 1;
            tally.bytes += record.len() as u64;
        }
        WriteOp::Tick => {}
        WriteOp::RemoveGroup { group_id } => {
            backlog.forget(*group_id);
            let mut n_deleted = 0u64;
            tables.entries()?.retain_in(
                (*group_id, 0)..=(*group_id, COMMITTED_INDEX),
                |_, _| {
                    n_deleted += 1;
                    false
                },
            )?;
            for kind in MetaKind::ALL {
                if tables.meta()?.remove(kind.key(*group_id))?.is_some() {
                    n_deleted += 1;
                }
            }
            tally.records += n_deleted;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;

    use super::*;

    fn append(group_id: u64, index: u64, committed: Option<&str>) -> WriteOp {
        WriteOp::Append {
            group_id,
            records: vec![(index, format!("entry {group_id}/{index}").into_bytes())],
            committed: committed.map(|c| c.as_bytes().to_vec()),
        }
    }

    #[test]
    fn a_fold_writes_each_groups_last_committed_record_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("fold.redb")).unwrap();
        let ops = [
            append(7, 1, Some("7 committed 0")),
            append(8, 1, Some("8 committed 0")),
            append(7, 2, Some("7 committed 1")),
            append(7, 3, None),
        ];
        let tally = fold_generation(&db, &ops, 5, false).unwrap();
        // Four entries and one committed row per group, not three.
        assert_eq!((tally.entries, tally.records), (4, 6));

        let txn = db.begin_read().unwrap();
        let entries = txn.open_table(ENTRIES).unwrap();
        let row = |key| entries.get(key).unwrap().map(|v| v.value().to_vec());
        assert_eq!(row((7, COMMITTED_INDEX)), Some(b"7 committed 1".to_vec()));
        assert_eq!(row((8, COMMITTED_INDEX)), Some(b"8 committed 0".to_vec()));
        for (group, index) in [(7, 1), (7, 2), (7, 3), (8, 1)] {
            let want = format!("entry {group}/{index}").into_bytes();
            assert_eq!(row((group, index)), Some(want));
        }
        let format = txn.open_table(FORMAT).unwrap();
        let folded = format.get(JOURNAL_FOLDED_KEY).unwrap().map(|v| v.value());
        assert_eq!(folded, Some(5));
    }
}
