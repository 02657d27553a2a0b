//! Commit latency against the disk's floor: `--procs` processes (each its
//! own file, like the nodes of a local cluster on one disk) commit in a
//! closed loop at the same time, and the latency of every commit is kept.
//!
//! Modes (`--mode`):
//! - `redb`: each process opens a `LogStore` and one group appends ONE entry
//!   of `--payload-bytes` at a time, waiting for its flush (one redb commit
//!   and one fdatasync each); with `--committed true` (the default) it first
//!   saves the previous entry as committed, as a Raft leader with one entry
//!   in flight does, so the committed log id rides in the same commit;
//!   `--journal-bytes` sizes the store's append journal (default: the
//!   store's default; 0: no journal, so each append is a redb commit);
//! - `fsync`: the floor: each process writes `--payload-bytes` at the next
//!   offset of a file zero-filled ahead (64 MiB, synced before the clock
//!   starts) and calls `fdatasync`, so no write allocates a block or moves
//!   the file size;
//! - `fsync-grow`: the same, appending to a file that grows, so every
//!   fdatasync also flushes the file's size and fresh blocks;
//! - `fsync-thread`: `fsync`, but each write and `fdatasync` runs on
//!   another thread, handed over as the store hands a commit to its writer
//!   thread (a bounded tokio channel read with `blocking_recv`, a oneshot
//!   back, awaited on a current-thread runtime): the floor plus the cost of
//!   the two thread hand-offs of every store commit, without redb.
//!
//! ```text
//! commit_latency --mode redb --procs 3 --seconds 5 --dir /path/on/disk
//! ```
//!
//! Prints one JSON line: mode, procs, commits, commits/s, latency p50 /
//! p90 / p99 / max in microseconds (every commit of every process, after a
//! 0.5 s warm-up), per commit the bytes the processes wrote
//! (`/proc/self/io` `write_bytes`), and per commit the CPU time the
//! processes spent in user space and in the kernel (`/proc/self/stat`
//! utime and stime, every thread, in clock ticks: resolution 10 ms over
//! the whole run).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId};
use ramqpd_store_redb::{LogStore, LogStoreOptions};

openraft::declare_raft_types!(TypeConfig);

const WARMUP: Duration = Duration::from_millis(500);
const PREALLOCATED_BYTES: u64 = 64 * 1024 * 1024;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    mode: String,
    procs: usize,
    seconds: u64,
    payload_bytes: usize,
    dir: PathBuf,
    /// `redb` mode: `save_committed` the previous entry before each append,
    /// as a Raft leader with one entry in flight does (the committed log id
    /// then rides in the same commit as the append).
    committed: bool,
    /// `redb` mode: the store's `journal_bytes`.
    journal_bytes: u64,
    /// Set in a child: the file its latencies go to.
    child_out: Option<PathBuf>,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = Args {
        mode: "redb".into(),
        procs: 1,
        seconds: 5,
        payload_bytes: 256,
        dir: std::env::temp_dir(),
        committed: true,
        journal_bytes: ramqpd_store_redb::JOURNAL_BYTES_DEFAULT,
        child_out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--mode" => args.mode = value,
            "--procs" => args.procs = value.parse()?,
            "--seconds" => args.seconds = value.parse()?,
            "--payload-bytes" => args.payload_bytes = value.parse()?,
            "--dir" => args.dir = value.into(),
            "--committed" => args.committed = value.parse()?,
            "--journal-bytes" => args.journal_bytes = value.parse()?,
            "--child-out" => args.child_out = Some(value.into()),
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    Ok(args)
}

fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("write_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// `(utime, stime)` of this process (all its threads), in clock ticks.
fn cpu_ticks() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/self/stat") else {
        return (0, 0);
    };
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14 and stime 15.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
    (field(11), field(12))
}

/// What one child measured.
struct Measured {
    samples: Vec<u32>,
    write_bytes: u64,
    /// User and kernel CPU over the measured part, in clock ticks.
    cpu_ticks: (u64, u64),
}

/// Runs `commit` in a closed loop for the warm-up and `seconds`, and
/// returns the measured latencies (us), the bytes written and the CPU
/// spent meanwhile.
fn closed_loop(
    seconds: u64,
    mut commit: impl FnMut() -> Result<(), BoxError>,
) -> Result<Measured, BoxError> {
    let started = Instant::now();
    while started.elapsed() < WARMUP {
        commit()?;
    }
    let io_before = write_bytes();
    let cpu_before = cpu_ticks();
    let measured_from = Instant::now();
    let mut samples = Vec::new();
    while measured_from.elapsed() < Duration::from_secs(seconds) {
        let at = Instant::now();
        commit()?;
        samples.push(at.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    let cpu_after = cpu_ticks();
    Ok(Measured {
        samples,
        write_bytes: write_bytes() - io_before,
        cpu_ticks: (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1),
    })
}

fn run_redb(args: &Args, dir: &Path) -> Result<Measured, BoxError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let options = LogStoreOptions {
        journal_bytes: args.journal_bytes,
        ..LogStoreOptions::default()
    };
    let store = LogStore::open(dir.join("latency.redb"), options)?;
    let mut group = store.group::<TypeConfig>(1)?;
    let data = "x".repeat(args.payload_bytes);
    let mut index = 0;
    closed_loop(args.seconds, || {
        if args.committed && index > 0 {
            let committed = LogId::new(CommittedLeaderId::new(1, 0), index - 1);
            runtime.block_on(group.save_committed(Some(committed)))?;
        }
        let entry = Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
            payload: EntryPayload::Normal(data.clone()),
        };
        index += 1;
        runtime.block_on(group.blocking_append([entry]))?;
        Ok(())
    })
}

