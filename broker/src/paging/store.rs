//! `SegmentStore`: the segment files of one directory. Appends go to the
//! one active segment, which is sealed and replaced once it passes
//! `segment_max_bytes`; reads go to any sealed or active segment; releases
//! keep per-segment live sets, and a sealed segment with nothing live is
//! deleted at once. `sync` makes every earlier append and every directory
//! change durable. Restart and the live set a caller restores live here;
//! compaction is in `compact.rs`.
//!
//! One store owns its directory; two stores on one directory is a bug the
//! store does not detect. Every method takes `&mut self` except reads,
//! stats and scans, so a caller may share it behind a `RwLock`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::error::StoreError;
use super::live::LiveSet;
use super::location::Location;
use super::options::StoreOptions;
use super::record::RecordError;
use super::segment::{self, FileKind, Segment};

/// A segment and its live records.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) segment: Segment,
    pub(super) live: LiveSet,
}

/// The segment files of one directory.
#[derive(Debug)]
pub struct SegmentStore {
    pub(super) dir: PathBuf,
    pub(super) options: StoreOptions,
    /// Readable segments (sealed and the active one), by sequence number.
    /// Boxed: a map's first node has room for eleven values, and most
    /// queues have one segment, so unboxed it held ~1 KiB per queue.
    pub(super) segments: BTreeMap<u32, Box<Entry>>,
    /// Compacted segments whose files are kept until `delete_retired`.
    pub(super) retired: BTreeMap<u32, PathBuf>,
    /// The segment appends go to; none right after `open`.
    pub(super) active: Option<u32>,
    /// The sequence number the next new segment gets; never reused.
    pub(super) next_seq: u32,
    /// Segments written since the last `sync`.
    pub(super) unsynced: BTreeSet<u32>,
    /// Files created, renamed or removed since the last directory fsync.
    pub(super) dir_dirty: bool,
    /// Set by a failed write, sync or directory change.
    pub(super) poisoned: bool,
    /// Opened on existing segments and `restore_live` not called yet.
    pub(super) restore_pending: bool,
    /// `restore_live` is still allowed (nothing changed since `open`).
    pub(super) restore_allowed: bool,
}

/// What `release` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Released {
    /// The sealed segment that became empty and whose file was removed.
    pub deleted_segment: Option<u32>,
}

/// What `restore_live` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restored {
    /// Locations marked live.
    pub n_live: u64,
    /// Locations whose segment file does not exist. After a crash these are
    /// records whose segment emptied and was deleted after the caller's
    /// last persisted state; a caller replaying its log past that state
    /// releases them again. Any other missing location is lost data.
    pub missing: Vec<Location>,
    /// Segments with nothing live, deleted.
    pub deleted_segments: Vec<u32>,
}

/// Counters for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Readable segments (sealed and active).
    pub n_segments: u32,
    /// Compacted segments whose files still wait for `delete_retired`.
    pub n_retired_segments: u32,
    /// Live records.
    pub n_live_records: u64,
    /// Bytes of the live records, headers included.
    pub live_bytes: u64,
    /// Bytes of the readable segment files, buffered appends included.
    pub file_bytes: u64,
}

/// One record found by [`SegmentStore::scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedRecord {
    /// The record's id.
    pub id: u64,
    /// Where it is.
    pub location: Location,
}

/// How a scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanTail {
    /// At the end of the file, after a whole record.
    Clean,
    /// At a torn or corrupt record; nothing from `offset` on is trusted.
    Damaged {
        /// Where the bad record starts.
        offset: u64,
        /// What is wrong with it.
        error: RecordError,
    },
}

/// Every intact record of a segment up to its first bad one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The records, in file order.
    pub records: Vec<ScannedRecord>,
    /// How the scan ended.
    pub tail: ScanTail,
}

