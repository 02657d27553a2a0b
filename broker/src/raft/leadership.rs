//! Steps of a leadership hand-off that do not depend on what a Raft group
//! replicates, shared by the quorum queues' groups (`quorum/handoff.rs`)
//! and the cluster-metadata group (`meta/handoff.rs`): where the log
//! stopped, which voter has caught up, how old the leader's own vote is,
//! and the target's campaign.
//!
//! The target's campaign is the metadata group's way; the quorum queues'
//! hand-off asks openraft 0.10's `transfer_leader` instead (see
//! `quorum/handoff.rs`).

use std::time::Duration;

use openraft::alias::WatchReceiverOf;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::storage::RaftStateMachine;
use openraft::{BasicNode, Instant as _, Raft, RaftMetrics, RaftTypeConfig, ServerState};
use tokio::time::Instant;

use crate::net::NodeId;

/// The type configs of a node's groups: nodes numbered by [`NodeId`],
/// `BasicNode`s, `u64` terms.
pub(crate) trait GroupConfig:
    RaftTypeConfig<NodeId = NodeId, Node = BasicNode, Term = u64>
{
}

impl<C> GroupConfig for C where C: RaftTypeConfig<NodeId = NodeId, Node = BasicNode, Term = u64> {}

/// The metrics of a group.
pub(crate) type Metrics<C> = RaftMetrics<C>;

/// A group's metrics as they change.
pub(crate) type MetricsWatch<C> = WatchReceiverOf<C, RaftMetrics<C>>;

/// A group's state, leader, vote and membership as they change: unlike
/// [`MetricsWatch`], not woken at every turn of openraft's loop.
pub(crate) type ServerMetricsWatch<C> = WatchReceiverOf<C, openraft::metrics::RaftServerMetrics<C>>;

/// Whether the metrics say `me` leads.
pub(crate) fn leads_now<C: GroupConfig>(m: &Metrics<C>, me: NodeId) -> bool {
    m.state == ServerState::Leader && m.current_leader == Some(me)
}

/// The last log index once every entry submitted before this call is in
/// the log. openraft's core takes requests in order and appends an entry
/// before it takes the next request, so once a request sent after them is
/// answered the entries are in; and every metrics report made after that
/// answer shows them. A second request makes the core report soon (it
/// reports at the top of each loop) rather than at its next tick.
pub(crate) async fn held_at<C, SM>(
    raft: &Raft<C, SM>,
    metrics: &mut MetricsWatch<C>,
) -> Result<Option<u64>, String>
where
    C: GroupConfig,
    SM: RaftStateMachine<C>,
{
    let stopped = |e: openraft::error::Fatal<C>| format!("the group stopped: {e}");
    raft.with_raft_state(|_| ()).await.map_err(stopped)?;
    metrics.borrow_and_update();
    raft.with_raft_state(|_| ()).await.map_err(stopped)?;
    metrics
        .changed()
        .await
        .map_err(|_| "the group stopped".to_string())?;
    let last = metrics.borrow_and_update().last_log_index;
    Ok(last)
}

/// The voter to hand off to once it has matched the leader's whole log
/// (at least up to `held_at`, where the log stopped growing, and the
/// leader applied it, so nothing is in flight): `to` itself, or any
/// caught-up voter.
pub(crate) fn caught_up<C: GroupConfig>(
    m: &Metrics<C>,
    held_at: Option<u64>,
    to: Option<NodeId>,
    voters: &[NodeId],
) -> Option<NodeId> {
    let last = m.last_log_index?;
    if Some(last) < held_at {
        return None;
    }
    if m.last_applied.as_ref().map(|l| l.index()) != Some(last) {
        return None;
    }
    let replication = m.replication.as_ref()?;
    let matched = |id: &NodeId| {
        replication
            .get(id)
            .and_then(|l| l.as_ref())
            .map(|l| l.index)
            == Some(last)
    };
    match to {
        Some(to) => matched(&to).then_some(to),
        None => voters.iter().copied().find(matched),
    }
}

/// Wait (bounded by `limit`) until a voter has matched the log up to where
/// it stopped: the target.
pub(crate) async fn wait_caught_up<C: GroupConfig>(
    metrics: &mut MetricsWatch<C>,
    held_at: Option<u64>,
    to: Option<NodeId>,
    voters: &[NodeId],
    limit: Duration,
) -> Result<NodeId, String> {
    tokio::time::timeout(limit, async {
        loop {
            if let Some(target) = caught_up(&metrics.borrow_and_update(), held_at, to, voters) {
                return Ok(target);
            }
            if metrics.changed().await.is_err() {
                return Err("the group stopped".to_string());
            }
        }
    })
    .await
    .map_err(|_| format!("no follower matched the log within {limit:?}"))?
}

/// How long ago this node's vote last changed (for a leader: when it was
/// elected; a leader does not refresh it). A leader refuses every vote
/// request while this is below a lease.
async fn vote_age<C, SM>(raft: &Raft<C, SM>) -> Result<Duration, String>
where
    C: GroupConfig,
    SM: RaftStateMachine<C>,
{
    let changed = raft
        .with_raft_state(|state| state.vote_last_modified())
        .await
        .map_err(|e| format!("the group stopped: {e}"))?;
    Ok(changed.map(|at| at.elapsed()).unwrap_or(Duration::MAX))
}

/// Wait until this leader's own vote is at least `lease` old: before that
/// it refuses every vote request, so a target asked to campaign sooner
/// would duel with it instead of being granted at once.
pub(crate) async fn wait_out_own_lease<C, SM>(
    raft: &Raft<C, SM>,
    lease: Duration,
) -> Result<(), String>
where
    C: GroupConfig,
    SM: RaftStateMachine<C>,
{
    let age = vote_age(raft).await?;
    if age < lease {
        tokio::time::sleep(lease - age).await;
    }
    Ok(())
}

/// On the target of a hand-off from `from`: campaign until this node leads
/// or another new leader is known (the answer), bounded by `limit`. The
/// campaign is repeated every `retry`: the other voters grant only once
/// their lease ran out.
pub(crate) async fn campaign<C, SM>(
    raft: &Raft<C, SM>,
    me: NodeId,
    from: NodeId,
    limit: Duration,
    retry: Duration,
) -> Result<NodeId, String>
where
    C: GroupConfig,
    SM: RaftStateMachine<C>,
{
    let mut metrics = raft.metrics();
    let start_term = metrics.borrow_watched().current_term;
    let deadline = Instant::now() + limit;
    loop {
        let (state, leader, term) = {
            let m = metrics.borrow_and_update();
            (m.state, m.current_leader, m.current_term)
        };
        if state == ServerState::Leader && leader == Some(me) {
            return Ok(me);
        }
        if let Some(other) = leader.filter(|l| *l != me && *l != from && term > start_term) {
            return Ok(other);
        }
        if Instant::now() >= deadline {
            return Err(format!("node {me} was not elected (leader {leader:?})"));
        }
        if state != ServerState::Leader {
            raft.trigger()
                .elect(false)
                .await
                .map_err(|e| format!("the group stopped: {e}"))?;
        }
        let until = (Instant::now() + retry).min(deadline);
        while let Ok(changed) = tokio::time::timeout_at(until, metrics.changed()).await {
            if changed.is_err() {
                return Err("the group stopped".into());
            }
            if leads_now(&metrics.borrow_and_update(), me) {
                return Ok(me);
            }
        }
    }
}
