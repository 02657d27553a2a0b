//! The files of one quorum queue replica in its group directory: the
//! snapshot file, the segment directory of the current generation (a new
//! generation per installed snapshot, so an install is swapped in by one
//! rename of the snapshot file), and the staging files of snapshot
//! transfers. Also the one way to replace a file durably.
//!
//! It must not know what the files hold.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The replica's snapshot file (`snapshot_file` format).
pub(crate) const SNAPSHOT_FILE: &str = "snapshot.bin";
/// Where a snapshot sent by the leader is received.
pub(crate) const INCOMING_FILE: &str = "incoming-snapshot.tmp";
/// Prefix of the files snapshot transfers are built in (unlinked at once).
const TRANSFER_PREFIX: &str = "transfer-";
const SEGMENTS_PREFIX: &str = "segments-";

/// The segment directory of `generation`.
pub(crate) fn segments_dir(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{SEGMENTS_PREFIX}{generation:08}"))
}

/// Remove what no snapshot refers to: segment directories of other
/// generations (an install that crashed before its snapshot file was
/// renamed, or the one an install replaced) and staging files.
pub(crate) fn remove_stale(dir: &Path, generation: u64) -> io::Result<()> {
    let keep = segments_dir(dir, generation);
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(SEGMENTS_PREFIX) && path != keep {
            fs::remove_dir_all(&path)?;
        } else if name == INCOMING_FILE || name.starts_with(TRANSFER_PREFIX) {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// A fresh, already unlinked file in `dir` to build a transfer in: it
/// disappears with its last handle.
pub(crate) fn anonymous_file(dir: &Path, n: u64) -> io::Result<fs::File> {
    let path = dir.join(format!("{TRANSFER_PREFIX}{n}.tmp"));
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    fs::remove_file(&path)?;
    Ok(file)
}

/// The receiving side's staging file: fresh and already unlinked, like a
/// transfer's, so a transfer openraft abandons (a timed-out chunk, or one
/// found not newer than what is committed, which never reaches the state
/// machine) gives its space back with its last handle instead of leaving a
/// file as large as the queue behind. The name exists only between the
/// create and the unlink; a crash there leaves it to `remove_stale`.
pub(crate) fn incoming_file(dir: &Path) -> io::Result<fs::File> {
    let path = dir.join(INCOMING_FILE);
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    fs::remove_file(&path)?;
    Ok(file)
}

/// Replace `dir/name` by what `write` writes, atomically and durably: a
/// temp file, fsync, rename, directory fsync.
pub(crate) fn write_durably(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&mut BufWriter<&fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let file = fs::File::create(&tmp)?;
    let mut out = BufWriter::with_capacity(256 * 1024, &file);
    write(&mut out)?;
    out.flush()?;
    drop(out);
    file.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// fsync a directory.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}
