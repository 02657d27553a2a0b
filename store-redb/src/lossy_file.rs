//! A redb storage backend for crash tests that loses, at a simulated power
//! cut, every write not yet synced: writes and length changes stay in
//! memory (an overlay of 4 KiB pages, as a page cache would hold them)
//! until `sync_data`, which applies them to the real file and fdatasyncs
//! it. [`CrashSwitch::crash`] is the power cut: from then on the backend
//! refuses every write and sync, so nothing this incarnation did after
//! its last sync reaches the file; a store opened on the file afterwards
//! sees exactly what had been synced.
//!
//! Owns: the overlay, the file, the per-path "already open" guard (a
//! second incarnation must wait until the first is gone, as with redb's
//! file lock). Knows nothing of Raft or of what the bytes mean.
//!
//! Behind the `test-backends` feature; never used by a production store.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Page size of the overlay (redb writes whole pages of at least this).
const PAGE: u64 = 4096;

/// The power switch of one incarnation's backend.
#[derive(Debug)]
pub struct CrashSwitch {
    crashed: AtomicBool,
    /// Pages written and not yet synced, over every file of the switch
    /// (a store's database and its journal share one).
    dirty_pages: AtomicU64,
    /// Writes to let through before the power goes (`crash_at_write`);
    /// negative when not armed.
    countdown: AtomicI64,
    /// Dirty pages when an armed countdown cut the power.
    lost_at_cut: AtomicU64,
}

impl Default for CrashSwitch {
    fn default() -> Self {
        CrashSwitch {
            crashed: AtomicBool::new(false),
            dirty_pages: AtomicU64::new(0),
            countdown: AtomicI64::new(-1),
            lost_at_cut: AtomicU64::new(0),
        }
    }
}

impl CrashSwitch {
    /// A switch that is on (no crash yet).
    pub fn new() -> Arc<CrashSwitch> {
        Arc::new(CrashSwitch::default())
    }

    /// Cut the power: unsynced writes are lost, later ones refused.
    /// Returns how many written pages were not synced (what was lost; a
    /// crash test that never loses anything tests nothing).
    pub fn crash(&self) -> u64 {
        self.crashed.store(true, Ordering::SeqCst);
        self.dirty_pages.load(Ordering::SeqCst)
    }

    /// Whether the power is off.
    pub fn is_crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }

    /// Cut the power in the middle of a commit: `writes` more writes go
    /// into the page cache, the next write or sync finds the power gone
    /// (so the cut lands between a commit's writes and its sync, whether
    /// the commit is several writes, as a redb commit, or one, as a
    /// journal record).
    pub fn crash_at_write(&self, writes: u32) {
        self.countdown.store(i64::from(writes), Ordering::SeqCst);
    }

    /// The dirty pages lost by a cut that `crash_at_write` armed.
    pub fn lost_at_cut(&self) -> u64 {
        self.lost_at_cut.load(Ordering::SeqCst)
    }

    /// Counts one write down; true when this write finds the power gone.
    fn cut_now(&self) -> bool {
        if self.cut_at_sync() {
            return true;
        }
        let left = self.countdown.load(Ordering::SeqCst);
        if left > 0 {
            self.countdown.store(left - 1, Ordering::SeqCst);
        }
        false
    }

    /// True when a sync (or a write) finds the power gone: cut already, or
    /// an armed countdown has let its writes through.
    fn cut_at_sync(&self) -> bool {
        if self.is_crashed() {
            return true;
        }
        if self.countdown.load(Ordering::SeqCst) == 0 {
            self.lost_at_cut
                .store(self.dirty_pages.load(Ordering::SeqCst), Ordering::SeqCst);
            self.crashed.store(true, Ordering::SeqCst);
            return true;
        }
        false
    }
}

