//! Following a quorum queue's leadership: a node that becomes leader feeds
//! its dispatcher from the replicated index (`feed.rs`), one that stops leading drops
//! it; the watcher task also asks openraft for the snapshots the state
//! machine wants (`compaction.rs`) and counts the leader changes it sees.
//!
//! Leading here means more than openraft's `ServerState::Leader`: a
//! leader that has had no acknowledgement from a quorum for an election
//! time-out (`election_timeout_max`) stops serving (check-quorum, which
//! openraft lacks). Cut off from the other replicas it cannot commit
//! anything, while they elect a new leader; serving on would keep its
//! clients waiting on publishes that time out and consumers that get
//! nothing, instead of sending their links to the new leader.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use openraft::ServerState;

use super::consumer_handover::start_leading;
use super::dead_letter_outbox::DeadLetterStart;
use super::quiet::Quiet;
use super::state_machine::Shared;
use super::types::QueueRaftHandle;
use crate::codec::definitions::condition;
use crate::net::NodeId;
use crate::queue::QueueEventKind;
use crate::raft::leadership::Metrics;
use openraft::async_runtime::watch::WatchReceiver;

use super::types::QueueRaft;

/// This group's metrics.
type QueueMetrics = Metrics<QueueRaft>;

/// Whether the metrics say this node leads.
/// `Some(last log index)` while this node leads, as openraft reports it
/// now, and a quorum acknowledged it within the check-quorum window;
/// `None` otherwise.
pub(super) fn leadership(raft: &QueueRaftHandle, node_id: NodeId, quiet: &Quiet) -> Option<u64> {
    let window = raft.config().election_timeout_max;
    let m = raft.metrics();
    let m = m.borrow_watched();
    leading_with_quorum(&m, node_id, window, quiet)
}

/// The rule behind [`leadership`]: a leader whose quorum's last
/// acknowledgement is older than `window_ms` does not count. openraft
/// reports the age at every turn of its loop (a leader's turns at least
/// once a heartbeat interval: `follower_tick.rs` triggers its
/// heartbeats), and a serving leader's watcher reads it at most
/// [`SERVING_RECHECK`] later, so it is at most that stale. A leader alone in
/// its group acknowledges itself; one just elected has no figure yet and
/// counts (its votes were the acknowledgement). A quiet leader counts
/// while its quiet stamp is within the window (`quiet.rs`). And a leader
/// counts only once it has applied an entry of its own term
/// ([`applied_own_term`]).
fn leading_with_quorum(
    m: &QueueMetrics,
    node_id: NodeId,
    window_ms: u64,
    quiet: &Quiet,
) -> Option<u64> {
    let leads = m.state == ServerState::Leader && m.current_leader == Some(node_id);
    (leads && heard_within(m, window_ms, quiet) && applied_own_term(m, node_id))
        .then(|| m.last_log_index.unwrap_or(0))
}

/// Whether a quorum acknowledged this leader within `window_ms`.
fn heard_within(m: &QueueMetrics, window_ms: u64, quiet: &Quiet) -> bool {
    // Reported at every turn of openraft's loop (0.10 keeps the figure,
    // deprecated for `last_quorum_acked`, and reports 0 for a leader alone).
    #[allow(deprecated)]
    let acked = m.millis_since_quorum_ack.is_none_or(|ms| ms <= window_ms);
    acked || quiet.vouched_within(window_ms)
}

/// Whether this leader has applied an entry of its own term (the blank
/// entry openraft appends at its election): only then has it applied
/// every entry of the earlier terms. Before, its index may still hold
/// messages whose settlement is in its log but not yet applied (entries
/// of an earlier term are known committed only once one of the new
/// term's is, and a restarted node applies only up to the commit it
/// last wrote), and feeding from it delivered settled messages again: a
/// 3-node cluster restarted on a release's data handed out 10 messages
/// the release had settled (`test_release_data.py`, under load).
///
/// A new group's first leader need not wait: its log is the initial
/// membership (index 0) and its own blank entry (index 1), neither of
/// which carries a message, so nothing unapplied can be missing from its
/// index. Waiting there cost every new queue a commit round before it
/// served (10,000 queues were created in 68-78 s instead of 47-51 s).
fn applied_own_term(m: &QueueMetrics, node_id: NodeId) -> bool {
    let own = m.last_applied.as_ref().is_some_and(|applied| {
        let by = applied.committed_leader_id();
        by.term == m.current_term && by.node_id == node_id
    });
    own || m
        .last_log_index
        .is_none_or(|last| last <= FIRST_LEADER_BLANK_INDEX)
}

