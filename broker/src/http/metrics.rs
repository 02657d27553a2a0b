//! One `/metrics` scrape: the node's figures gathered into plain values
//! (each queue's lock held for one `stats()` call, never two at once, never
//! across an await), then encoded in the Prometheus text format: the
//! families with a sample per queue or Raft group by `labelled_text.rs`,
//! the node-wide ones by `prometheus-client` through a [`Collector`]. Nothing
//! is registered per queue, so a deleted queue simply disappears from the
//! next scrape.
//!
//! `/metrics/node` is the same without the per-queue and per-group
//! families: a few kilobytes at any queue count, for a scraper that polls
//! often (10,000 quorum queues make `/metrics` about 8 MB).
//!
//! Names: `ramqp_*` for the broker's own, `process_*` as Prometheus'
//! client libraries name them. Counters are per process: they restart from
//! 0 when the node restarts (Prometheus' `rate` handles that).

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use super::labelled_text::{family, label_set, Kind};
use super::node_families::{
    counter, encode_fabric, encode_process, encode_store, gauge, histogram,
};
use super::{FabricView, Sources};
use crate::engine::EngineCounts;
use crate::latency::LatencySnapshot;
use crate::queue::QueueStats;
use crate::raft::RaftStatus;

/// The `Content-Type` of the answer.
pub(super) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Everything one scrape shows, read before any of it is encoded.
struct Scrape {
    queues: Vec<QueueStats>,
    /// Per open quorum queue: its index in `queues`, its Raft figures and
    /// the leader changes this replica saw.
    groups: Vec<(usize, RaftStatus, u64)>,
    /// Of those, the groups this node leads quietly (no heartbeats).
    quiet_leaders: u64,
    /// Replication streams' waits for a lost peer
    /// (`QuorumNode::lost_peer_waits`).
    lost_peer_waits: crate::quorum::LostPeerWaits,
    /// Leaderships handed back to their preferred node
    /// (`QuorumNode::leader_rebalance`).
    rebalance: crate::quorum::LeaderRebalance,
    /// Take-overs from leaders whose node was found not running.
    successions: u64,
    /// Campaigns the moment a lost leader's lease ran out.
    lease_campaigns: u64,
    meta: RaftStatus,
    commit_latency: LatencySnapshot,
    store: store_redb::BatchStatsSnapshot,
    engine: EngineCounts,
    fabric: Option<FabricView>,
    ready: bool,
    disk_alarm: bool,
    resource_alarm: bool,
    resident_body_bytes: u64,
    login_failures: u64,
    node_id: u64,
}

/// What a scrape shows: everything, or the node-wide families only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// `/metrics`: with a sample per queue and per Raft group.
    PerQueue,
    /// `/metrics/node`: the node-wide families (group counts included).
    Node,
}

fn gather(sources: &Sources, scope: Scope) -> Scrape {
    let quorum = sources.quorum.queues();
    let mut queues = Vec::new();
    if scope == Scope::PerQueue {
        queues = sources.node.transient_queues();
        queues.reserve(quorum.len());
    }
    let mut groups = Vec::with_capacity(quorum.len());
    let mut quiet_leaders = 0;
    for queue in &quorum {
        groups.push((queues.len(), queue.raft_status(), queue.leader_changes()));
        quiet_leaders += u64::from(queue.is_quiet());
        if scope == Scope::PerQueue {
            queues.push(crate::queue::Queue::stats(queue.as_ref()));
        }
    }
    Scrape {
        queues,
        groups,
        quiet_leaders,
        lost_peer_waits: sources.quorum.lost_peer_waits(),
        rebalance: sources.quorum.leader_rebalance(),
        successions: sources.quorum.successions(),
        lease_campaigns: sources.quorum.lease_campaigns(),
        meta: sources.metadata.raft_status(),
        commit_latency: sources.quorum.commit_latency(),
        store: sources.quorum.store_stats(),
        engine: sources.engine.snapshot(),
        fabric: sources.node.fabric(),
        ready: super::health::readiness(sources).is_ok(),
        disk_alarm: sources.quorum.disk_alarm().is_some(),
        resource_alarm: sources.quorum.resource_alarm().is_some(),
        resident_body_bytes: sources.quorum.resident_bytes(),
        login_failures: sources.node.login_failures(),
        node_id: sources.node_id,
    }
}

/// Encode one scrape of the node in the Prometheus text format.
pub(super) fn render(sources: &Arc<Sources>, scope: Scope) -> Result<String, fmt::Error> {
    let started = std::time::Instant::now();
    let scrape = Arc::new(gather(sources, scope));
    let mut text = if scope == Scope::PerQueue {
        // The last scrape's size and a little more, so the text (4.5 MB
        // with 10,000 queues) is not copied while it grows.
        let last = sources.last_scrape_bytes.load(Ordering::Relaxed);
        let mut text = String::with_capacity((last + last / 8).max(64 * 1024));
        // The families with a sample per queue or group, by hand; the few
        // node-wide ones through prometheus-client.
        write_queues(&mut text, &scrape);
        write_groups(&mut text, &scrape);
        text
    } else {
        String::with_capacity(16 * 1024)
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(NodeCollector(scrape)));
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)?;
    tracing::debug!(bytes = text.len(), took = ?started.elapsed(), ?scope, "metrics scrape");
    if scope == Scope::PerQueue {
        sources
            .last_scrape_bytes
            .store(text.len(), Ordering::Relaxed);
    }
    Ok(text)
}

