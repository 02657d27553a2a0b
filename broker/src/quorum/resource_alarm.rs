//! The node's resource alarm: raised while free disk space under the data
//! dir is below `min_free_disk_bytes`, the data dir holds more than
//! `max_data_bytes`, or the process's resident memory is above
//! `memory_high_watermark_bytes`. While it is raised, quorum queues on this
//! node grant publishers no new credit (`QuorumQueue::has_capacity`), so
//! publishing stops without a refusal or a false `accepted`; when it
//! clears, every publisher that waited is told there is room again.
//!
//! Consumers are never held back: draining is what frees the resources.
//! It must not know about queues beyond the sinks it wakes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::config::QuorumConfig;
use crate::process::resident_bytes;
use crate::queue::{QueueEventKind, Sink};

/// How often the resources are checked.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Whether publishing is held back, and who waits for it to end.
#[derive(Debug, Default)]
pub(crate) struct ResourceAlarm {
    raised: AtomicBool,
    reason: Mutex<Option<String>>,
    waiters: Mutex<Vec<(Sink, u64)>>,
}

impl ResourceAlarm {
    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// Why it is raised.
    pub(crate) fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Tell the publisher `(sink, tag)` when the alarm clears.
    pub(crate) fn wait(&self, sink: &Sink, tag: u64) {
        let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        if !waiters
            .iter()
            .any(|(s, t)| *t == tag && s.same_connection(sink))
        {
            waiters.push((sink.clone(), tag));
        }
    }

    /// Raise (with a reason) or clear the alarm; clearing wakes the waiters.
    pub(crate) fn set(&self, reason: Option<String>) {
        let raised = reason.is_some();
        let was = self.raised.swap(raised, Ordering::AcqRel);
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason.clone();
        match (was, reason) {
            (false, Some(reason)) => {
                tracing::warn!(%reason, "resource alarm: publishers to quorum queues are held back")
            }
            (true, None) => {
                tracing::info!("resource alarm cleared: publishing resumes");
                let waiters =
                    std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|p| p.into_inner()));
                for (sink, tag) in waiters {
                    sink.send(tag, QueueEventKind::Capacity);
                }
            }
            _ => {}
        }
    }
}

/// The limits the watcher checks (0: that check is off).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResourceLimits {
    pub(crate) min_free_disk_bytes: u64,
    pub(crate) max_data_bytes: u64,
    pub(crate) memory_high_watermark_bytes: u64,
}

impl ResourceLimits {
    pub(crate) fn from_config(config: &QuorumConfig) -> ResourceLimits {
        ResourceLimits {
            min_free_disk_bytes: config.min_free_disk_bytes,
            max_data_bytes: config.max_data_bytes,
            memory_high_watermark_bytes: config.memory_high_watermark_bytes,
        }
    }

    fn any(&self) -> bool {
        self.min_free_disk_bytes > 0
            || self.max_data_bytes > 0
            || self.memory_high_watermark_bytes > 0
    }
}

/// Check the resources every half second until `alarm` is dropped.
pub(crate) fn spawn_watcher(alarm: &Arc<ResourceAlarm>, dir: PathBuf, limits: ResourceLimits) {
    if !limits.any() {
        return;
    }
    let alarm: Weak<ResourceAlarm> = Arc::downgrade(alarm);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let dir = dir.clone();
            let reason = tokio::task::spawn_blocking(move || check(&dir, limits))
                .await
                .unwrap_or(None);
            let Some(alarm) = alarm.upgrade() else {
                return;
            };
            alarm.set(reason);
        }
    });
}

/// Why publishing should be held back now, if it should.
fn check(dir: &Path, limits: ResourceLimits) -> Option<String> {
    if limits.min_free_disk_bytes > 0 {
        if let Ok(stat) = rustix::fs::statvfs(dir) {
            let free = stat.f_bavail.saturating_mul(stat.f_frsize);
            if free < limits.min_free_disk_bytes {
                return Some(format!(
                    "free disk space under {} is {free} bytes, below min_free_disk_bytes {}",
                    dir.display(),
                    limits.min_free_disk_bytes
                ));
            }
        }
    }
    if limits.max_data_bytes > 0 {
        let used = dir_bytes(dir);
        if used > limits.max_data_bytes {
            return Some(format!(
                "{} holds {used} bytes, above max_data_bytes {}",
                dir.display(),
                limits.max_data_bytes
            ));
        }
    }
    if limits.memory_high_watermark_bytes > 0 {
        if let Some(rss) = resident_bytes() {
            if rss > limits.memory_high_watermark_bytes {
                return Some(format!(
                    "resident memory {rss} bytes is above memory_high_watermark_bytes {}",
                    limits.memory_high_watermark_bytes
                ));
            }
        }
    }
    None
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => stack.push(entry.path()),
                Ok(meta) => total += meta.len(),
                Err(_) => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_raises_and_none_clears() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![0u8; 10_000]).unwrap();
        let off = ResourceLimits {
            min_free_disk_bytes: 0,
            max_data_bytes: 0,
            memory_high_watermark_bytes: 0,
        };
        assert_eq!(check(dir.path(), off), None);
        let data = ResourceLimits {
            max_data_bytes: 5_000,
            ..off
        };
        assert!(check(dir.path(), data).unwrap().contains("max_data_bytes"));
        let disk = ResourceLimits {
            min_free_disk_bytes: u64::MAX,
            ..off
        };
        assert!(check(dir.path(), disk)
            .unwrap()
            .contains("min_free_disk_bytes"));
        let memory = ResourceLimits {
            memory_high_watermark_bytes: 1,
            ..off
        };
        assert!(check(dir.path(), memory).unwrap().contains("memory"));
    }

    #[test]
    fn clearing_wakes_every_waiter_once() {
        let alarm = ResourceAlarm::default();
        let (sink, mut rx) = Sink::channel();
        alarm.set(Some("full".into()));
        assert!(alarm.is_raised());
        alarm.wait(&sink, 7);
        alarm.wait(&sink, 7);
        alarm.set(None);
        assert!(!alarm.is_raised());
        let event = rx.try_recv().unwrap();
        assert_eq!(event.tag, 7);
        assert!(matches!(event.kind, QueueEventKind::Capacity));
        assert!(rx.try_recv().is_err(), "one wake-up per waiter");
    }
}