/// Where a new group's first leader writes its blank entry: openraft
/// writes the initial membership at index 0.
const FIRST_LEADER_BLANK_INDEX: u64 = 1;

/// Whether openraft says this node leads, but without a quorum's recent
/// acknowledgement (so [`leadership`] says no).
pub(super) fn leads_without_quorum(
    m: &QueueMetrics,
    node_id: NodeId,
    window_ms: u64,
    quiet: &Quiet,
) -> bool {
    m.state == ServerState::Leader
        && m.current_leader == Some(node_id)
        && !heard_within(m, window_ms, quiet)
}

/// Switch the queue to leading or not: a node that becomes leader builds
/// its dispatcher from the replicated index; one that stops leading drops
/// it. Its routed consumers (links of this node's clients) are parked for
/// their routed queue to move to the new leader; the others (consumers of
/// forwarded links) are told `Closed`, which the forwarding server ships
/// back to their node, where they follow the leader the same way.
/// Idempotent; called by the watchers and before serving a link.
/// `leading` is `Some(last log index)` when this node leads: every message
/// of the log up to there may have been delivered by an earlier leader;
/// `term` is the Raft term it leads in (see `consumer_handover.rs`).
pub(super) fn set_leading(
    shared: &Arc<Shared>,
    leading: Option<u64>,
    term: u64,
    node_id: NodeId,
    queue: &str,
) {
    let mut inner = shared.lock();
    if let (Some(last_log_index), false) = (leading, inner.leading) {
        inner.leading = true;
        start_leading(shared, &mut inner, term);
        inner.start_feed(last_log_index);
        inner.refill(queue);
        super::sweep_list::list_if_wanted(shared, &mut inner);
        shared.leading_flips.notify_one();
        tracing::info!(%queue, node_id, "leading");
    } else if leading.is_none() && inner.leading {
        inner.leading = false;
        inner.stop_feed();
        for consumer in inner.dispatcher.clear() {
            if inner.routed.remove(&consumer.id) {
                inner.orphans.insert(
                    consumer.id,
                    (consumer.delivery_count, consumer.credit_limit),
                );
                continue;
            }
            consumer.sink.send(
                consumer.tag,
                QueueEventKind::Closed {
                    condition: condition::DETACH_FORCED,
                    description: format!("{queue}: leadership moved away from this node"),
                },
            );
        }
        shared.leading_flips.notify_one();
        tracing::info!(%queue, node_id, "no longer leading");
    }
}

