//! Progress on stderr every 2 s while a long phase (fill, probe, drain)
//! runs, from a timer task of its own: the phase's loop only bumps
//! counters, so a line still appears when the loop is blocked on a broker
//! that has stopped answering (it then says for how long nothing moved).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// How often a line is printed.
const EVERY: Duration = Duration::from_secs(2);

struct Shared {
    /// What is running ("" = nothing to report), and since when.
    label: Mutex<(String, Instant)>,
    /// Messages done in the current phase, and its goal.
    done: AtomicU64,
    goal: AtomicU64,
    /// Messages in the queue as far as the bench knows.
    depth: AtomicU64,
}

/// The counters a phase bumps; printing stops when this is dropped.
pub(crate) struct Progress {
    shared: Arc<Shared>,
    printer: JoinHandle<()>,
}

impl Progress {
    /// Start the printer task.
    pub(crate) fn start() -> Progress {
        let shared = Arc::new(Shared {
            label: Mutex::new((String::new(), Instant::now())),
            done: AtomicU64::new(0),
            goal: AtomicU64::new(0),
            depth: AtomicU64::new(0),
        });
        let printer = tokio::spawn(print_loop(shared.clone()));
        Progress { shared, printer }
    }

    /// A new phase: `goal` messages, `label` names it.
    pub(crate) fn phase(&self, label: &str, goal: u64) {
        if let Ok(mut l) = self.shared.label.lock() {
            *l = (label.to_string(), Instant::now());
        }
        self.shared.done.store(0, Ordering::Relaxed);
        self.shared.goal.store(goal, Ordering::Relaxed);
    }

    /// No phase running: no lines.
    pub(crate) fn idle(&self) {
        self.phase("", 0);
    }

    /// `done` messages of the phase finished; the queue holds `depth`.
    pub(crate) fn set(&self, done: u64, depth: u64) {
        self.shared.done.store(done, Ordering::Relaxed);
        self.shared.depth.store(depth, Ordering::Relaxed);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.printer.abort();
    }
}

async fn print_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(EVERY);
    tick.tick().await;
    let (mut last_since, mut last_done, mut last_at) = (Instant::now(), 0u64, Instant::now());
    let mut last_move = Instant::now();
    loop {
        tick.tick().await;
        let (label, since) = match shared.label.lock() {
            Ok(l) => l.clone(),
            Err(_) => return,
        };
        let done = shared.done.load(Ordering::Relaxed);
        let now = Instant::now();
        if since != last_since || done < last_done {
            // A new phase since the last line: rate from its start.
            last_done = 0;
            last_at = since;
            last_move = since;
        }
        if done != last_done {
            last_move = now;
        }
        if !label.is_empty() {
            let rate = (done - last_done) as f64 / now.duration_since(last_at).as_secs_f64();
            let goal = shared.goal.load(Ordering::Relaxed);
            let depth = shared.depth.load(Ordering::Relaxed);
            let still = now.duration_since(last_move);
            let stalled = if still >= EVERY {
                format!(", NOTHING MOVED for {:.1} s", still.as_secs_f64())
            } else {
                String::new()
            };
            eprintln!(
                "depth: {label}: {done}/{goal}, {rate:.0} msg/s, queue depth {depth}{stalled}"
            );
        }
        (last_since, last_done, last_at) = (since, done, now);
    }
}