fn run_fsync(args: &Args, dir: &Path, grow: bool) -> Result<Measured, BoxError> {
    let path = dir.join("floor.dat");
    let file = if grow {
        OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(true)
            .open(&path)?
    } else {
        zero_filled(&path)?
    };
    let payload = vec![0x5au8; args.payload_bytes];
    let mut offset = 0u64;
    closed_loop(args.seconds, || {
        if offset + payload.len() as u64 > PREALLOCATED_BYTES {
            offset = 0;
        }
        file.write_all_at(&payload, offset)?;
        File::sync_data(&file)?;
        offset += payload.len() as u64;
        Ok(())
    })
}

/// A file of [`PREALLOCATED_BYTES`] zeros, synced.
fn zero_filled(path: &Path) -> Result<File, BoxError> {
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(path)?;
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..PREALLOCATED_BYTES / zeros.len() as u64 {
        file.write_all(&zeros)?;
    }
    file.sync_all()?;
    Ok(file)
}

/// `fsync` with the store's hand-offs: see the module documentation.
fn run_fsync_thread(args: &Args, dir: &Path) -> Result<Measured, BoxError> {
    type Reply = tokio::sync::oneshot::Sender<std::io::Result<()>>;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let file = zero_filled(&dir.join("floor.dat"))?;
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<(u64, Reply)>(1024);
    let payload = vec![0x5au8; args.payload_bytes];
    let writer = std::thread::spawn(move || {
        while let Some((offset, reply)) = receiver.blocking_recv() {
            let done = file
                .write_all_at(&payload, offset)
                .and_then(|()| file.sync_data());
            let _ = reply.send(done);
        }
    });
    let len = args.payload_bytes as u64;
    let mut offset = 0u64;
    let measured = closed_loop(args.seconds, || {
        if offset + len > PREALLOCATED_BYTES {
            offset = 0;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        runtime.block_on(async {
            sender.send((offset, tx)).await.map_err(|_| "writer gone")?;
            rx.await.map_err(|_| "writer gone")??;
            Ok::<_, BoxError>(())
        })?;
        offset += len;
        Ok(())
    });
    drop(sender);
    writer.join().map_err(|_| "writer panicked")?;
    measured
}

fn child(args: &Args, out: &Path) -> Result<(), BoxError> {
    let dir = tempfile::tempdir_in(&args.dir)?;
    let measured = match args.mode.as_str() {
        "redb" => run_redb(args, dir.path())?,
        "fsync" => run_fsync(args, dir.path(), false)?,
        "fsync-grow" => run_fsync(args, dir.path(), true)?,
        "fsync-thread" => run_fsync_thread(args, dir.path())?,
        other => return Err(format!("unknown mode {other}").into()),
    };
    let mut text = format!(
        "{} {} {}\n",
        measured.write_bytes, measured.cpu_ticks.0, measured.cpu_ticks.1
    );
    for s in measured.samples {
        text.push_str(&s.to_string());
        text.push('\n');
    }
    std::fs::write(out, text)?;
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    if let Some(out) = &args.child_out {
        return child(&args, out);
    }
    let results = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for i in 0..args.procs {
        let out = results.path().join(format!("child-{i}"));
        children.push(
            Command::new(&exe)
                .args(["--mode", &args.mode])
                .args(["--seconds", &args.seconds.to_string()])
                .args(["--payload-bytes", &args.payload_bytes.to_string()])
                .args(["--committed", &args.committed.to_string()])
                .args(["--journal-bytes", &args.journal_bytes.to_string()])
                .arg("--dir")
                .arg(&args.dir)
                .arg("--child-out")
                .arg(&out)
                .spawn()?,
        );
    }
    for mut c in children {
        if !c.wait()?.success() {
            return Err("a child failed".into());
        }
    }
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut bytes = 0u64;
    let (mut user_ticks, mut sys_ticks) = (0u64, 0u64);
    for i in 0..args.procs {
        let text = std::fs::read_to_string(results.path().join(format!("child-{i}")))?;
        let mut lines = text.lines();
        let mut totals = lines.next().ok_or("empty child output")?.split(' ');
        let mut total = || -> Result<u64, BoxError> {
            Ok(totals.next().ok_or("short child totals")?.parse::<u64>()?)
        };
        bytes += total()?;
        user_ticks += total()?;
        sys_ticks += total()?;
        for line in lines {
            latency.saturating_record(line.parse()?);
        }
    }
    let n = latency.len().max(1);
    // Linux's USER_HZ, what /proc reports ticks in, is 100 on every
    // architecture this runs on.
    let us_per_tick = 10_000.0;
    println!(
        "{{\"mode\":\"{}\",\"procs\":{},\"payload_bytes\":{},\"committed\":{},\"journal_bytes\":{},\"seconds\":{},\"commits\":{},\
         \"commits_per_s\":{:.0},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"max_us\":{},\
         \"write_bytes_per_commit\":{:.0},\"cpu_user_us_per_commit\":{:.1},\"cpu_sys_us_per_commit\":{:.1}}}",
        args.mode,
        args.procs,
        args.payload_bytes,
        args.committed,
        args.journal_bytes,
        args.seconds,
        latency.len(),
        latency.len() as f64 / args.seconds as f64,
        latency.value_at_quantile(0.5),
        latency.value_at_quantile(0.9),
        latency.value_at_quantile(0.99),
        latency.max(),
        bytes as f64 / n as f64,
        user_ticks as f64 * us_per_tick / n as f64,
        sys_ticks as f64 * us_per_tick / n as f64,
    );
    Ok(())
}