/// Follow the group's leadership changes as openraft reports them, ask
/// openraft for the snapshots the state machine wants (`compaction`), and
/// start the dead-letter sender once the outbox first gets an entry
/// (`dead_letter_outbox.rs`). Ends when openraft closes the group's
/// metrics: its core ended. If it quit on an error, the node is told
/// (`node_faults.rs`).
///
/// A plain function returning an `async move` block: an `async fn` keeps
/// its arguments twice in its future (as arguments and as the locals they
/// are moved into), ~100 bytes more in a task every replica keeps.
#[allow(clippy::manual_async_fn)] // on purpose, see above
pub(super) fn watch_leadership(
    raft: QueueRaftHandle,
    shared: Arc<Shared>,
    node_id: NodeId,
    queue: String,
    mut dead_letters: Option<DeadLetterStart>,
) -> impl std::future::Future<Output = ()> + Send {
    async move {
        // Entries already in the outbox (a reopened replica) start it now.
        DeadLetterStart::start_if_wanted(&mut dead_letters, &raft, &shared);
        let mut metrics = raft.metrics();
        let mut server = raft.server_metrics();
        let window = raft.config().election_timeout_max;
        let mut cut_off = false;
        let mut known_leader = None;
        'group: loop {
            // Something moved (a leader's metrics, a follower's state, leader
            // or vote): back on the node's visit list (`visits.rs`).
            shared.quiet.wake();
            let (leading, term, log_applied, without_quorum) = {
                let m = metrics.borrow_and_update();
                if m.current_leader.is_some() && m.current_leader != known_leader {
                    known_leader = m.current_leader;
                    shared.leader_changes.fetch_add(1, Ordering::Relaxed);
                }
                (
                    leading_with_quorum(&m, node_id, window, &shared.quiet),
                    m.current_term,
                    m.last_applied.map(|l| l.index) >= m.last_log_index,
                    #[allow(deprecated)]
                    leads_without_quorum(&m, node_id, window, &shared.quiet)
                        .then_some(m.millis_since_quorum_ack)
                        .flatten(),
                )
            };
            match (without_quorum, cut_off) {
                (Some(ms), false) => tracing::warn!(
                    %queue,
                    node_id,
                    since_quorum_ack_ms = ms,
                    quiet = %shared.quiet.describe(),
                    "leader without a quorum's acknowledgement: stops serving"
                ),
                (None, true) if leading.is_some() => {
                    tracing::info!(%queue, node_id, "quorum acknowledgement back: serving again");
                }
                _ => {}
            }
            cut_off = without_quorum.is_some();
            set_leading(&shared, leading, term, node_id, &queue);
            if leading.is_some() {
                shared.lock().confirm_missing(&queue, log_applied);
            }
            let state = metrics.borrow_watched().state;
            // A new candidate needs openraft's tick, which a quiet follower
            // goes without (`follower_tick.rs`).
            super::follower_tick::tick_if_candidate(&raft, state);
            let wait = Wait::of(leading.is_some(), state);
            if wait != Wait::EveryTurn {
                drop(server.borrow_and_update());
            }
            // The same task serves the state machine's snapshot requests and
            // starts the dead-letter sender: it holds the Raft handle and ends
            // with the group. The wait for the next turn lives across them:
            // begun again, it would miss a server change it had taken before
            // its full metrics came. It is boxed, one allocation a turn: its
            // serving wait (a timer beside the server metrics) inline was a
            // third of the future every replica keeps.
            let mut turn = Box::pin(next_turn(&mut metrics, &mut server, wait));
            loop {
                tokio::select! {
                    turned = &mut turn => {
                        if turned.is_err() {
                            break 'group;
                        }
                        break;
                    }
                    () = shared.dead_letter_wake.notified(), if dead_letters.is_some() => {
                        DeadLetterStart::start_if_wanted(&mut dead_letters, &raft, &shared);
                    }
                    () = shared.snapshot_wanted.wait() => {
                        // Boxed: rare, and inline its ~570-byte future made this
                        // task, which every replica keeps, nearly twice as large.
                        if let Err(e) = Box::pin(raft.trigger().snapshot()).await {
                            tracing::debug!(queue, error = %e, "quorum queue: snapshot request refused");
                        }
                    }
                }
            }
        }
        let fault = crate::raft::core_fault(&metrics.borrow_watched());
        if let (Some(reason), Some(faults)) = (fault, shared.core_faults.get()) {
            super::node_faults::report(faults, &queue, reason);
        }
    }
}

/// Which of openraft's passes the watcher waits for. openraft 0.10 sends
/// the full metrics at every pass of a group's core loop: a tick every
/// `heartbeat_interval * 13 / 64` where ticks run, and 4-5 passes per
/// publish on a leader (one node: 4.4). Following each of them cost a
/// serving leader a wake-up of this task and a check-quorum evaluation
/// per pass, 7.0k instructions per publish of the 168k a one-node publish
/// cost (`docs/benchmarks.md`, "Fewer wake-ups and rows per quorum
/// publish"), for a figure (the quorum acknowledgement's age) that matters on
/// a scale of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Neither leading nor openraft's leader: a change of state, leader
    /// or vote (the server metrics, sent only when they change).
    ServerChange,
    /// openraft's leader, not serving yet (its own term's entry not
    /// applied) or cut off: every pass, to serve the moment it may.
    EveryTurn,
    /// Serving: a change of state, leader or vote at once; any other pass
    /// at most once a [`SERVING_RECHECK`]. A leader cut off from its
    /// quorum stops serving that much later than the pass that first
    /// shows its acknowledgement too old (the window is seconds).
    Serving,
}

impl Wait {
    fn of(serving: bool, state: ServerState) -> Wait {
        match (serving, state.is_leader()) {
            (true, _) => Wait::Serving,
            (false, true) => Wait::EveryTurn,
            (false, false) => Wait::ServerChange,
        }
    }
}

