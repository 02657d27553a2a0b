//! Entries a purge has removed from a group's logical log but not yet from
//! the file: the writer deletes them a step at a time, riding on later
//! commits, instead of all in the purge's own commit.
//!
//! Why: a purge after a snapshot of a busy queue drops a few thousand
//! entries of up to a few hundred KB each, and deleting them all in one
//! transaction took 50-80 ms of writer time (freeing every page they held);
//! every append of every group queued behind it waited as long, and on a
//! cluster two nodes purging at once held a quorum publish back by the
//! same. The purge's commit writes the group's last-purged id, which is
//! what makes the purge durable: the rows below it are invisible from then
//! on (a group's reads start after its last purged index), so deleting them
//! later changes nothing a reader can see.
//!
//! A crash with a backlog leaves those rows in the file. They stay
//! invisible, and the group's next purge takes them too: a step always
//! starts at the group's first row, not at the previous purge's end.
//!
//! Knows the entries table's key layout and nothing of Raft.

use std::collections::BTreeMap;

use redb::Table;

use crate::error::Error;

/// Rows one step deletes at most, whatever their size (many small entries).
const STEP_ROWS_MAX: u64 = 1024;
/// Bytes of values one step deletes at most: about 2 ms of writer time for
/// entries of 100 KB here.
const STEP_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// Groups with purged rows still in the file, and the last purged index.
#[derive(Debug, Default)]
pub(crate) struct PurgeBacklog {
    through: BTreeMap<u64, u64>,
}

impl PurgeBacklog {
    /// `group_id`'s rows through `through` are to go.
    pub(crate) fn add(&mut self, group_id: u64, through: u64) {
        let at = self.through.entry(group_id).or_insert(through);
        *at = (*at).max(through);
    }

    /// The group was removed (all its rows deleted at once).
    pub(crate) fn forget(&mut self, group_id: u64) {
        self.through.remove(&group_id);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.through.is_empty()
    }

    /// Deletes up to one step's worth of backlog rows from `entries`,
    /// group by group in id order, and returns how many; a group whose
    /// range is empty leaves the backlog.
    pub(crate) fn step(
        &mut self,
        entries: &mut Table<'_, (u64, u64), &'static [u8]>,
    ) -> Result<u64, Error> {
        let (mut rows_done, mut bytes_done) = (0u64, 0u64);
        while let Some((&group_id, &through)) = self.through.first_key_value() {
            let mut exhausted = true;
            {
                let rows =
                    entries.extract_from_if((group_id, 0)..=(group_id, through), |_, _| true)?;
                for row in rows {
                    let (_, value) = row?;
                    rows_done += 1;
                    bytes_done += value.value().len() as u64;
                    if rows_done >= STEP_ROWS_MAX || bytes_done >= STEP_BYTES_MAX {
                        exhausted = false;
                        break;
                    }
                }
            }
            if !exhausted {
                // The budget ran out; a range whose last row this was is
                // found empty by the next step.
                return Ok(rows_done);
            }
            self.through.remove(&group_id);
        }
        Ok(rows_done)
    }
}
