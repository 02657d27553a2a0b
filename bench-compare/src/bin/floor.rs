//! `floor`: the physical floor the brokers' latencies are read against,
//! measured on this machine at the time of the run:
//!
//! - a 256-byte append plus `fdatasync` to a file in `--dir` (the disk the
//!   brokers write to);
//! - the same, from three threads at once on three files (what a 3-node
//!   cluster on one disk pays when every replica flushes together);
//! - a 256-byte TCP round trip over loopback (`TCP_NODELAY`, echo on a tokio
//!   task, as the brokers' sockets run).
//!
//! Prints one JSON object (percentiles in microseconds) on stdout.

#![forbid(unsafe_code)]

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use hdrhistogram::Histogram;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Measure the fsync and loopback floor.
#[derive(Debug, Parser)]
#[command(name = "floor", version)]
struct Args {
    /// Folder for the probe files (removed afterwards).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Appends per probe.
    #[arg(long, default_value_t = 500)]
    fsyncs: usize,
    /// Loopback round trips.
    #[arg(long, default_value_t = 5_000)]
    round_trips: usize,
    /// Also probe three concurrent appends of this many bytes each (a redb
    /// commit of a batch of publishes is some 68 KB); 0: not probed.
    #[arg(long, default_value_t = 0)]
    large_append_bytes: usize,
}

fn percentiles(h: &Histogram<u64>) -> serde_json::Value {
    json!({
        "samples": h.len(),
        "p50_us": h.value_at_quantile(0.5),
        "p90_us": h.value_at_quantile(0.9),
        "p99_us": h.value_at_quantile(0.99),
        "p99_9_us": h.value_at_quantile(0.999),
        "max_us": h.max(),
        "over_50ms": h.count_between(50_001, u64::MAX),
        "mean_us": (h.mean() * 10.0).round() / 10.0,
    })
}

/// `n` appends of `bytes` bytes to `path`, each followed by `fdatasync`.
fn fsync_appends(path: &Path, n: usize, bytes: usize) -> Result<Histogram<u64>> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    let mut h = Histogram::<u64>::new(3)?;
    let block = vec![7u8; bytes];
    for _ in 0..n {
        let started = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        h.record(started.elapsed().as_micros() as u64)?;
    }
    drop(file);
    std::fs::remove_file(path).with_context(|| format!("remove {}", path.display()))?;
    Ok(h)
}

/// [`fsync_appends`] on `threads` files at once; one merged histogram.
fn concurrent_fsync_appends(
    dir: &Path,
    threads: usize,
    n: usize,
    bytes: usize,
) -> Result<Histogram<u64>> {
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let path = dir.join(format!("floor-probe-{i}"));
            std::thread::spawn(move || fsync_appends(&path, n, bytes))
        })
        .collect();
    let mut merged = Histogram::<u64>::new(3)?;
    for handle in handles {
        let h = handle
            .join()
            .map_err(|_| anyhow::anyhow!("fsync probe thread panicked"))??;
        merged.add(h)?;
    }
    Ok(merged)
}

/// `n` loopback TCP round trips of 256 bytes.
async fn loopback_round_trips(n: usize) -> Result<Histogram<u64>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let echo = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 256];
        while s.read_exact(&mut buf).await.is_ok() {
            s.write_all(&buf).await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let mut h = Histogram::<u64>::new(3)?;
    let mut buf = [0u8; 256];
    // A short warm-up: the first round trips pay for page faults and wakeups
    // the steady state does not.
    for i in 0..n + 200 {
        let started = Instant::now();
        s.write_all(&buf).await?;
        s.read_exact(&mut buf).await?;
        if i >= 200 {
            h.record(started.elapsed().as_micros() as u64)?;
        }
    }
    drop(s);
    echo.await??;
    Ok(h)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.dir).with_context(|| format!("create {}", args.dir.display()))?;
    let one = fsync_appends(&args.dir.join("floor-probe"), args.fsyncs, 256)?;
    let three = concurrent_fsync_appends(&args.dir, 3, args.fsyncs, 256)?;
    let large = match args.large_append_bytes {
        0 => None,
        bytes => Some(concurrent_fsync_appends(&args.dir, 3, args.fsyncs, bytes)?),
    };
    let rtt = loopback_round_trips(args.round_trips).await?;
    let mut out = json!({
        "fsync_append_256b": percentiles(&one),
        "fsync_append_256b_3_concurrent": percentiles(&three),
        "loopback_rtt_256b": percentiles(&rtt),
        "method": "sequential write(256 B) + fdatasync, 1 thread on 1 file and 3 threads on 3 files; TCP_NODELAY echo of 256 B over 127.0.0.1 (tokio)",
    });
    if let Some(h) = &large {
        out["fsync_append_large_3_concurrent"] = percentiles(h);
        out["large_append_bytes"] = json!(args.large_append_bytes);
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
