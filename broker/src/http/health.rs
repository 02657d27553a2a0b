//! Liveness and readiness. Alive: the process runs its runtime and answers
//! (there is nothing more to check: a wedged runtime does not answer at
//! all). Ready: the node serves what it holds, which takes
//!
//! - not shutting down;
//! - no fatal storage fault (the log store refusing writes, a Raft group
//!   stopped on an error: the node fail-stops, `node/fatal.rs`);
//! - no disk alarm (free space or data size past its limit: publishes to
//!   quorum queues are held back). A memory alarm alone keeps the node
//!   ready: consumers must still reach it to drain what holds the memory;
//! - a cluster-metadata leader known, and if that is this node, one a
//!   quorum acknowledged within the election time-out (a leader cut off
//!   from its cluster believes in itself until it hears otherwise; one
//!   not acknowledged since its election is not ready either).
//!
//! It reads the node's views only; it knows no HTTP.

use super::Sources;

/// Whether the node serves; why not, in a short line, when it does not.
pub(super) fn readiness(sources: &Sources) -> Result<(), String> {
    if sources.node.stopping() {
        return Err("shutting down".into());
    }
    if let Some(fault) = sources.node.fatal() {
        return Err(format!("fail-stopped: {fault}"));
    }
    if let Some(reason) = sources.quorum.disk_alarm() {
        return Err(format!("disk alarm: {reason}"));
    }
    let meta = sources.metadata.raft_status();
    let Some(leader) = meta.leader else {
        return Err("no cluster-metadata leader known".into());
    };
    let window_ms = sources.quorum.raft_config().election_timeout_max;
    if meta.leading {
        // None: no quorum has acknowledged this leader since its election.
        // That lasts a round trip after a normal election, and for good
        // when the voters went away right after voting (a hand-off from
        // a node that then stopped, with the third gone too).
        match meta.quorum_ack_age_ms {
            Some(ms) if ms > window_ms => {
                return Err(format!(
                    "this node ({leader}) leads the cluster metadata without a \
                     quorum's acknowledgement for {ms} ms"
                ))
            }
            None => {
                return Err(format!(
                    "this node ({leader}) leads the cluster metadata, not yet \
                     acknowledged by a quorum"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}
