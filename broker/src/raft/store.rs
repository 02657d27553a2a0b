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
/// node's memory flat at no cost to the write path.
pub(crate) async fn open_log_store(
    path: &Path,
    cache_bytes: usize,
) -> Result<LogStore, store_redb::Error> {
    let deadline = tokio::time::Instant::now() + STORE_RELEASE_WAIT;
    let options = LogStoreOptions {
        cache_size_bytes: cache_bytes,
        ..LogStoreOptions::default()
    };
    loop {
        match LogStore::open(path, options.clone()) {
            Err(e) if e.is_already_open() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}