/// Encodes the node-wide families of one gathered scrape.
struct NodeCollector(Arc<Scrape>);

impl fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeCollector")
            .field("queues", &self.0.queues.len())
            .finish_non_exhaustive()
    }
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let scrape = &self.0;
        encode_raft(&mut encoder, scrape)?;
        encode_node(&mut encoder, scrape)?;
        encode_store(&mut encoder, &scrape.store)?;
        if let Some(fabric) = &scrape.fabric {
            encode_fabric(&mut encoder, fabric)?;
        }
        encode_process(&mut encoder)
    }
}

fn write_queues(out: &mut String, scrape: &Scrape) {
    type Figure = (&'static str, &'static str, Kind, fn(&QueueStats) -> u64);
    const FIGURES: [Figure; 8] = [
        (
            "ramqp_queue_ready_messages",
            "Messages waiting to be delivered.",
            Kind::Gauge,
            |q| q.ready as u64,
        ),
        (
            "ramqp_queue_unacknowledged_messages",
            "Messages delivered and not yet settled.",
            Kind::Gauge,
            |q| q.unsettled as u64,
        ),
        (
            "ramqp_queue_bytes",
            "Bytes of the messages held (waiting and unsettled).",
            Kind::Gauge,
            |q| q.bytes,
        ),
        (
            "ramqp_queue_paged_bytes",
            "Bytes of held messages kept in segment files, not in memory (quorum queues only).",
            Kind::Gauge,
            |q| q.paged_bytes,
        ),
        (
            "ramqp_queue_consumers",
            "Consumers attached.",
            Kind::Gauge,
            |q| q.consumers as u64,
        ),
        (
            "ramqp_queue_published_messages",
            "Messages taken into the queue (a quorum queue: enqueues this replica applied).",
            Kind::Counter,
            |q| q.published_total,
        ),
        (
            "ramqp_queue_delivered_messages",
            "Deliveries to consumers by this node (redeliveries count again).",
            Kind::Counter,
            |q| q.delivered_total,
        ),
        (
            "ramqp_queue_acknowledged_messages",
            "Deliveries settled accepted or rejected at this node.",
            Kind::Counter,
            |q| q.acknowledged_total,
        ),
    ];
    // Each queue's label set is escaped once, for all eight families.
    let labels: Vec<String> = scrape
        .queues
        .iter()
        .map(|q| label_set("address", &q.address))
        .collect();
    for (name, help, kind, value) in FIGURES {
        // A transient queue never pages: no series rather than a 0 for
        // each (a sample less per queue in a large scrape).
        let paging_only = name == "ramqp_queue_paged_bytes";
        let rows = scrape
            .queues
            .iter()
            .zip(&labels)
            .filter(|(q, _)| !paging_only || q.address.starts_with("/quorum/"))
            .map(|(q, l)| (l.as_str(), value(q)));
        family(out, name, help, kind, rows);
    }
}

/// The per-group Raft families: the metadata group, then each quorum
/// queue's group.
fn write_groups(out: &mut String, scrape: &Scrape) {
    type Figure = (&'static str, &'static str, fn(&RaftStatus) -> u64);
    const FIGURES: [Figure; 5] = [
        (
            "ramqp_raft_term",
            "The Raft term this node is in, per group.",
            |s| s.term,
        ),
        (
            "ramqp_raft_last_log_index",
            "The last index in this node's Raft log, per group.",
            |s| s.last_log_index.unwrap_or(0),
        ),
        (
            "ramqp_raft_applied_index",
            "The last Raft log index this node applied, per group.",
            |s| s.applied_index.unwrap_or(0),
        ),
        (
            "ramqp_raft_leading",
            "1 where this node leads the group.",
            |s| u64::from(s.leading),
        ),
        (
            "ramqp_raft_leader_known",
            "1 where this node knows the group's leader.",
            |s| u64::from(s.leader.is_some()),
        ),
    ];
    let meta = label_set("group", "$meta");
    let labels: Vec<String> = scrape
        .groups
        .iter()
        .map(|(at, _, _)| {
            let address = scrape.queues.get(*at).map_or("", |q| q.address.as_str());
            label_set("group", address)
        })
        .collect();
    let rows = || {
        std::iter::once((meta.as_str(), &scrape.meta)).chain(
            scrape
                .groups
                .iter()
                .zip(&labels)
                .map(|((_, status, _), l)| (l.as_str(), status)),
        )
    };
    for (name, help, value) in FIGURES {
        family(
            out,
            name,
            help,
            Kind::Gauge,
            rows().map(|(l, s)| (l, value(s))),
        );
    }
    family(
        out,
        "ramqp_raft_commit_index",
        "The commit index, on the group's leader only: the highest log index a majority of the voters hold.",
        Kind::Gauge,
        rows().filter_map(|(l, s)| s.commit_index.map(|c| (l, c))),
    );
    family(
        out,
        "ramqp_raft_leader_changes",
        "Changes of a quorum queue group's leader this replica saw since it opened.",
        Kind::Counter,
        scrape
            .groups
            .iter()
            .zip(&labels)
            .map(|((_, _, changes), l)| (l.as_str(), *changes)),
    );
}

