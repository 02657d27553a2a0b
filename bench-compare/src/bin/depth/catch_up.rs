//! Watching a restarted follower catch up (rejoin mode): a task of its
//! own reads the follower's RSS and data dir size (and the leader's RSS)
//! every sample period from the restart on, so a reading never waits for a
//! slow `ramqp-ctl` answer; meanwhile `catch_up` asks the follower, through
//! `ramqp-ctl status`, for the queue's `ready` count and applied index and,
//! once it holds every message, asks the leader for its applied index: the
//! follower has caught up when the two are equal. Its stderr log says when
//! a streamed snapshot was installed. Also the helpers that turn the
//! readings into the result (peak, timeline, data dir layout).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use broker::admin::QueueStatus;
use ramqp_bench_compare::target::read_rss_kib;

use crate::cluster::Cluster;
use crate::footprint::tree_bytes;

/// A progress line while catching up this often.
const PRINT_EVERY: Duration = Duration::from_secs(2);
/// What the follower's log says once a streamed snapshot is in place
/// (`broker/src/quorum/snapshot_install.rs`).
const INSTALLED: &str = "quorum queue: snapshot installed";

/// How the catch-up ended.
pub(crate) struct CatchUp {
    pub(crate) caught_up: bool,
    pub(crate) outcome: String,
    pub(crate) listening_ms: Option<f64>,
    /// When the follower's log first showed the install (to one poll).
    pub(crate) installed_ms: Option<f64>,
    pub(crate) follower: Option<QueueStatus>,
    pub(crate) leader: Option<QueueStatus>,
    pub(crate) polls: u64,
    pub(crate) ctl_errors: u64,
    pub(crate) last_ctl_error: Option<String>,
}

/// Poll the restarted `follower` (every `every`) until it has caught up
/// with `leader`, exited, or `limit` passed since `t0`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn catch_up(
    cluster: &mut Cluster,
    follower: u64,
    leader: u64,
    address: &str,
    expected: usize,
    t0: Instant,
    limit: Duration,
    every: Duration,
    sampler: &Sampler,
) -> CatchUp {
    let mut c = CatchUp {
        caught_up: false,
        outcome: String::new(),
        listening_ms: None,
        installed_ms: None,
        follower: None,
        leader: None,
        polls: 0,
        ctl_errors: 0,
        last_ctl_error: None,
    };
    match cluster.listening(follower).await {
        Ok(at) => c.listening_ms = Some(ms(at - t0)),
        Err(e) => {
            c.outcome = format!("did not start: {e:#}");
            return c;
        }
    }
    let name = address.rsplit('/').next().unwrap_or(address).to_string();
    let deadline = t0 + limit;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut printed = Instant::now();
    loop {
        tick.tick().await;
        if let Err(e) = cluster.check_running(follower) {
            c.outcome = format!("the follower exited: {e:#}");
            return c;
        }
        if c.installed_ms.is_none() {
            if let Ok(path) = cluster.log_path(follower) {
                if log_says_installed(path, &name) {
                    c.installed_ms = Some(ms(t0.elapsed()));
                    eprintln!("depth: rejoin: node {follower} installed the streamed snapshot {:.1} s after the restart", t0.elapsed().as_secs_f64());
                }
            }
        }
        c.polls += 1;
        match cluster.queue(follower, address).await {
            Ok(q) => c.follower = q,
            Err(e) => {
                c.ctl_errors += 1;
                c.last_ctl_error = Some(format!("{e:#}"));
            }
        }
        let complete = c
            .follower
            .as_ref()
            .filter(|q| q.ready == expected && q.applied_index.is_some());
        if let Some(f) = complete {
            let applied = f.applied_index;
            match cluster.queue(leader, address).await {
                Ok(l) => {
                    let same = l.as_ref().is_some_and(|l| l.applied_index == applied);
                    c.leader = l;
                    if same {
                        c.caught_up = true;
                        c.outcome = "caught up".into();
                        return c;
                    }
                }
                Err(e) => {
                    c.ctl_errors += 1;
                    c.last_ctl_error = Some(format!("{e:#}"));
                }
            }
        }
        if printed.elapsed() >= PRINT_EVERY {
            printed = Instant::now();
            let last = sampler.last();
            eprintln!(
                "depth: rejoin: {:.1} s after the restart: node {follower} RSS {} MiB (peak {} MiB), data {} MiB, ready {:?}/{expected}, applied {:?}, leader applied {:?}",
                t0.elapsed().as_secs_f64(),
                mib(last.and_then(|s| s.rss_kib).map(|k| k * 1024)),
                mib(sampler.peak_kib().map(|k| k * 1024)),
                mib(last.and_then(|s| s.data_dir_bytes)),
                c.follower.as_ref().map(|q| q.ready),
                c.follower.as_ref().and_then(|q| q.applied_index),
                c.leader.as_ref().and_then(|q| q.applied_index),
            );
        }
        if Instant::now() >= deadline {
            c.outcome = format!("not caught up within {limit:?}");
            return c;
        }
    }
}

