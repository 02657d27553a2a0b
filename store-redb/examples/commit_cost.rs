//! Cost of one small commit: one group appends ONE entry at a time and waits
//! for its flush, `--appends` times (a closed loop, so every append is its
//! own redb write transaction and fsync). Prints the bytes the process wrote
//! (`/proc/self/io` `write_bytes`, i.e. what reached the block layer, and
//! `wchar`, what it handed to `write`/`pwrite`), the file growth, and the
//! mean commit time, per commit.
//!
//! For CPU and allocations per commit, run it under valgrind twice with two
//! counts and take the difference, so that start-up cancels out:
//!
//! ```text
//! cargo build --release -p ramqpd-store-redb --example commit_cost
//! valgrind --tool=callgrind --callgrind-out-file=cg.%p \
//!     target/release/examples/commit_cost --appends 2000
//! valgrind --tool=callgrind ... --appends 12000
//! # instructions per commit = (Ir(12000) - Ir(2000)) / 10000; same with dhat
//! ```
//!
//! Flags: `--appends N` (2000), `--payload-bytes B` (300), `--dir PATH`
//! (a directory on a real disk; default: the system temp dir),
//! `--committed true` (before each append, `save_committed` the previous
//! entry, as a Raft leader with one entry in flight does: the committed
//! log id then rides in the same commit as the append), `--groups G` and
//! `--preload P` (1 and 0: before measuring, G groups get P entries each,
//! one commit per group, and the measured appends go to the middle group,
//! whose rows then sit between other groups' rows as on a node with many
//! queues: the entries tree is as deep as such a node's).

use std::path::PathBuf;
use std::time::Instant;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId};
use ramqpd_store_redb::{LogStore, LogStoreOptions};

openraft::declare_raft_types!(TypeConfig);

struct Args {
    appends: u64,
    payload_bytes: usize,
    dir: PathBuf,
    committed: bool,
    groups: u64,
    preload: u64,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        appends: 2000,
        payload_bytes: 300,
        dir: std::env::temp_dir(),
        committed: false,
        groups: 1,
        preload: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--appends" => args.appends = value.parse()?,
            "--payload-bytes" => args.payload_bytes = value.parse()?,
            "--dir" => args.dir = value.into(),
            "--committed" => args.committed = value.parse()?,
            "--groups" => args.groups = value.parse()?,
            "--preload" => args.preload = value.parse()?,
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    Ok(args)
}

/// `(write_bytes, wchar)` of this process so far.
fn proc_io() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/self/io") else {
        return (0, 0);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("write_bytes:"), field("wchar:"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir_in(&args.dir)?;
    let path = dir.path().join("commit_cost.redb");
    let store = LogStore::open(&path, LogStoreOptions::default())?;
    let data = "x".repeat(args.payload_bytes);
    let entry = |index: u64| Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
        payload: EntryPayload::Normal(data.clone()),
    };
    let groups = args.groups.max(1);
    runtime.block_on(async {
        for group_id in 0..groups {
            if args.preload > 0 {
                let mut group = store.group::<TypeConfig>(group_id)?;
                group.blocking_append((0..args.preload).map(entry)).await?;
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    let mut group = store.group::<TypeConfig>(groups / 2)?;
    let first = args.preload;
    let size_before = std::fs::metadata(&path)?.len();
    let stats_before = store.stats();
    let io_before = proc_io();
    let started = Instant::now();
    runtime.block_on(async {
        for index in first..first + args.appends {
            if args.committed && index > 0 {
                let committed = LogId::new(CommittedLeaderId::new(1, 0), index - 1);
                group.save_committed(Some(committed)).await?;
            }
            group.blocking_append([entry(index)]).await?;
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    let elapsed = started.elapsed();
    let io_after = proc_io();
    let stats = store.stats().since(&stats_before);
    let size_after = std::fs::metadata(&path)?.len();
    let n = stats.commits.max(1) as f64;
    println!(
        "groups={} preload={} appends={} payload={}B committed={} commits={} wall={:.3}s  per commit: mean commit={:.1}us \
         write_bytes={:.0} wchar={:.0} file growth={:.0}B (file {} -> {} B)",
        groups,
        args.preload,
        args.appends,
        args.payload_bytes,
        args.committed,
        stats.commits,
        elapsed.as_secs_f64(),
        stats.commit_time.as_secs_f64() * 1e6 / n,
        (io_after.0 - io_before.0) as f64 / n,
        (io_after.1 - io_before.1) as f64 / n,
        (size_after as f64 - size_before as f64) / n,
        size_before,
        size_after,
    );
    drop(group);
    drop(store);
    Ok(())
}
