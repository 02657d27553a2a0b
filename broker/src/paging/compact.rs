//! Node-local compaction of a `SegmentStore`: the live records of sparse
//! sealed segments are copied forward into new segments, and the old
//! segments are retired (unreadable; files kept until `delete_retired`).
//!
//! The store knows which records are live from its own per-segment live
//! bitmaps, so compaction needs nothing from the caller but a threshold;
//! it returns the moves so the caller can update its index.
//!
//! Crash protocol, in order:
//! 1. write the live records into `<seq:020>.seg.tmp` (a name `open`
//!    deletes), fdatasync it;
//! 2. rename it to `<seq:020>.seg`, fsync the directory;
//! 3. retire the old segments: reads of them fail with `Compacted`;
//! 4. only `delete_retired`, which the caller calls once its persisted
//!    state names the new locations, removes the old files.
//!
//! A crash before 2 leaves the old segments and a temp file (deleted at
//! `open`); after 2 both old and new, both valid, and the caller's
//! `restore_live` decides which one holds the live records (the other has
//! nothing live and is deleted).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::error::StoreError;
use super::live::LiveSet;
use super::location::Move;
use super::options::StoreOptions;
use super::segment::{self, Segment};
use super::store::{sync_dir, Entry, SegmentStore};
use crate::crash_point;

/// What `compact` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Compaction {
    /// Every record copied: the caller replaces `from` by `to`.
    pub moves: Vec<Move>,
    /// Segments now retired: unreadable, files kept until `delete_retired`.
    pub retired_segments: Vec<u32>,
    /// The segments the records were copied into (sealed, synced).
    pub new_segments: Vec<u32>,
}

impl SegmentStore {
    /// Compacts every sealed segment whose live bytes are under
    /// `live_percent_max` percent of its size (50: under half). Records are
    /// read with their checksums checked; if any live record of a segment
    /// cannot be read the whole compaction is abandoned (temp files
    /// removed) and nothing changes.
    pub fn compact(&mut self, live_percent_max: u32) -> Result<Compaction, StoreError> {
        self.compact_bounded(live_percent_max, u64::MAX)
    }

    /// Like [`compact`](Self::compact), but copies about `max_copy_bytes`
    /// of live records at most (oldest segments first; always at least one
    /// segment), so a caller holding a lock bounds how long it holds it.
    pub fn compact_bounded(
        &mut self,
        live_percent_max: u32,
        max_copy_bytes: u64,
    ) -> Result<Compaction, StoreError> {
        self.check_writable()?;
        let percent = u128::from(live_percent_max);
        let mut copy_bytes = 0u64;
        let candidates: Vec<u32> = self
            .segments
            .iter()
            .filter(|(_, entry)| {
                entry.segment.is_sealed()
                    && entry.live.n_live() > 0
                    && u128::from(entry.live.live_bytes()) * 100
                        < u128::from(entry.segment.bytes()) * percent
            })
            .take_while(|(_, entry)| {
                let first = copy_bytes == 0;
                copy_bytes = copy_bytes.saturating_add(entry.live.live_bytes());
                first || copy_bytes <= max_copy_bytes
            })
            .map(|(seq, _)| *seq)
            .collect();
        if candidates.is_empty() {
            return Ok(Compaction::default());
        }
        self.restore_allowed = false;

        let mut outputs = Vec::new();
        let mut moves = Vec::new();
        let written = copy_live(
            &self.segments,
            &candidates,
            &self.dir,
            &self.options,
            &mut self.next_seq,
            &mut outputs,
            &mut moves,
        )
        .and_then(|()| {
            outputs
                .iter_mut()
                .try_for_each(|output| output.segment.sync())
        });
        if let Err(error) = written {
            // The temp files are referenced by nothing; `open` would delete
            // them too if this removal fails.
            for output in &outputs {
                let _ = fs::remove_file(output.segment.path());
            }
            return Err(error);
        }
        crash_point::reached(crash_point::COMPACTION_COPIED);

        for output in &mut outputs {
            let seq = output.segment.seq();
            let to = segment::segment_path(&self.dir, seq);
            let renamed = fs::rename(output.segment.path(), &to)
                .map_err(|e| StoreError::io("rename compacted segment", &to, e));
            self.poison_on_error(renamed)?;
            output.segment.renamed(to);
        }
        let synced = sync_dir(&self.dir);
        self.poison_on_error(synced)?;
        crash_point::reached(crash_point::COMPACTION_RENAMED);

        let new_segments = outputs.iter().map(|o| o.segment.seq()).collect();
        for output in outputs {
            self.segments.insert(output.segment.seq(), Box::new(output));
        }
        for seq in &candidates {
            if let Some(entry) = self.segments.remove(seq) {
                self.unsynced.remove(seq);
                self.retired
                    .insert(*seq, entry.segment.path().to_path_buf());
            }
        }
        Ok(Compaction {
            moves,
            retired_segments: candidates,
            new_segments,
        })
    }

