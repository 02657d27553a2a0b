//! Whether a Raft group's core stopped on an error: openraft ends a
//! group's core task when its storage fails (a log write, a vote, a
//! snapshot) or a task of it panics, and records why in the group's
//! metrics (`running_state`). The group then answers nothing and elects
//! no one until its node restarts: the node's owner must be told.
//!
//! Knows nothing of what a group replicates; used by `crate::node` to
//! watch every group of a node, queues and metadata alike.

use openraft::error::Fatal;
use openraft::{RaftMetrics, RaftTypeConfig};

/// Why the group behind `metrics` stopped, if its core quit on an error.
/// `None` while it runs and after a requested stop (`Raft::shutdown`).
pub(crate) fn core_fault<C: RaftTypeConfig>(metrics: &RaftMetrics<C>) -> Option<String> {
    match &metrics.running_state {
        Ok(()) | Err(Fatal::Stopped) => None,
        Err(error) => Some(error.to_string()),
    }
}
