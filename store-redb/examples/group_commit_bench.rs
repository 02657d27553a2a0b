//! Group-commit benchmark: N Raft groups, each appending one entry at a time
//! in a closed loop (the next append starts when the previous one is
//! flushed), for a fixed time, into one store. Reports appends/s, entries
//! per commit (per fsync) and append-to-flushed latency.
//!
//! ```text
//! cargo run --release -p ramqpd-store-redb --example group_commit_bench -- \
//!     [--groups 1,64] [--seconds 5] [--payload-bytes 256] [--dir PATH]
//! ```
//!
//! `--dir` picks the file system (default: the system temp dir); it should
//! be a real disk, since fsync on tmpfs costs nothing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openraft::storage::RaftLogStorageExt;
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId};
use ramqpd_store_redb::{LogStore, LogStoreOptions};

openraft::declare_raft_types!(TypeConfig);

struct Args {
    groups: Vec<u64>,
    seconds: u64,
    payload_bytes: usize,
    dir: PathBuf,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        groups: vec![1, 64],
        seconds: 5,
        payload_bytes: 256,
        dir: std::env::temp_dir(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--groups" => {
                args.groups = value.split(',').map(str::parse).collect::<Result<_, _>>()?
            }
            "--seconds" => args.seconds = value.parse()?,
            "--payload-bytes" => args.payload_bytes = value.parse()?,
            "--dir" => args.dir = value.into(),
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    Ok(args)
}

async fn run(args: &Args, n_groups: u64) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir_in(&args.dir)?;
    let store = LogStore::open(dir.path().join("bench.redb"), LogStoreOptions::default())?;
    let data = "x".repeat(args.payload_bytes);
    let warmup = Duration::from_millis(500);
    let duration = Duration::from_secs(args.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for group_id in 0..n_groups {
        let mut group = store.group::<TypeConfig>(group_id)?;
        let data = data.clone();
        tasks.push(tokio::spawn(async move {
            let mut latency = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3)?;
            let mut index = 0;
            let mut n_measured = 0u64;
            loop {
                let now = Instant::now();
                if now.duration_since(started) >= warmup + duration {
                    break;
                }
                let entry = Entry {
                    log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
                    payload: EntryPayload::Normal(data.clone()),
                };
                group.blocking_append([entry]).await?;
                if now.duration_since(started) >= warmup {
                    latency.saturating_record(now.elapsed().as_micros() as u64);
                    n_measured += 1;
                }
                index += 1;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((latency, n_measured))
        }));
    }
    tokio::time::sleep(warmup).await;
    let stats_before = store.stats();
    let measured_from = Instant::now();
    let mut latency = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3)?;
    let mut n_appends = 0;
    for task in tasks {
        let (h, n) = task.await?.map_err(|e| e.to_string())?;
        latency.add(h)?;
        n_appends += n;
    }
    let elapsed = measured_from.elapsed();
    let stats = store.stats().since(&stats_before);
    println!(
        "groups={n_groups:<3} payload={}B  {:>8.0} appends/s  commits/s={:>6.0}  entries/commit={:>5.1}  \
         requests/commit={:>5.1}  mean commit={:>6.0}us  latency us p50={} p99={} p99.9={} max={}",
        args.payload_bytes,
        n_appends as f64 / elapsed.as_secs_f64(),
        stats.commits as f64 / elapsed.as_secs_f64(),
        stats.entries_per_commit(),
        stats.requests_per_commit(),
        stats.commit_time.as_secs_f64() * 1e6 / stats.commits.max(1) as f64,
        latency.value_at_quantile(0.50),
        latency.value_at_quantile(0.99),
        latency.value_at_quantile(0.999),
        latency.max(),
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for &n_groups in &args.groups {
        runtime.block_on(run(&args, n_groups))?;
    }
    Ok(())
}
