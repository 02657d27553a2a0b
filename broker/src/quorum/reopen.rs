//! Start-up: every group found in the node's data directory is opened
//! again, several at once (each group's files and log rows are read off
//! the async workers, `node.rs`), each with elections off until the
//! node's liveness lets them elect (`peer_liveness.rs`). One group that
//! fails to open (a collision, an IO error) fails the whole open: the
//! groups opened so far are shut down and the error is returned.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinSet;

use super::node::{QuorumError, QuorumNode, NAME_FILE};
use super::queue::QuorumQueue;
use crate::raft::{group_id, GroupId};

/// Groups opened at once. Each open is a few hundred microseconds of
/// file reads, log rows and openraft's start; a handful in flight keeps
/// both cores of a small machine busy without flooding the blocking pool.
const OPEN_AT_ONCE: usize = 8;

/// Open every group found under the node's directory, elections off.
pub(super) async fn open_all(node: &Arc<QuorumNode>) -> Result<Vec<Arc<QuorumQueue>>, QuorumError> {
    let started = Instant::now();
    let dir = node.quorum_dir().to_path_buf();
    let names = tokio::task::spawn_blocking(move || names_on_disk(&dir))
        .await
        .map_err(|e| QuorumError::Raft(format!("listing groups: {e}")))??;
    let total = names.len();
    let mut names = names.into_iter();
    let mut opening = JoinSet::new();
    let mut held = Vec::with_capacity(total);
    let mut failure = None;
    loop {
        while failure.is_none() && opening.len() < OPEN_AT_ONCE {
            let Some(name) = names.next() else { break };
            let node = node.clone();
            // Held before it opens: the driver's first visit sees it.
            node.held_groups().insert(group_id(&name));
            opening.spawn(async move {
                let queue = node.ensure_open_with(&name, None, false).await?;
                // Off even if something else opened it first.
                queue.raft.runtime_config().elect(false);
                Ok::<_, QuorumError>(queue)
            });
        }
        let Some(joined) = opening.join_next().await else {
            break;
        };
        match joined {
            Ok(Ok(queue)) => held.push(queue),
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(e) => {
                failure.get_or_insert(QuorumError::Raft(format!("opening a group: {e}")));
            }
        }
    }
    if let Some(error) = failure {
        node.held_groups().clear();
        // Nothing keeps running on a node that failed to open.
        for queue in &held {
            let _ = queue.raft.shutdown().await;
        }
        return Err(error);
    }
    tracing::info!(
        groups = held.len(),
        ms = started.elapsed().as_millis() as u64,
        at_once = OPEN_AT_ONCE,
        "opened groups from disk"
    );
    Ok(held)
}

impl QuorumNode {
    fn held_groups(&self) -> std::sync::MutexGuard<'_, HashSet<GroupId>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `group` was opened from disk at start-up and its start-up
    /// hold has not ended: it may not elect, so it needs no tick (a
    /// follower's tick only times its elections). Without this, the
    /// driver switched the tick on for every group opened while the node
    /// had not yet heard any leader (10 a second each): at 10,000 groups
    /// that took both cores and starved the opening of the rest.
    pub(super) fn start_up_held(&self, group: GroupId) -> bool {
        self.held_groups().contains(&group)
    }

    /// End the start-up hold of `held`: each may elect, and the driver
    /// visits it again and decides its tick.
    pub(super) fn release_held(&self, held: &[Arc<QuorumQueue>]) {
        self.held_groups().clear();
        for queue in held {
            queue.raft.runtime_config().elect(true);
            queue.shared.quiet.wake();
        }
    }
}

/// The queue names of the group directories under `dir` (blocking).
fn names_on_disk(dir: &Path) -> Result<Vec<String>, QuorumError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| QuorumError::Io { path, source }
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        if !entry.file_type().map_err(io(dir))?.is_dir() {
            continue;
        }
        let name_file: PathBuf = entry.path().join(NAME_FILE);
        match std::fs::read_to_string(&name_file) {
            Ok(name) => names.push(name),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(QuorumError::Io {
                    path: name_file,
                    source,
                })
            }
        }
    }
    Ok(names)
}
