//! The node's resource alarm: raised while free disk space under the data
//! dir is below `min_free_disk_bytes`, the data dir holds more than
//! `max_data_bytes`, or the process's resident memory is above
//! `memory_high_watermark_bytes`. While it is raised, quorum queues on this
//! node grant publishers no new credit (`QuorumQueue::has_capacity`), so
//! publishing stops without a refusal or a false `accepted`; while the
//! memory part is raised, transient queues do the same (they hold their
//! messages in memory; the disk does not limit them). When a part clears,
//! every publisher that waited is told to look again.
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
    /// Any limit is exceeded.
    raised: AtomicBool,
    /// The memory limit is exceeded.
    memory: AtomicBool,
    /// A disk limit (free space, data size) is exceeded.
    disk: AtomicBool,
    reason: Mutex<Option<String>>,
    waiters: Mutex<Vec<(Sink, u64)>>,
}

/// What one check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AlarmState {
    /// Why publishing is held back (every exceeded limit), if it is.
    pub(crate) reason: Option<String>,
    /// Whether resident memory is above its limit.
    pub(crate) memory: bool,
    /// Whether free disk space or the data size is past its limit.
    pub(crate) disk: bool,
}

impl AlarmState {
    /// Nothing exceeded.
    #[cfg(test)]
    pub(crate) fn clear() -> AlarmState {
        AlarmState::default()
    }

    /// A disk limit exceeded (memory fine).
    #[cfg(test)]
    pub(crate) fn disk(reason: &str) -> AlarmState {
        AlarmState {
            reason: Some(reason.to_owned()),
            memory: false,
            disk: true,
        }
    }

    /// The memory limit exceeded.
    #[cfg(test)]
    pub(crate) fn memory(reason: &str) -> AlarmState {
        AlarmState {
            reason: Some(reason.to_owned()),
            memory: true,
            disk: false,
        }
    }
}

impl ResourceAlarm {
    /// Whether any limit is exceeded: quorum publishers wait.
    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// Whether the memory limit is exceeded: every publisher waits.
    pub(crate) fn is_memory_raised(&self) -> bool {
        self.memory.load(Ordering::Acquire)
    }

    /// Whether a disk limit is exceeded.
    pub(crate) fn is_disk_raised(&self) -> bool {
        self.disk.load(Ordering::Acquire)
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

    /// Record what the last check found; a part that clears wakes the
    /// waiters (each re-checks whether the part it waits on is clear).
    pub(crate) fn set(&self, state: AlarmState) {
        let raised = state.reason.is_some();
        let was_raised = self.raised.swap(raised, Ordering::AcqRel);
        let was_memory = self.memory.swap(state.memory, Ordering::AcqRel);
        self.disk.store(state.disk, Ordering::Release);
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = state.reason.clone();
        if let (false, Some(reason)) = (was_raised, &state.reason) {
            tracing::warn!(%reason, "resource alarm: publishers to quorum queues are held back");
        }
        if state.memory && !was_memory {
            tracing::warn!("memory alarm: publishers to transient queues are held back too");
        }
        if was_raised && !raised {
            tracing::info!("resource alarm cleared: publishing resumes");
        }
        if (was_raised && !raised) || (was_memory && !state.memory) {
            let waiters =
                std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|p| p.into_inner()));
            for (sink, tag) in waiters {
                sink.send(tag, QueueEventKind::Capacity);
            }
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
            let state = tokio::task::spawn_blocking(move || check(&dir, limits))
                .await
                .unwrap_or_default();
            let Some(alarm) = alarm.upgrade() else {
                return;
            };
            alarm.set(state);
        }
    });
}

/// Which limits are exceeded now.
fn check(dir: &Path, limits: ResourceLimits) -> AlarmState {
    let mut reasons = Vec::new();
    if limits.min_free_disk_bytes > 0 {
        if let Ok(stat) = rustix::fs::statvfs(dir) {
            let free = stat.f_bavail.saturating_mul(stat.f_frsize);
            if free < limits.min_free_disk_bytes {
                reasons.push(format!(
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
            reasons.push(format!(
                "{} holds {used} bytes, above max_data_bytes {}",
                dir.display(),
                limits.max_data_bytes
            ));
        }
    }
    let disk = !reasons.is_empty();
    let mut memory = false;
    if limits.memory_high_watermark_bytes > 0 {
        if let Some(rss) = resident_bytes() {
            if rss > limits.memory_high_watermark_bytes {
                memory = true;
                reasons.push(format!(
                    "resident memory {rss} bytes is above memory_high_watermark_bytes {}",
                    limits.memory_high_watermark_bytes
                ));
            }
        }
    }
    AlarmState {
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        memory,
        disk,
    }
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
        assert_eq!(check(dir.path(), off), AlarmState::clear());
        let data = ResourceLimits {
            max_data_bytes: 5_000,
            ..off
        };
        let found = check(dir.path(), data);
        assert!(found.reason.unwrap().contains("max_data_bytes"));
        assert!(!found.memory);
        let disk = ResourceLimits {
            min_free_disk_bytes: u64::MAX,
            ..off
        };
        assert!(check(dir.path(), disk)
            .reason
            .unwrap()
            .contains("min_free_disk_bytes"));
        let memory = ResourceLimits {
            memory_high_watermark_bytes: 1,
            ..off
        };
        let found = check(dir.path(), memory);
        assert!(found.memory);
        assert!(found.reason.unwrap().contains("memory"));
        // Both at once: both named, memory still flagged.
        let both = check(
            dir.path(),
            ResourceLimits {
                max_data_bytes: 5_000,
                ..memory
            },
        );
        assert!(both.memory);
        let reason = both.reason.unwrap();
        assert!(
            reason.contains("max_data_bytes") && reason.contains("memory"),
            "{reason}"
        );
    }

    #[test]
    fn clearing_wakes_every_waiter_once() {
        let alarm = ResourceAlarm::default();
        let (sink, mut rx) = Sink::channel();
        alarm.set(AlarmState::disk("full"));
        assert!(alarm.is_raised());
        assert!(!alarm.is_memory_raised());
        alarm.wait(&sink, 7);
        alarm.wait(&sink, 7);
        alarm.set(AlarmState::clear());
        assert!(!alarm.is_raised());
        let event = rx.try_recv().unwrap();
        assert_eq!(event.tag, 7);
        assert!(matches!(event.kind, QueueEventKind::Capacity));
        assert!(rx.try_recv().is_err(), "one wake-up per waiter");
    }

    #[test]
    fn memory_clearing_wakes_waiters_while_a_disk_limit_stays() {
        let alarm = ResourceAlarm::default();
        let (sink, mut rx) = Sink::channel();
        alarm.set(AlarmState::memory("memory and disk"));
        assert!(alarm.is_raised() && alarm.is_memory_raised());
        alarm.wait(&sink, 3);
        alarm.set(AlarmState::disk("disk only"));
        assert!(alarm.is_raised() && !alarm.is_memory_raised());
        let event = rx.try_recv().expect("a transient publisher may go on");
        assert_eq!(event.tag, 3);
    }
}