/// What has been written since the last sync.
#[derive(Debug)]
struct Overlay {
    /// Dirty pages by page number, each `PAGE` bytes.
    pages: BTreeMap<u64, Vec<u8>>,
    /// The length the database sees.
    len: u64,
    /// Bytes of the file at or past this offset read as zero (a shrink
    /// since the last sync; the file still holds the old bytes).
    zero_from: u64,
}

/// The backend (see the module documentation).
#[derive(Debug)]
pub struct LossyFile {
    path: PathBuf,
    file: File,
    overlay: Mutex<Overlay>,
    switch: Arc<CrashSwitch>,
}

fn open_paths() -> MutexGuard<'static, HashSet<PathBuf>> {
    static OPEN: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn crashed_error() -> io::Error {
    io::Error::other("simulated power cut: this write was never made durable")
}

impl LossyFile {
    /// Open (or create) the file at `path` for one incarnation whose power
    /// is `switch`. Fails with [`io::ErrorKind::WouldBlock`] while another
    /// `LossyFile` of this process has the same path open.
    pub fn open(path: &Path, switch: Arc<CrashSwitch>) -> io::Result<LossyFile> {
        let path = path.to_path_buf();
        if !open_paths().insert(path.clone()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is open in another incarnation", path.display()),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path);
        let file = match file {
            Ok(file) => file,
            Err(e) => {
                open_paths().remove(&path);
                return Err(e);
            }
        };
        let len = match file.metadata() {
            Ok(meta) => meta.len(),
            Err(e) => {
                open_paths().remove(&path);
                return Err(e);
            }
        };
        Ok(LossyFile {
            path,
            file,
            overlay: Mutex::new(Overlay {
                pages: BTreeMap::new(),
                len,
                zero_from: len,
            }),
            switch,
        })
    }

    fn overlay(&self) -> MutexGuard<'_, Overlay> {
        self.overlay
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Page `n` as the database sees it now: the dirty copy, or what the
    /// file holds (zeros past `zero_from`).
    fn page<'a>(&self, overlay: &'a Overlay, n: u64) -> io::Result<Cow<'a, [u8]>> {
        if let Some(page) = overlay.pages.get(&n) {
            return Ok(Cow::Borrowed(page));
        }
        let mut page = vec![0u8; PAGE as usize];
        let start = n * PAGE;
        let readable = overlay.zero_from.saturating_sub(start).min(PAGE) as usize;
        if readable > 0 {
            read_up_to(&self.file, start, &mut page[..readable])?;
        }
        Ok(Cow::Owned(page))
    }
}

