//! Opening the node-wide Raft log store: one redb file shared by every
//! group of the node (queues and metadata), so one fsync covers them all.

use std::path::Path;
use std::time::Duration;

use store_redb::{LogStore, LogStoreOptions};

/// How long a restarting node waits for its previous incarnation in this
/// process to let go of the log file.
const STORE_RELEASE_WAIT: Duration = Duration::from_secs(10);

/// Open the node's log store. When a node is restarted inside the same
/// process (embedded clusters), tasks of its previous incarnation (an RPC
/// in flight from a peer, a replication reader) may hold the file for a
/// moment after shutdown; redb then reports it as already open, and we
/// retry until it is released, bounded.
/// `cache_bytes` is redb's page cache: the log is written far more than
/// read (followers are fed from recent entries), so a small cache keeps the
/// node's memory flat at no cost to the write path. `journal_bytes` sizes
/// the append journal beside the file (0: none); `journal_direct` writes
/// its records with direct, synchronous writes.
pub(crate) async fn open_log_store(
    path: &Path,
    cache_bytes: usize,
    journal_bytes: u64,
    journal_direct: bool,
) -> Result<LogStore, store_redb::Error> {
    let deadline = tokio::time::Instant::now() + STORE_RELEASE_WAIT;
    let options = LogStoreOptions {
        cache_size_bytes: cache_bytes,
        journal_bytes,
        journal_direct,
        ..LogStoreOptions::default()
    };
    loop {
        #[cfg(feature = "test-cluster")]
        let opened = match lossy::switch_for(path) {
            Some(switch) => LogStore::open_lossy(path, switch, options.clone()),
            None => LogStore::open(path, options.clone()),
        };
        #[cfg(not(feature = "test-cluster"))]
        let opened = LogStore::open(path, options.clone());
        match opened {
            Err(e) if e.is_already_open() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// Test clusters only: log stores that lose their unsynced writes at a
/// simulated power cut (`Cluster::start_lossy`, `Cluster::crash`). The
/// cluster arms a switch for a node's log path before each start; the
/// store opened there then runs on a `LossyFile` with that switch.
#[cfg(feature = "test-cluster")]
pub(crate) mod lossy {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex, OnceLock};

    use store_redb::lossy_file::CrashSwitch;

    fn switches() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Arc<CrashSwitch>>> {
        static SWITCHES: OnceLock<Mutex<HashMap<PathBuf, Arc<CrashSwitch>>>> = OnceLock::new();
        SWITCHES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next store opened at `path` runs on a lossy file powered by a
    /// new switch, which is returned.
    pub(crate) fn arm(path: &Path) -> Arc<CrashSwitch> {
        let switch = CrashSwitch::new();
        switches().insert(path.to_path_buf(), switch.clone());
        switch
    }

    /// Stores at `path` are plain files again.
    pub(crate) fn disarm(path: &Path) {
        switches().remove(path);
    }

    pub(super) fn switch_for(path: &Path) -> Option<Arc<CrashSwitch>> {
        switches().get(path).cloned()
    }
}
