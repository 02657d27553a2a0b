//! ramqp: what an idle group gives back, and how a quiesced leader gets it again.
//!
//! A leader keeps a replication stream and a heartbeat worker per target: two tasks, their
//! channels, the network clients and a boxed request stream each, ~3 KiB per follower. A
//! quorum queue that nobody writes to needs none of it while nothing is to be sent, and a
//! node here leads thousands of such groups. [`RaftCore::quiesce`] closes them when every
//! target holds the leader's whole log and waits for more (its stream's `LogsSince`, or
//! nothing in flight).
//!
//! The engine is not told: to it each target's stream still waits for logs since its
//! matching point (the `LogsSince` kept in flight, its `prev` brought up to that point), so it
//! sends no command for the entries that follow, as with a running stream, which would have
//! read them from the I/O broadcast. Every command that a stream or a worker would act on (a
//! local append, a commit to broadcast, a replication, a snapshot to send, a heartbeat)
//! therefore first makes them all again from the engine's progress
//! ([`RaftCore::ensure_replication`]), as a membership change does without closing the old
//! ones, and hands each new stream the request the engine has in flight for it. The I/O
//! broadcast's channels, which only the streams read, go back to plain values until then.

use crate::RaftNetworkFactory;
use crate::RaftTypeConfig;
use crate::async_runtime::watch::WatchSender;
use crate::core::raft_core::RaftCore;
use crate::engine::TargetProgress;
use crate::network::NetSnapshot;
use crate::progress::inflight::Inflight;
use crate::raft_state::LogStateReader;
use crate::replication::replicate::Replicate;
use crate::storage::RaftLogStorage;
use crate::storage::RaftStateMachine;

impl<C, NF, LS, SM> RaftCore<C, NF, LS, SM>
where
    C: RaftTypeConfig,
    NF: RaftNetworkFactory<C>,
    NF::Network: NetSnapshot<C, SnapshotData = SM::SnapshotData>,
    LS: RaftLogStorage<C>,
    SM: RaftStateMachine<C>,
{
    /// Give back what this idle leader need not keep (see the module's doc).
    pub(crate) fn quiesce(&mut self) {
        if self.replications.is_empty() || !self.replication_is_settled() {
            return;
        }
        let id = self.id.clone();
        if let Some(leader) = self.engine.leader.as_mut() {
            for item in leader.progress.iter_mut_without_reorder() {
                if item.id == id {
                    continue;
                }
                // The stream made again resumes from here, not from where the closed one
                // started.
                if let Inflight::LogsSince { prev, .. } = &mut item.data.inflight {
                    *prev = item.matching.clone();
                }
            }
        }
        tracing::debug!("quiesce: closing the replication streams and heartbeat workers of an idle leader");
        self.run_close_replication_streams();
        // Only replication streams read these: their channels go with them.
        self.io_broadcast.accepted.unwatch();
        self.io_broadcast.submitted.unwatch();
        self.io_broadcast.committed.unwatch();
    }

    /// Whether this node leads, everything it holds is committed, and every target holds its
    /// whole log with no request in flight but a stream waiting for more, with no leadership
    /// transfer under way.
    fn replication_is_settled(&self) -> bool {
        let Some(leader) = self.engine.leader.as_ref() else {
            return false;
        };
        if leader.transfer_to.is_some() {
            return false;
        }
        let last = self.engine.state.last_log_id();
        if self.engine.state.local_committed() != last {
            return false;
        }
        leader.progress.iter().filter(|item| item.id != self.id).all(|item| {
            item.matching.as_ref() == last
                && matches!(item.data.inflight, Inflight::None | Inflight::LogsSince { .. })
        })
    }

    /// Make the replication streams and heartbeat workers again if a quiesced leader closed
    /// them, and hand each stream the request in flight for it, but the one to `except`, whose
    /// command is about to send its own. Called before each command that needs them.
    pub(crate) async fn ensure_replication(&mut self, except: Option<&C::NodeId>) {
        if !self.replications.is_empty() {
            return;
        }
        let Some(leader) = self.engine.leader.as_ref() else {
            return;
        };
        let membership = self.engine.state.membership_state.effective();
        let mut targets = Vec::new();
        for item in leader.progress.iter() {
            if item.id == self.id {
                continue;
            }
            let Some(target_node) = membership.get_node(&item.id) else {
                continue;
            };
            targets.push(TargetProgress {
                target: item.id.clone(),
                target_node: target_node.clone(),
                progress: item.clone(),
            });
        }
        if targets.is_empty() {
            return;
        }
        let leader_vote = leader.committed_vote.clone();
        tracing::debug!("ensure_replication: making again the replication streams of a quiesced leader");
        // Only a stream's `LogsSince` can be in flight here (`replication_is_settled`); any
        // other request comes with the command that made it.
        let resume: Vec<_> = targets
            .iter()
            .filter(|t| except != Some(&t.target))
            .filter_map(|t| match &t.progress.data.inflight {
                Inflight::LogsSince { prev, inflight_id } => {
                    Some((t.target.clone(), Replicate::new_logs_since(prev.clone(), *inflight_id)))
                }
                _ => None,
            })
            .collect();
        self.run_rebuild_replication_streams(leader_vote, targets, false).await;
        for (target, req) in resume {
            if let Some(handle) = self.replications.get(&target) {
                handle.replicate_tx.send(req).ok();
            }
        }
    }
}