    /// Removes the files of retired segments. Call it once the caller's
    /// persisted state names the new locations of every moved record; the
    /// directory fsync waits for the next `sync`. Returns their numbers.
    pub fn delete_retired(&mut self) -> Result<Vec<u32>, StoreError> {
        self.check_not_poisoned()?;
        let mut deleted = Vec::new();
        while let Some((seq, path)) = self.retired.pop_first() {
            self.dir_dirty = true;
            let removed = fs::remove_file(&path)
                .map_err(|e| StoreError::io("remove retired segment", &path, e));
            self.poison_on_error(removed)?;
            deleted.push(seq);
        }
        Ok(deleted)
    }
}

/// Copies the live records of `candidates` into new temp segments pushed
/// onto `outputs` (sealed, written, not yet synced).
fn copy_live(
    segments: &BTreeMap<u32, Box<Entry>>,
    candidates: &[u32],
    dir: &Path,
    options: &StoreOptions,
    next_seq: &mut u32,
    outputs: &mut Vec<Entry>,
    moves: &mut Vec<Move>,
) -> Result<(), StoreError> {
    let segment_max_bytes = u64::from(options.segment_max_bytes);
    for &seq in candidates {
        let Some(entry) = segments.get(&seq) else {
            continue;
        };
        let Some(last_live) = entry.live.last() else {
            continue;
        };
        let mut n_found = 0u32;
        for item in entry.segment.cursor(options.max_record_bytes) {
            // An error before the last live record is a live record that
            // cannot be read: abandon. Records past it are never read.
            let found = item?;
            let from = found.location;
            if entry.live.contains(from.ordinal) {
                let record_bytes = from.record_bytes();
                let need_new = outputs.last().is_none_or(|o| {
                    o.segment.bytes() > 0 && o.segment.bytes() + record_bytes > segment_max_bytes
                });
                if need_new {
                    if let Some(full) = outputs.last_mut() {
                        full.segment.seal();
                        full.segment.flush()?;
                    }
                    let out_seq = *next_seq;
                    *next_seq = out_seq.checked_add(1).ok_or(StoreError::Exhausted {
                        what: "segment numbers",
                    })?;
                    outputs.push(Entry {
                        segment: Segment::create(
                            out_seq,
                            segment::temp_path(dir, out_seq),
                            options.writeback_step_bytes,
                        )?,
                        live: LiveSet::default(),
                    });
                }
                let Some(output) = outputs.last_mut() else {
                    continue;
                };
                let to = output.segment.append(found.id, &found.body)?;
                output.live.insert(to.ordinal, record_bytes);
                if output.segment.buffered_bytes() >= u64::from(options.write_buffer_bytes) {
                    output.segment.flush()?;
                }
                moves.push(Move {
                    id: found.id,
                    from,
                    to,
                });
                n_found += 1;
            }
            if from.ordinal >= last_live {
                break;
            }
        }
        if n_found != entry.live.n_live() {
            return Err(StoreError::LiveRecordsMissing {
                segment: seq,
                n_live: entry.live.n_live(),
                n_found,
            });
        }
    }
    if let Some(last) = outputs.last_mut() {
        last.segment.seal();
    }
    Ok(())
}
