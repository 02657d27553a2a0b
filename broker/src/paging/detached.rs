//! Work on a store's segment files away from the store itself, so its
//! owner does not hold its lock through slow IO: a [`PendingSync`] runs the
//! fdatasyncs and the directory fsync that [`SegmentStore::sync_later`]
//! collected; a [`StoreReader`] reads the records that were in the files
//! when [`SegmentStore::reader`] was called, even if the store deletes,
//! compacts or appends to them afterwards (it holds its own handles, and
//! an unlinked file stays readable through them).
//!
//! Like the rest of `paging`, it knows nothing of queues or Raft.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use bytes::Bytes;

use super::error::StoreError;
use super::location::Location;
use super::segment;
use super::store::{sync_dir, SegmentStore};

/// fsyncs collected by [`SegmentStore::sync_later`], to run without the
/// store. If [`run`](Self::run) fails, the store's owner must treat the
/// store as failed (it already considers these writes synced).
#[derive(Debug)]
pub struct PendingSync {
    files: Vec<(PathBuf, File)>,
    dir: Option<PathBuf>,
}

impl PendingSync {
    /// fdatasync every collected segment, then the directory if needed.
    pub fn run(self) -> Result<(), StoreError> {
        for (path, file) in &self.files {
            file.sync_data()
                .map_err(|e| StoreError::io("fdatasync segment", path, e))?;
        }
        if let Some(dir) = &self.dir {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

/// A read-only view of the segment files as they were when it was made.
#[derive(Debug)]
pub struct StoreReader {
    segments: BTreeMap<u32, (File, u64)>,
    max_record_bytes: u32,
}

impl StoreReader {
    /// A reader of no segment at all (every `read` is `SegmentGone`): for
    /// writing a snapshot transfer of resident bodies only, which the fuzz
    /// checks do.
    pub(crate) fn empty() -> StoreReader {
        StoreReader {
            segments: BTreeMap::new(),
            max_record_bytes: 0,
        }
    }

    /// Reads record `id` at `location`, checking its length, id and CRC.
    pub fn read(&self, location: Location, id: u64) -> Result<Bytes, StoreError> {
        let Some((file, size)) = self.segments.get(&location.segment) else {
            return Err(StoreError::SegmentGone {
                segment: location.segment,
            });
        };
        let offset = u64::from(location.offset);
        if offset + location.record_bytes() > *size {
            return Err(StoreError::OutOfBounds {
                location,
                segment_bytes: *size,
            });
        }
        let mut raw = vec![0u8; location.record_bytes() as usize];
        file.read_exact_at(&mut raw, offset)
            .map_err(|e| StoreError::io("read segment", PathBuf::new(), e))?;
        segment::body_at(&Bytes::from(raw), 0, location, id, self.max_record_bytes)
    }
}

impl SegmentStore {
    /// Like [`sync`](Self::sync), but only writes the buffers now and
    /// hands back the fsyncs, to be run without holding the store. Every
    /// location handed out before this call is durable once the returned
    /// [`PendingSync::run`] succeeded.
    pub fn sync_later(&mut self) -> Result<PendingSync, StoreError> {
        self.check_not_poisoned()?;
        let mut files = Vec::new();
        while let Some(seq) = self.unsynced.first().copied() {
            if let Some(entry) = self.segments.get_mut(&seq) {
                let detached = entry.segment.detach();
                let (file, _) = self.poison_on_error(detached)?;
                if let Some(entry) = self.segments.get(&seq) {
                    files.push((entry.segment.path().to_path_buf(), file));
                }
            }
            self.unsynced.remove(&seq);
        }
        let dir = self.dir_dirty.then(|| self.dir.clone());
        self.dir_dirty = false;
        Ok(PendingSync { files, dir })
    }

    /// A reader of every record in the readable segments now (buffered
    /// appends are written first).
    pub fn reader(&mut self) -> Result<StoreReader, StoreError> {
        self.check_not_poisoned()?;
        let mut segments = BTreeMap::new();
        for (seq, entry) in self.segments.iter_mut() {
            let detached = entry.segment.detach();
            let detached = match detached {
                Ok(detached) => detached,
                Err(e) => {
                    self.poisoned = true;
                    return Err(e);
                }
            };
            segments.insert(*seq, detached);
        }
        Ok(StoreReader {
            segments,
            max_record_bytes: self.options.max_record_bytes,
        })
    }
}