fn encode_raft(encoder: &mut DescriptorEncoder, scrape: &Scrape) -> fmt::Result {
    gauge(
        encoder,
        "ramqp_raft_groups",
        "Quorum queue Raft groups open on this node.",
        scrape.groups.len() as u64,
    )?;
    gauge(
        encoder,
        "ramqp_raft_groups_leading",
        "Quorum queue Raft groups this node leads.",
        scrape.groups.iter().filter(|g| g.1.leading).count() as u64,
    )?;
    gauge(
        encoder,
        "ramqp_raft_groups_quiet",
        "Quorum queue Raft groups this node leads quietly: idle, every live voter up to date, no heartbeats sent.",
        scrape.quiet_leaders,
    )?;
    let waits = &scrape.lost_peer_waits;
    counter(
        encoder,
        "ramqp_raft_lost_peer_waits",
        "Replication streams and heartbeats of this node's quorum groups that waited for a peer whose node was lost, instead of failing and being retried.",
        waits.started,
    )?;
    counter(
        encoder,
        "ramqp_raft_lost_peer_waits_woken",
        "Of those waits, the ones that ended because a lost node was heard again (the others ran out, or their stream was cancelled).",
        waits.woken,
    )?;
    gauge(
        encoder,
        "ramqp_raft_lost_peer_waits_open",
        "Replication streams and heartbeats waiting now for a lost peer's node.",
        waits.open,
    )?;
    counter(
        encoder,
        "ramqp_raft_leaderships_rebalanced",
        "Quorum groups this node led and handed back to their preferred leader (the replica set's first node) once that node was up and caught up.",
        scrape.rebalance.moved,
    )?;
    counter(
        encoder,
        "ramqp_raft_leaderships_rebalance_failed",
        "Of those hand-backs, the ones that did not complete (this node kept leading).",
        scrape.rebalance.failed,
    )?;
    counter(
        encoder,
        "ramqp_raft_successions",
        "Elections started at once by a replica here, the group's successor, because its leader's node was found not running (nothing listening at its address).",
        scrape.successions,
    )?;
    counter(
        encoder,
        "ramqp_raft_lease_campaigns",
        "Elections started by a replica here, the group's successor, the moment its lost leader's lease ran out (a leader that went silent: not found not running).",
        scrape.lease_campaigns,
    )?;
    histogram(
        encoder,
        "ramqp_raft_commit_latency_seconds",
        "Time from proposing a publish entry to its commit, on the leader.",
        &scrape.commit_latency,
    )
}

fn encode_node(encoder: &mut DescriptorEncoder, scrape: &Scrape) -> fmt::Result {
    gauge(encoder, "ramqp_node_id", "This node's id.", scrape.node_id)?;
    gauge(
        encoder,
        "ramqp_ready",
        "1 while the node is ready (as /readyz).",
        u64::from(scrape.ready),
    )?;
    gauge(
        encoder,
        "ramqp_disk_alarm",
        "1 while free disk space or the data size is past its limit.",
        u64::from(scrape.disk_alarm),
    )?;
    gauge(
        encoder,
        "ramqp_resource_alarm",
        "1 while any resource limit (disk, data size, memory) is past: publishers are held back.",
        u64::from(scrape.resource_alarm),
    )?;
    gauge(
        encoder,
        "ramqp_quorum_resident_body_bytes",
        "Bytes of quorum queue message bodies kept in memory.",
        scrape.resident_body_bytes,
    )?;
    let e = &scrape.engine;
    gauge(
        encoder,
        "ramqp_connections",
        "AMQP connections open.",
        e.connections_open,
    )?;
    counter(
        encoder,
        "ramqp_connections_opened",
        "AMQP connections accepted.",
        e.connections_total,
    )?;
    gauge(
        encoder,
        "ramqp_sessions",
        "AMQP sessions open.",
        e.sessions_open,
    )?;
    counter(
        encoder,
        "ramqp_sessions_begun",
        "AMQP sessions begun.",
        e.sessions_total,
    )?;
    counter(
        encoder,
        "ramqp_login_failures",
        "Failed SASL logins.",
        scrape.login_failures,
    )
}
