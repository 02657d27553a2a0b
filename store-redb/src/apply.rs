//! How each [`WriteOp`] lands in the tables of one write transaction:
//! the rows an append, a vote, a truncate, a purge or a group removal
//! writes or deletes, and the fold of a journal generation's appends.
//! The writer (`writer.rs`) decides when a transaction begins and commits;
//! this module only fills it.

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
/// before any group is loaded from the tables.
pub(crate) fn fold_generation(
    db: &redb::Database,
    ops: &[WriteOp],
    generation: u64,
    quick_repair: bool,
) -> Result<(), Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    txn.set_quick_repair(quick_repair);
    {
        let mut tables = Tables {
            txn: &txn,
            entries: None,
            meta: None,
        };
        let mut tally = CommitTally::default();
        // Appends alone never add to the purge backlog.
        let mut backlog = PurgeBacklog::default();
        for op in ops {
            apply(&mut tables, op, &mut tally, &mut backlog)?;
        }
        txn.open_table(FORMAT)?
            .insert(JOURNAL_FOLDED_KEY, generation)?;
    }
    txn.commit()?;
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
        } => {
            // In the entries table, right after the group's entries: the
            // leaf this append dirties anyway (`tables.rs`).
            if let Some(record) = committed {
                tables
                    .entries()?
                    .insert((*group_id, COMMITTED_INDEX), record.as_slice())?;
                tally.records += 1;
                tally.bytes += record.len() as u64;
            }
            for (index, record) in records {
                tables
                    .entries()?
                    .insert((*group_id, *index), record.as_slice())?;
                tally.bytes += record.len() as u64;
            }
            tally.entries += records.len() as u64;
            tally.records += records.len() as u64;
        }
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
