//! Where a node keeps its data: a directory the user named, or a temporary
//! one (embedded brokers and test clusters) removed when it goes away.
//!
//! The temporary directory is made here rather than with the `tempfile`
//! crate so that a user of the library does not inherit that dependency for
//! one `create_dir`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A directory under the system's temporary directory, removed (with
/// everything in it) when dropped.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Create a fresh directory named `<prefix><pid>-<n>-<nanos>`.
    pub(crate) fn new(prefix: &str) -> std::io::Result<TempDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let name = format!("{prefix}{}-{n}-{nanos}", std::process::id());
            let path = std::env::temp_dir().join(name);
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            tracing::debug!(path = %self.path.display(), %error, "temporary data dir not removed");
        }
    }
}

/// A node's data directory.
pub(crate) enum DataDir {
    /// Named by the user; kept.
    Given(PathBuf),
    /// Made for this node; removed with it.
    Temporary(TempDir),
}

impl DataDir {
    /// The user's directory (created if missing), or a new temporary one.
    pub(crate) fn open(given: Option<&Path>) -> Result<DataDir, (PathBuf, std::io::Error)> {
        match given {
            Some(path) => {
                std::fs::create_dir_all(path).map_err(|e| (path.to_path_buf(), e))?;
                Ok(DataDir::Given(path.to_path_buf()))
            }
            None => TempDir::new("ramqp-")
                .map(DataDir::Temporary)
                .map_err(|e| (std::env::temp_dir(), e)),
        }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        match self {
            DataDir::Given(path) => path,
            DataDir::Temporary(dir) => dir.path(),
        }
    }
}
