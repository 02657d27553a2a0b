//! The node-wide families of a `/metrics` scrape that need nothing but
//! their own source: the Raft log store's, the fabric's and the process's
//! figures, and the small helpers every node-wide family is written with
//! (through `prometheus-client`'s encoder). Knows nothing of queues or
//! groups; what a scrape gathers from them is `metrics.rs`'s.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::FabricView;
use crate::latency::LatencySnapshot;
use crate::process;

/// One (small) metric family through prometheus-client: its help and
/// type, then a sample per row.
pub(super) fn small_family<L: EncodeLabelSet, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    rows: impl IntoIterator<Item = (L, M)>,
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, metric) in rows {
        metric.encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge without labels.
pub(super) fn gauge<V>(encoder: &mut DescriptorEncoder, name: &str, help: &str, v: V) -> fmt::Result
where
    V: prometheus_client::encoding::EncodeGaugeValue,
{
    let family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(v).encode(family)
}

/// A counter without labels (the `_total` suffix is added).
pub(super) fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: u64,
) -> fmt::Result {
    let family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(v).encode(family)
}

/// A histogram without labels from per-bucket (not cumulative) counts.
pub(super) fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &LatencySnapshot,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    family.encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &h.buckets, None)
}

pub(super) fn encode_store(
    encoder: &mut DescriptorEncoder,
    s: &store_redb::BatchStatsSnapshot,
) -> fmt::Result {
    counter(
        encoder,
        "ramqp_store_commits",
        "Durable writes of the node's Raft log store: journal records and write transactions (one fsync each).",
        s.commits,
    )?;
    counter(
        encoder,
        "ramqp_store_journal_folds",
        "Folds of the Raft log store's append journal into its tables (one transaction each).",
        s.journal_folds,
    )?;
    counter(
        encoder,
        "ramqp_store_journal_direct_writes",
        "Journal records of the Raft log store written with O_DIRECT | O_DSYNC (no separate fsync); the rest were written and then synced.",
        s.journal_direct_writes,
    )?;
    counter(
        encoder,
        "ramqp_store_failed_commits",
        "Write transactions of the Raft log store that failed.",
        s.failed_commits,
    )?;
    counter(
        encoder,
        "ramqp_store_entries_written",
        "Raft log entries written, all groups.",
        s.entries,
    )?;
    counter(
        encoder,
        "ramqp_store_written_bytes",
        "Bytes of records written to the Raft log store (keys excluded).",
        s.bytes,
    )?;
    let buckets: Vec<(f64, u64)> = store_redb::COMMIT_TIME_BUCKETS_SECONDS
        .iter()
        .copied()
        .chain(std::iter::once(f64::INFINITY))
        .zip(s.commit_time_buckets.iter().copied())
        .collect();
    let commit_time = LatencySnapshot {
        sum_seconds: s.commit_time.as_secs_f64(),
        count: s.commits,
        buckets,
    };
    histogram(
        encoder,
        "ramqp_store_commit_duration_seconds",
        "Time of one durable write of the Raft log store (a journal record or a transaction), its fsync included.",
        &commit_time,
    )
}

pub(super) fn encode_fabric(encoder: &mut DescriptorEncoder, fabric: &FabricView) -> fmt::Result {
    let s = &fabric.stats;
    let counters = [
        (
            "ramqp_fabric_frames_sent",
            "Fabric frames (calls, answers, one-way messages) written.",
            s.frames_sent,
        ),
        (
            "ramqp_fabric_batches_sent",
            "Fabric batches written (one per HTTP/2 write).",
            s.batches_sent,
        ),
        (
            "ramqp_fabric_frames_received",
            "Fabric frames read.",
            s.frames_received,
        ),
        (
            "ramqp_fabric_batches_received",
            "Fabric batches read.",
            s.batches_received,
        ),
        (
            "ramqp_fabric_frames_dropped",
            "Fabric frames dropped on arrival (blocked peer, too large, malformed).",
            s.frames_dropped,
        ),
        (
            "ramqp_fabric_sent_bytes",
            "Envelope bytes (meta and payload) of the fabric frames written.",
            s.bytes_sent,
        ),
        (
            "ramqp_fabric_received_bytes",
            "Envelope bytes of the fabric frames read.",
            s.bytes_received,
        ),
        (
            "ramqp_fabric_calls_failed",
            "Fabric calls this node made that failed (unreachable, timed out, refused, or answered with an error).",
            s.calls_failed,
        ),
        (
            "ramqp_fabric_connects",
            "Outbound fabric streams opened (connections and reconnections).",
            s.connects,
        ),
        (
            "ramqp_fabric_inbound_refused",
            "Inbound fabric streams refused (wrong cluster, bad node id, blocked).",
            s.inbound_refused,
        ),
    ];
    for (name, help, value) in counters {
        counter(encoder, name, help, value)?;
    }
    small_family(
        encoder,
        "ramqp_fabric_peer_up",
        "1 while the fabric link to the peer is up.",
        MetricType::Gauge,
        fabric
            .peers
            .iter()
            .map(|(id, up)| ([("peer", id.to_string())], ConstGauge::new(u64::from(*up)))),
    )
}

pub(super) fn encode_process(encoder: &mut DescriptorEncoder) -> fmt::Result {
    if let Some(bytes) = process::resident_bytes() {
        gauge(
            encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            bytes,
        )?;
    }
    if let Some(seconds) = process::cpu_seconds() {
        let family = encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(seconds).encode(family)?;
    }
    if let Some(n) = process::open_files() {
        gauge(
            encoder,
            "process_open_fds",
            "Number of open file descriptors.",
            n,
        )?;
    }
    if let Some(n) = process::max_open_files() {
        gauge(
            encoder,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            n,
        )?;
    }
    Ok(())
}