fn log_says_installed(path: &Path, queue_name: &str) -> bool {
    std::fs::read_to_string(path)
        .map(|log| {
            log.lines()
                .any(|l| l.contains(INSTALLED) && l.contains(queue_name))
        })
        .unwrap_or(false)
}

/// One reading of the rejoined follower (and of the leader).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
    /// Since the follower's restart.
    pub(crate) t_ms: f64,
    pub(crate) rss_kib: Option<u64>,
    pub(crate) data_dir_bytes: Option<u64>,
    pub(crate) leader_rss_kib: Option<u64>,
}

/// A task that reads the follower every `every` until stopped.
pub(crate) struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    task: JoinHandle<()>,
}

impl Sampler {
    pub(crate) fn start(
        t0: Instant,
        pid: u32,
        data_dir: PathBuf,
        leader_pid: u32,
        every: Duration,
    ) -> Sampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let out = samples.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let sample = Sample {
                    t_ms: ms(t0.elapsed()),
                    rss_kib: read_rss_kib(&format!("/proc/{pid}/status")),
                    data_dir_bytes: tree_bytes(&data_dir),
                    leader_rss_kib: read_rss_kib(&format!("/proc/{leader_pid}/status")),
                };
                out.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(sample);
            }
        });
        Sampler { samples, task }
    }

    fn last(&self) -> Option<Sample> {
        self.samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .copied()
    }

    fn peak_kib(&self) -> Option<u64> {
        peak(&self.samples.lock().unwrap_or_else(PoisonError::into_inner)).map(|p| p.0)
    }

    /// Stop sampling; every reading.
    pub(crate) fn stop(self) -> Vec<Sample> {
        self.task.abort();
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The highest RSS and when it was read.
pub(crate) fn peak(samples: &[Sample]) -> Option<(u64, f64)> {
    samples
        .iter()
        .filter_map(|s| s.rss_kib.map(|k| (k, s.t_ms)))
        .fold(None, |best, (k, t)| match best {
            Some((b, _)) if b >= k => best,
            _ => Some((k, t)),
        })
}

pub(crate) fn timeline(samples: &[Sample]) -> Value {
    json!({
        "samples_n": samples.len(),
        "t_ms": samples.iter().map(|s| s.t_ms).collect::<Vec<_>>(),
        "rss_kib": samples.iter().map(|s| s.rss_kib).collect::<Vec<_>>(),
        "data_dir_bytes": samples.iter().map(|s| s.data_dir_bytes).collect::<Vec<_>>(),
        "leader_rss_kib": samples.iter().map(|s| s.leader_rss_kib).collect::<Vec<_>>(),
    })
}

/// The data dir's bytes by kind (segments, the redb log, the rest) and
/// every file of at least 1 MiB by its path under `root`.
pub(crate) fn layout(root: &Path) -> Value {
    let (mut segments, mut log, mut other) = (0u64, 0u64, 0u64);
    let mut large = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let path = entry.path();
            if meta.is_dir() {
                pending.push(path);
                continue;
            }
            if meta.len() >= 1 << 20 {
                let name = path.strip_prefix(root).unwrap_or(&path);
                large.push(json!({ "path": name.display().to_string(), "bytes": meta.len() }));
            }
            if path.to_string_lossy().contains("/segments-") {
                segments += meta.len();
            } else if path.extension().is_some_and(|e| e == "redb") {
                log += meta.len();
            } else {
                other += meta.len();
            }
        }
    }
    json!({
        "total_bytes": segments + log + other,
        "segment_bytes": segments,
        "redb_bytes": log,
        "other_bytes": other,
        "files_of_1mib_or_more": large,
    })
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("n/a".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

/// Milliseconds with one decimal.
pub(crate) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_ms: f64, rss: Option<u64>) -> Sample {
        Sample {
            t_ms,
            rss_kib: rss,
            data_dir_bytes: None,
            leader_rss_kib: None,
        }
    }

    #[test]
    fn peak_is_the_first_highest_reading() {
        let s = [
            at(0.0, Some(5)),
            at(200.0, None),
            at(400.0, Some(9)),
            at(600.0, Some(9)),
            at(800.0, Some(3)),
        ];
        assert_eq!(peak(&s), Some((9, 400.0)));
        assert_eq!(peak(&[at(0.0, None)]), None);
    }

    #[test]
    fn the_install_line_is_found_for_its_queue_only() {
        let path = std::env::temp_dir().join(format!("depth-rejoin-log-{}", std::process::id()));
        std::fs::write(&path, "x INFO broker::quorum::snapshot_install: quorum queue: snapshot installed queue=/quorum/depth generation=1\n").expect("write");
        let (depth, other) = (
            log_says_installed(&path, "depth"),
            log_says_installed(&path, "orders"),
        );
        std::fs::remove_file(&path).expect("remove");
        assert!(depth && !other);
    }
}