/// Read what the file has at `offset` into `out`; past its end is zero.
fn read_up_to(file: &File, offset: u64, out: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < out.len() {
        let n = file.read_at(&mut out[done..], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    out[done..].fill(0);
    Ok(())
}

impl redb::StorageBackend for LossyFile {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.overlay().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let overlay = self.overlay();
        let end = offset + out.len() as u64;
        if end > overlay.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the storage",
            ));
        }
        let mut at = offset;
        while at < end {
            let n = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = ((PAGE as usize) - within).min((end - at) as usize);
            let dst = (at - offset) as usize;
            let page = self.page(&overlay, n)?;
            out[dst..dst + take].copy_from_slice(&page[within..within + take]);
            at += take as u64;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        if self.switch.is_crashed() {
            return Err(crashed_error());
        }
        let mut overlay = self.overlay();
        if len < overlay.len {
            // Pages past the end go; the last one keeps zeros past it, so
            // a later growth reads zeros there.
            let last = len / PAGE;
            let before = overlay.pages.len();
            overlay.pages.retain(|n, _| *n <= last);
            self.switch
                .dirty_pages
                .fetch_sub((before - overlay.pages.len()) as u64, Ordering::SeqCst);
            let within = (len % PAGE) as usize;
            if let Some(page) = overlay.pages.get_mut(&last) {
                page[within..].fill(0);
            }
            overlay.zero_from = overlay.zero_from.min(len);
        }
        overlay.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        if self.switch.cut_at_sync() {
            return Err(crashed_error());
        }
        let mut overlay = self.overlay();
        if overlay.zero_from < self.file.metadata()?.len() {
            self.file.set_len(overlay.zero_from)?;
        }
        self.file.set_len(overlay.len)?;
        for (n, page) in &overlay.pages {
            let start = n * PAGE;
            if start >= overlay.len {
                continue;
            }
            let keep = (overlay.len - start).min(PAGE) as usize;
            self.file.write_all_at(&page[..keep], start)?;
        }
        self.file.sync_data()?;
        self.switch
            .dirty_pages
            .fetch_sub(overlay.pages.len() as u64, Ordering::SeqCst);
        overlay.pages.clear();
        overlay.zero_from = overlay.len;
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        if self.switch.cut_now() {
            return Err(crashed_error());
        }
        let mut overlay = self.overlay();
        let before = overlay.pages.len();
        let end = offset + data.len() as u64;
        let mut at = offset;
        while at < end {
            let n = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = ((PAGE as usize) - within).min((end - at) as usize);
            let mut page = match overlay.pages.remove(&n) {
                Some(page) => page,
                None => self.page(&overlay, n)?.into_owned(),
            };
            let src = (at - offset) as usize;
            page[within..within + take].copy_from_slice(&data[src..src + take]);
            overlay.pages.insert(n, page);
            at += take as u64;
        }
        overlay.len = overlay.len.max(end);
        self.switch
            .dirty_pages
            .fetch_add((overlay.pages.len() - before) as u64, Ordering::SeqCst);
        Ok(())
    }

    fn close(&self) -> Result<(), io::Error> {
        open_paths().remove(&self.path);
        Ok(())
    }
}

impl Drop for LossyFile {
    fn drop(&mut self) {
        open_paths().remove(&self.path);
    }
}

impl crate::LogStore {
    /// Open a store on a [`LossyFile`] at `path` whose power is `switch`
    /// (tests only). While another incarnation of this process still has
    /// the file open, fails like a second open of a redb file does
    /// ([`crate::Error::is_already_open`]), so callers retry the same way.
    pub fn open_lossy(
        path: &Path,
        switch: Arc<CrashSwitch>,
        options: crate::LogStoreOptions,
    ) -> Result<crate::LogStore, crate::Error> {
        let open = |path: &Path| {
            LossyFile::open(path, switch.clone()).map_err(|e| {
                if e.kind() == io::ErrorKind::WouldBlock {
                    crate::Error::Database(redb::Error::DatabaseAlreadyOpen)
                } else {
                    crate::Error::Database(redb::Error::from(e))
                }
            })
        };
        let backend = open(path)?;
        // The journal shares the power switch: a cut loses what neither
        // file synced.
        let journal_path = crate::store::journal_path(path);
        let journal: Option<Box<dyn redb::StorageBackend>> =
            if options.journal_bytes > 0 || journal_path.exists() {
                Some(Box::new(open(&journal_path)?))
            } else {
                None
            };
        crate::LogStore::open_with_backends(backend, journal, options)
    }
}

#[cfg(test)]
mod tests {
    use redb::{ReadableDatabase, StorageBackend};

    use super::*;

    #[test]
    fn only_synced_writes_survive_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let switch = CrashSwitch::new();
        let file = LossyFile::open(&path, switch.clone()).unwrap();
        file.set_len(3 * PAGE).unwrap();
        file.write(10, b"synced").unwrap();
        file.sync_data().unwrap();
        file.write(10, b"LOST!!").unwrap();
        file.write(2 * PAGE + 5, b"lost too").unwrap();
        let mut seen = [0u8; 6];
        file.read(10, &mut seen).unwrap();
        assert_eq!(&seen, b"LOST!!", "the incarnation reads its own writes");
        assert_eq!(switch.crash(), 2, "two dirty pages lost");
        assert!(file.write(0, b"x").is_err());
        assert!(file.sync_data().is_err());
        drop(file);