/// How often a serving leader looks at passes of its core loop that
/// changed neither its state, its leader nor its vote.
const SERVING_RECHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// The next pass the watcher wants (see [`Wait`]); an error once the
/// group's core ended.
async fn next_turn(
    metrics: &mut crate::raft::MetricsWatch<QueueRaft>,
    server: &mut crate::raft::ServerMetricsWatch<QueueRaft>,
    wait: Wait,
) -> Result<(), openraft::async_runtime::watch::RecvError> {
    match wait {
        Wait::EveryTurn => metrics.changed().await,
        Wait::ServerChange => {
            server.changed().await?;
            // The full metrics are sent right after the server metrics,
            // in the same pass: read those.
            metrics.changed().await
        }
        Wait::Serving => {
            tokio::select! {
                changed = server.changed() => changed?,
                () = tokio::time::sleep(SERVING_RECHECK) => {}
            }
            metrics.changed().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn awake() -> Quiet {
        Quiet::default()
    }

    #[allow(deprecated)]
    fn leader_metrics(me: NodeId, since_ack: Option<u64>) -> QueueMetrics {
        let mut m = QueueMetrics::new_initial(me);
        m.state = ServerState::Leader;
        m.current_leader = Some(me);
        m.current_term = 3;
        m.last_log_index = Some(7);
        m.last_applied = Some(log_id(3, me, 7));
        m.millis_since_quorum_ack = since_ack;
        m
    }

    fn log_id(
        term: u64,
        node_id: NodeId,
        index: u64,
    ) -> openraft::LogId<openraft::impls::leader_id_adv::LeaderId<u64, NodeId>> {
        openraft::LogId::new(
            openraft::impls::leader_id_adv::LeaderId { term, node_id },
            index,
        )
    }

    #[test]
    fn a_new_leader_serves_once_it_applied_an_entry_of_its_term() {
        // Elected in term 3, its state machine still at an entry of term 2
        // (settlements of the old leader maybe among the rest): not yet.
        let mut m = leader_metrics(1, None);
        m.last_applied = Some(log_id(2, 2, 6));
        assert_eq!(leading_with_quorum(&m, 1, 3000, &awake()), None);
        assert!(!leads_without_quorum(&m, 1, 3000, &awake()));
        m.last_applied = None;
        assert_eq!(leading_with_quorum(&m, 1, 3000, &awake()), None);
        // Its blank entry applied: it serves.
        m.last_applied = Some(log_id(3, 1, 7));
        assert_eq!(leading_with_quorum(&m, 1, 3000, &awake()), Some(7));
    }

    #[test]
    fn a_new_groups_first_leader_serves_at_once() {
        // The initial membership (index 0) and its own blank entry (1):
        // no message anywhere in its log, nothing to wait for.
        let mut m = leader_metrics(1, None);
        m.current_term = 1;
        m.last_log_index = Some(1);
        m.last_applied = None;
        assert_eq!(leading_with_quorum(&m, 1, 3000, &awake()), Some(1));
        // One entry more (an earlier leader's blank, then this one's; or
        // a message): it waits for its own term's entry again.
        m.current_term = 2;
        m.last_log_index = Some(2);
        m.last_applied = Some(log_id(1, 2, 1));
        assert_eq!(leading_with_quorum(&m, 1, 3000, &awake()), None);
    }

    #[test]
    fn a_leader_serves_only_while_a_quorum_acknowledges_it() {
        assert_eq!(
            leading_with_quorum(&leader_metrics(1, Some(0)), 1, 3000, &awake()),
            Some(7)
        );
        assert_eq!(
            leading_with_quorum(&leader_metrics(1, Some(3000)), 1, 3000, &awake()),
            Some(7)
        );
        assert_eq!(
            leading_with_quorum(&leader_metrics(1, Some(3001)), 1, 3000, &awake()),
            None
        );
        assert!(leads_without_quorum(
            &leader_metrics(1, Some(3001)),
            1,
            3000,
            &awake()
        ));
        // Just elected: no figure yet, its votes were the acknowledgement.
        assert_eq!(
            leading_with_quorum(&leader_metrics(1, None), 1, 3000, &awake()),
            Some(7)
        );
    }

    #[test]
    fn only_a_leader_not_yet_serving_follows_every_turn() {
        assert_eq!(Wait::of(true, ServerState::Leader), Wait::Serving);
        assert_eq!(Wait::of(false, ServerState::Leader), Wait::EveryTurn);
        assert_eq!(Wait::of(false, ServerState::Follower), Wait::ServerChange);
        assert_eq!(Wait::of(false, ServerState::Candidate), Wait::ServerChange);
    }

    #[test]
    fn a_follower_never_leads_whatever_its_figures() {
        let mut m = leader_metrics(1, Some(0));
        m.state = ServerState::Follower;
        m.current_leader = Some(2);
        assert_eq!(leading_with_quorum(&m, 1, 3000, &awake()), None);
        assert!(!leads_without_quorum(&m, 1, 3000, &awake()));
    }
}
