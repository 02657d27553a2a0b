//! The broker's footprint at one moment: resident memory (VmRSS of one or
//! more processes, summed) and the bytes under its data directories (a
//! du-like recursive sum of file sizes). It knows nothing of AMQP or of how
//! the broker was started; the caller names the pids and the directories.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use ramqp_bench_compare::target::read_rss_kib;

/// Where the footprint is read from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched {
    /// Processes whose VmRSS is summed (one per cluster node).
    pub(crate) pids: Vec<u32>,
    /// Data directories whose file sizes are summed.
    pub(crate) data_dirs: Vec<PathBuf>,
}

/// One reading.
#[derive(Debug, Clone)]
pub(crate) struct Footprint {
    /// Sum of VmRSS over the pids (KiB); `None` if no pid could be read.
    pub(crate) rss_kib: Option<u64>,
    /// VmRSS of each pid, in the order given.
    pub(crate) rss_kib_per_pid: Vec<Option<u64>>,
    /// Sum of file sizes under the data dirs; `None` without any dir.
    pub(crate) data_dir_bytes: Option<u64>,
    /// The same, per directory.
    pub(crate) data_dir_bytes_per_dir: Vec<Option<u64>>,
}

impl Watched {
    /// Read every pid's VmRSS and walk every data dir now.
    pub(crate) fn sample(&self) -> Footprint {
        let rss_kib_per_pid: Vec<Option<u64>> = self
            .pids
            .iter()
            .map(|pid| read_rss_kib(&format!("/proc/{pid}/status")))
            .collect();
        let data_dir_bytes_per_dir: Vec<Option<u64>> =
            self.data_dirs.iter().map(|d| tree_bytes(d)).collect();
        Footprint {
            rss_kib: sum_known(&rss_kib_per_pid),
            rss_kib_per_pid,
            data_dir_bytes: sum_known(&data_dir_bytes_per_dir),
            data_dir_bytes_per_dir,
        }
    }

    /// Sample every `every` for `span` (at least once) and return all
    /// readings: after a drain, so a compaction that happens a few seconds
    /// later still shows in the last one.
    pub(crate) async fn sample_for(&self, span: Duration, every: Duration) -> Vec<Footprint> {
        let start = tokio::time::Instant::now();
        let mut readings = vec![self.sample()];
        let mut tick = tokio::time::interval_at(start + every, every);
        while start.elapsed() < span {
            tick.tick().await;
            readings.push(self.sample());
        }
        readings
    }
}

impl Footprint {
    /// As it goes into a result.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "rss_kib": self.rss_kib,
            "rss_kib_per_pid": self.rss_kib_per_pid,
            "data_dir_bytes": self.data_dir_bytes,
            "data_dir_bytes_per_dir": self.data_dir_bytes_per_dir,
        })
    }

    /// "RSS 123.4 MiB, data 56.7 MiB" for the human summary.
    pub(crate) fn line(&self) -> String {
        format!(
            "RSS {}, data {}",
            self.rss_kib
                .map_or("n/a".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
            self.data_dir_bytes.map_or("n/a".into(), |b| format!(
                "{:.1} MiB",
                b as f64 / (1024.0 * 1024.0)
            )),
        )
    }
}

/// The sum of the known values; `None` when none is known.
fn sum_known(values: &[Option<u64>]) -> Option<u64> {
    values
        .iter()
        .flatten()
        .copied()
        .reduce(|a, b| a.saturating_add(b))
}

/// Sum of the sizes of the regular files under `root` (symlinks are not
/// followed). Entries that vanish during the walk (a compaction deleting a
/// file) are skipped; `None` only when `root` itself cannot be read.
pub(crate) fn tree_bytes(root: &Path) -> Option<u64> {
    let meta = std::fs::symlink_metadata(root).ok()?;
    if meta.is_file() {
        return Some(meta.len());
    }
    let mut total = 0u64;
    let mut pending = vec![root.to_path_buf()];
    let mut first = true;
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(_) if !first => continue,
            Err(_) => return None,
        };
        first = false;
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_bytes_sums_nested_files() {
        let root = std::env::temp_dir().join(format!("depth-footprint-{}", std::process::id()));
        let nested = root.join("a").join("b");
        std::fs::create_dir_all(&nested).expect("create temp dirs");
        std::fs::write(root.join("one"), [0u8; 100]).expect("write");
        std::fs::write(nested.join("two"), [0u8; 23]).expect("write");
        let total = tree_bytes(&root);
        let missing = tree_bytes(&root.join("missing"));
        std::fs::remove_dir_all(&root).expect("remove temp dirs");
        assert_eq!(total, Some(123));
        assert_eq!(missing, None);
    }

    #[test]
    fn own_rss_is_readable() {
        let watched = Watched {
            pids: vec![std::process::id()],
            data_dirs: Vec::new(),
        };
        let f = watched.sample();
        assert!(f.rss_kib.is_some_and(|k| k > 100), "{f:?}");
        assert_eq!(f.data_dir_bytes, None);
    }
}