        let file = LossyFile::open(&path, CrashSwitch::new()).unwrap();
        assert_eq!(file.len().unwrap(), 3 * PAGE);
        file.read(10, &mut seen).unwrap();
        assert_eq!(&seen, b"synced");
        let mut tail = [1u8; 8];
        file.read(2 * PAGE + 5, &mut tail).unwrap();
        assert_eq!(tail, [0u8; 8]);
    }

    #[test]
    fn an_armed_cut_lands_on_the_nth_write() {
        let dir = tempfile::tempdir().unwrap();
        let switch = CrashSwitch::new();
        let file = LossyFile::open(&dir.path().join("f"), switch.clone()).unwrap();
        switch.crash_at_write(2);
        file.write(0, b"a").unwrap();
        file.write(PAGE, b"b").unwrap();
        assert!(!switch.is_crashed());
        assert!(
            file.write(2 * PAGE, b"c").is_err(),
            "the third write finds the power gone"
        );
        assert!(switch.is_crashed());
        assert_eq!(switch.lost_at_cut(), 2);
        assert!(file.sync_data().is_err());
    }

    #[test]
    fn an_armed_cut_lands_on_the_sync_after_the_writes_of_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let switch = CrashSwitch::new();
        let db = LossyFile::open(&dir.path().join("db"), switch.clone()).unwrap();
        let journal = LossyFile::open(&dir.path().join("journal"), switch.clone()).unwrap();
        db.write(0, b"a").unwrap();
        switch.crash_at_write(1);
        journal.write(0, b"record").unwrap();
        // The journal's sync comes next, with its record and the other
        // file's page still in the page cache.
        assert!(
            journal.sync_data().is_err(),
            "the sync finds the power gone"
        );
        assert_eq!(switch.lost_at_cut(), 2, "one dirty page in each file");
        assert!(db.sync_data().is_err());
    }

    #[test]
    fn a_shrink_then_growth_reads_zeros_and_a_second_open_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = LossyFile::open(&path, CrashSwitch::new()).unwrap();
        file.write(0, &[7u8; 3 * PAGE as usize]).unwrap();
        file.sync_data().unwrap();
        let again = LossyFile::open(&path, CrashSwitch::new());
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        file.set_len(PAGE + 100).unwrap();
        file.set_len(3 * PAGE).unwrap();
        let mut out = vec![9u8; (2 * PAGE) as usize];
        file.read(PAGE, &mut out).unwrap();
        assert!(out[..100].iter().all(|b| *b == 7), "kept below the shrink");
        assert!(out[100..].iter().all(|b| *b == 0), "zeros past it");
        file.sync_data().unwrap();
        drop(file);
        let file = LossyFile::open(&path, CrashSwitch::new()).unwrap();
        file.read(PAGE, &mut out).unwrap();
        assert!(out[100..].iter().all(|b| *b == 0), "zeros on the file too");
    }

    #[test]
    fn a_database_on_it_keeps_committed_data_across_a_crash() {
        const T: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("t");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let switch = CrashSwitch::new();
        let db = redb::Database::builder()
            .create_with_backend(LossyFile::open(&path, switch.clone()).unwrap())
            .unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(T).unwrap().insert(1, 10).unwrap();
        tx.commit().unwrap();
        let mut tx = db.begin_write().unwrap();
        tx.set_durability(redb::Durability::None).unwrap();
        tx.open_table(T).unwrap().insert(2, 20).unwrap();
        tx.commit().unwrap();
        switch.crash();
        drop(db);

        let db = redb::Database::builder()
            .create_with_backend(LossyFile::open(&path, CrashSwitch::new()).unwrap())
            .unwrap();
        let tx = db.begin_read().unwrap();
        let table = tx.open_table(T).unwrap();
        assert_eq!(table.get(1).unwrap().map(|v| v.value()), Some(10));
        assert_eq!(table.get(2).unwrap().map(|v| v.value()), None);
    }
}