impl SegmentStore {
    /// Opens (creating if needed) the store in `dir`. Deletes unfinished
    /// compaction outputs (`*.seg.tmp`) and lists the segments, sealed,
    /// without reading their records. Appends will go to a new segment.
    /// If segments exist, [`restore_live`](Self::restore_live) must be
    /// called before any change.
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Self, StoreError> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("create directory", &dir, e))?;
        let listing = fs::read_dir(&dir).map_err(|e| StoreError::io("list directory", &dir, e))?;
        let mut segments = BTreeMap::new();
        let mut dir_dirty = true; // the directory may just have been created
        let mut max_seq = None;
        for item in listing {
            let item = item.map_err(|e| StoreError::io("list directory", &dir, e))?;
            let Some(name) = item.file_name().to_str().and_then(segment::parse_name) else {
                continue;
            };
            match name {
                FileKind::Temp(_) => {
                    let path = item.path();
                    fs::remove_file(&path)
                        .map_err(|e| StoreError::io("remove temp segment", &path, e))?;
                    dir_dirty = true;
                }
                FileKind::Segment(seq) => {
                    let segment = Segment::open_sealed(seq, item.path())?;
                    max_seq = max_seq.max(Some(seq));
                    segments.insert(
                        seq,
                        Box::new(Entry {
                            segment,
                            live: LiveSet::default(),
                        }),
                    );
                }
            }
        }
        let next_seq = match max_seq {
            Some(seq) => seq.checked_add(1).ok_or(StoreError::Exhausted {
                what: "segment numbers",
            })?,
            None => 0,
        };
        Ok(Self {
            dir,
            options,
            restore_pending: !segments.is_empty(),
            segments,
            retired: BTreeMap::new(),
            active: None,
            next_seq,
            unsynced: BTreeSet::new(),
            dir_dirty,
            poisoned: false,
            restore_allowed: true,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// Tells a reopened store which records are live (the caller's
    /// persisted index). Only once, before any change. Rebuilds the live
    /// sets without reading bodies (locations are checked against segment
    /// sizes), then deletes every segment with nothing live.
    pub fn restore_live(
        &mut self,
        live: impl IntoIterator<Item = Location>,
    ) -> Result<Restored, StoreError> {
        if !self.restore_allowed {
            return Err(StoreError::AlreadyRestored);
        }
        self.check_not_poisoned()?;
        let mut restored = Restored::default();
        for location in live {
            // A location names a segment number that must never be reused,
            // even if its file is gone.
            if location.segment >= self.next_seq {
                self.next_seq = location
                    .segment
                    .checked_add(1)
                    .ok_or(StoreError::Exhausted {
                        what: "segment numbers",
                    })?;
            }
            let Some(entry) = self.segments.get_mut(&location.segment) else {
                restored.missing.push(location);
                continue;
            };
            let end = u64::from(location.offset) + location.record_bytes();
            if location.body_bytes > self.options.max_record_bytes || end > entry.segment.bytes() {
                return Err(StoreError::OutOfBounds {
                    location,
                    segment_bytes: entry.segment.bytes(),
                });
            }
            if !entry.live.insert(location.ordinal, location.record_bytes()) {
                return Err(StoreError::DuplicateLocation { location });
            }
            restored.n_live += 1;
        }
        let empty: Vec<u32> = self
            .segments
            .iter()
            .filter(|(_, entry)| entry.live.n_live() == 0)
            .map(|(seq, _)| *seq)
            .collect();
        for seq in empty {
            self.delete_segment(seq)?;
            restored.deleted_segments.push(seq);
        }
        self.restore_pending = false;
        self.restore_allowed = false;
        Ok(restored)
    }

    /// Appends a record and returns where it is. Buffered: no fsync, and a
    /// write syscall only when the buffer is full or the segment rolls. The
    /// record is durable once a later [`sync`](Self::sync) returns.
    pub fn append(&mut self, id: u64, body: &[u8]) -> Result<Location, StoreError> {
        self.check_writable()?;
        if body.len() as u64 > u64::from(self.options.max_record_bytes) {
            return Err(StoreError::BodyTooLarge {
                body_bytes: body.len() as u64,
                max_record_bytes: self.options.max_record_bytes,
            });
        }
        self.restore_allowed = false;
        let record_bytes = super::record::encoded_bytes(body.len() as u32);
        let seq = self.active_for(record_bytes)?;
        let write_buffer_bytes = u64::from(self.options.write_buffer_bytes);
        let Some(entry) = self.segments.get_mut(&seq) else {
            return Err(StoreError::SegmentGone { segment: seq });
        };
        let location = entry.segment.append(id, body)?;
        let inserted = entry.live.insert(location.ordinal, record_bytes);
        debug_assert!(inserted, "fresh ordinal already live");
        self.unsynced.insert(seq);
        if entry.segment.buffered_bytes() >= write_buffer_bytes {
            let result = entry.segment.flush();
            self.poison_on_error(result)?;
        }
        Ok(location)
    }

    /// The active segment with room for `record_bytes`, rolling if needed.
    fn active_for(&mut self, record_bytes: u64) -> Result<u32, StoreError> {
        let max = u64::from(self.options.segment_max_bytes);
        if let Some(seq) = self.active {
            let bytes = self.segments.get(&seq).map_or(0, |e| e.segment.bytes());
            // A record larger than a whole segment goes alone into one.
            if bytes == 0 || bytes + record_bytes <= max {
                return Ok(seq);
            }
            self.seal_active()?;
        }
        let seq = self.next_seq;
        self.next_seq = seq.checked_add(1).ok_or(StoreError::Exhausted {
            what: "segment numbers",
        })?;
        let segment = Segment::create(
            seq,
            segment::segment_path(&self.dir, seq),
            self.options.writeback_step_bytes,
        );
        let segment = self.poison_on_error(segment)?;
        self.dir_dirty = true;
        self.segments.insert(
            seq,
            Box::new(Entry {
                segment,
                live: LiveSet::default(),
            }),
        );
        self.active = Some(seq);
        Ok(seq)
    }

    /// Seals the active segment: its buffer is written (not synced), and
    /// it is deleted at once if nothing in it is live.
    fn seal_active(&mut self) -> Result<(), StoreError> {
        let Some(seq) = self.active.take() else {
            return Ok(());
        };
        let Some(entry) = self.segments.get_mut(&seq) else {
            return Ok(());
        };
        entry.segment.seal();
        let n_live = entry.live.n_live();
        let result = entry.segment.flush();
        self.poison_on_error(result)?;
        if n_live == 0 {
            self.delete_segment(seq)?;
        }
        Ok(())
    }

    /// Reads record `id` at `location`; its length, id and checksum are
    /// checked and a bad record is an error, never served.
    pub fn read(&self, location: Location, id: u64) -> Result<Bytes, StoreError> {
        let Some(entry) = self.segments.get(&location.segment) else {
            return Err(self.gone(location.segment));
        };
        entry
            .segment
            .read(location, id, self.options.max_record_bytes)
    }

    /// Marks the record at `location` dead. A sealed segment left with
    /// nothing live is deleted at once (its removal is made durable by the
    /// next `sync`).
    pub fn release(&mut self, location: Location) -> Result<Released, StoreError> {
        self.check_writable()?;
        let Some(entry) = self.segments.get_mut(&location.segment) else {
            return Err(self.gone(location.segment));
        };
        if !entry.live.remove(location.ordinal, location.record_bytes()) {
            return Err(StoreError::NotLive { location });
        }
        self.restore_allowed = false;
        // The active segment goes too once a quarter full and empty (a
        // drained deep queue left its whole last segment behind); smaller,
        // it stays, so a shallow paged queue does not create and delete a
        // file per message. Deleting it is as safe as deleting a sealed one:
        // the next append starts a new segment number.
        let worth_deleting = entry.segment.is_sealed()
            || entry.segment.bytes() >= u64::from(self.options.segment_max_bytes) / 4;
        if entry.live.n_live() > 0 || !worth_deleting {
            return Ok(Released::default());
        }
        self.delete_segment(location.segment)?;
        Ok(Released {
            deleted_segment: Some(location.segment),
        })
    }

    /// Whether the store keeps anything an idle, empty queue has no use
    /// for: an active segment with nothing live (`release` keeps a small
    /// one, so a shallow queue does not make a file per message).
    pub fn holds_idle_segment(&self) -> bool {
        self.active
            .and_then(|seq| self.segments.get(&seq))
            .is_some_and(|entry| entry.live.n_live() == 0)
    }

    /// Gives back what an idle store with nothing live in its active
    /// segment holds: that segment (its file is deleted, as `release`
    /// deletes an emptied sealed one; the next append starts a new one)
    /// and the tables emptied by it. Called on a cold path, by a queue
    /// found empty and without publishes for a while: a paged queue used
    /// once kept ~0.4 KiB and an open file in every replica that paged it.
    pub fn shed_idle(&mut self) -> Result<(), StoreError> {
        if !self.holds_idle_segment() {
            return Ok(());
        }
        self.check_writable()?;
        if let Some(seq) = self.active {
            self.delete_segment(seq)?;
        }
        // An emptied B-tree keeps its root node.
        if self.segments.is_empty() {
            self.segments = BTreeMap::new();
        }
        if self.unsynced.is_empty() {
            self.unsynced = BTreeSet::new();
        }
        if self.retired.is_empty() {
            self.retired = BTreeMap::new();
        }
        Ok(())
    }

    /// Makes every earlier append durable: writes the buffers, fdatasyncs
    /// each segment written since the last sync, then fsyncs the directory
    /// if files were created, renamed or removed. A caller records
    /// locations in its own persisted state only after this returned.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.check_not_poisoned()?;
        while let Some(seq) = self.unsynced.first().copied() {
            if let Some(entry) = self.segments.get_mut(&seq) {
                let result = entry.segment.sync();
                self.poison_on_error(result)?;
            }
            self.unsynced.remove(&seq);
        }
        if self.dir_dirty {
            let result = sync_dir(&self.dir);
            self.poison_on_error(result)?;
            self.dir_dirty = false;
        }
        Ok(())
    }

    /// Counters over the readable segments.
    pub fn stats(&self) -> StoreStats {
        let mut stats = StoreStats {
            n_segments: self.segments.len() as u32,
            n_retired_segments: self.retired.len() as u32,
            ..StoreStats::default()
        };
        for entry in self.segments.values() {
            stats.n_live_records += u64::from(entry.live.n_live());
            stats.live_bytes += entry.live.live_bytes();
            stats.file_bytes += entry.segment.bytes();
        }
        stats
    }

    /// The readable segments' sequence numbers, in order.
    pub fn segments(&self) -> Vec<u32> {
        self.segments.keys().copied().collect()
    }

    /// Reads every record of a segment in order (bodies checked, not kept),
    /// stopping at the first torn or corrupt one, which is reported in the
    /// result's tail. For tools and tests; an IO error is still an error.
    pub fn scan(&self, segment: u32) -> Result<Scan, StoreError> {
        let Some(entry) = self.segments.get(&segment) else {
            return Err(self.gone(segment));
        };
        let mut cursor = entry.segment.cursor(self.options.max_record_bytes);
        let mut records = Vec::new();
        let mut tail = ScanTail::Clean;
        for item in cursor.by_ref() {
            match item {
                Ok(found) => records.push(ScannedRecord {
                    id: found.id,
                    location: found.location,
                }),
                Err(StoreError::Corrupt { offset, source, .. }) => {
                    tail = ScanTail::Damaged {
                        offset,
                        error: source,
                    };
                }
                Err(other) => return Err(other),
            }
        }
        debug_assert!(tail != ScanTail::Clean || cursor.offset() == entry.segment.bytes());
        Ok(Scan { records, tail })
    }

    /// Removes a segment's file now; the directory fsync waits for `sync`.
    pub(super) fn delete_segment(&mut self, seq: u32) -> Result<(), StoreError> {
        let Some(entry) = self.segments.remove(&seq) else {
            return Ok(());
        };
        if self.active == Some(seq) {
            self.active = None;
        }
        self.unsynced.remove(&seq);
        self.dir_dirty = true;
        let path = entry.segment.path().to_path_buf();
        drop(entry);
        let result = fs::remove_file(&path).map_err(|e| StoreError::io("remove segment", &path, e));
        self.poison_on_error(result)
    }

    pub(super) fn gone(&self, segment: u32) -> StoreError {
        if self.retired.contains_key(&segment) {
            StoreError::Compacted { segment }
        } else {
            StoreError::SegmentGone { segment }
        }
    }

    pub(super) fn check_not_poisoned(&self) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        Ok(())
    }

    /// A change is allowed: not poisoned and not waiting for a restore.
    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
        self.check_not_poisoned()?;
        if self.restore_pending {
            return Err(StoreError::RestoreRequired);
        }
        Ok(())
    }

    /// After a failed write, sync or directory change, what is on disk is
    /// unknown (a failed fsync may have dropped dirty pages), so the store
    /// stops accepting changes instead of retrying.
    pub(super) fn poison_on_error<T>(
        &mut self,
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }
}

/// fsyncs a directory, so the entries created, renamed or removed in it
/// survive a crash.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync directory", dir, e))
}
