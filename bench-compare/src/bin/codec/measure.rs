//! Timing and allocation counts of one case: warm-up, then trials of a
//! fixed number of operations, each trial made of batches whose set-up
//! (`Runner::prepare`) is neither timed nor counted. Per trial: ns per
//! operation; allocations and bytes per operation (deterministic, so every
//! trial should give the same counts).

use std::time::{Duration, Instant};

use anyhow::Result;
use ramqp_bench_compare::codec_compare::cases::Runner;
use ramqp_bench_compare::report::Spread;
use serde::Serialize;

use crate::alloc::Counts;

/// One trial of one case.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Trial {
    /// Operations done.
    pub ops: u64,
    /// Nanoseconds per operation.
    pub ns_per_op: f64,
    /// Allocations per operation.
    pub allocs_per_op: f64,
    /// Bytes allocated per operation.
    pub bytes_per_op: f64,
}

/// All trials of one case and their spread.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// `op/side`.
    pub case: String,
    /// The operation without the side.
    pub op: String,
    /// `ours` or `serde_amqp`.
    pub side: &'static str,
    /// What the operation does with this codec.
    pub what: &'static str,
    /// Body bytes (0 for the disposition).
    pub body: usize,
    /// Operations per batch (frames per buffer fill).
    pub batch: usize,
    /// ns per operation over trials.
    pub ns_per_op: Spread,
    /// Allocations per operation over trials.
    pub allocs_per_op: Spread,
    /// Bytes allocated per operation over trials.
    pub bytes_per_op: Spread,
    /// Instructions per operation under callgrind, if measured.
    pub instructions_per_op: Option<f64>,
    /// Every trial.
    pub trials: Vec<Trial>,
}

/// The one function whose instructions callgrind counts
/// (`--toggle-collect=*codec_timed_batch*`): the timed part and nothing else.
#[inline(never)]
pub fn codec_timed_batch(runner: &mut Runner, n: usize) -> Result<u64> {
    runner.run(n)
}

/// `ops` operations in batches; the time and allocations of the timed
/// parts only.
pub fn trial(runner: &mut Runner, ops: u64) -> Result<Trial> {
    let batch = runner.batch() as u64;
    let mut done = 0u64;
    let mut elapsed = Duration::ZERO;
    let mut counted = Counts::default();
    while done < ops {
        let n = batch.min(ops - done) as usize;
        runner.prepare(n);
        let before = Counts::now();
        let start = Instant::now();
        codec_timed_batch(runner, n)?;
        elapsed += start.elapsed();
        let used = Counts::now().since(before);
        counted.allocs += used.allocs;
        counted.bytes += used.bytes;
        done += n as u64;
    }
    let per_op = |x: u64| x as f64 / done as f64;
    Ok(Trial {
        ops: done,
        ns_per_op: elapsed.as_nanos() as f64 / done as f64,
        allocs_per_op: per_op(counted.allocs),
        bytes_per_op: per_op(counted.bytes),
    })
}

/// Median and min-max of `f` over `trials`.
pub fn spread(trials: &[Trial], f: impl Fn(&Trial) -> f64) -> Spread {
    let values: Vec<f64> = trials.iter().map(f).collect();
    Spread::of(&values).unwrap_or(Spread {
        median: f64::NAN,
        min: f64::NAN,
        max: f64::NAN,
    })
}

/// The result of `runner`'s trials.
pub fn result(runner: &Runner, trials: Vec<Trial>) -> CaseResult {
    let id = runner.id();
    CaseResult {
        case: id.name(),
        op: id.op_name(),
        side: id.side.name(),
        what: id.what(),
        body: id.body,
        batch: runner.batch(),
        ns_per_op: spread(&trials, |t| t.ns_per_op),
        allocs_per_op: spread(&trials, |t| t.allocs_per_op),
        bytes_per_op: spread(&trials, |t| t.bytes_per_op),
        instructions_per_op: None,
        trials,
    }
}
