//! `codec`: our AMQP 1.0 codec (`broker::codec`) against serde_amqp with
//! the fe2o3-amqp-types types, on the same frames (a publisher's transfer
//! with header, properties, application-properties and a 256 B or 4 KiB
//! data body; a consumer's ranged `accepted` disposition). Per case: ns per
//! operation (median and min-max over trials), allocations and bytes per
//! operation (a counting global allocator, `alloc.rs`), and with
//! `--callgrind` instructions per operation. Before any timing both
//! decoders must read every frame to the same values
//! (`codec_compare::agree`); otherwise the bin fails.
//!
//! The cases are in `ramqp_bench_compare::codec_compare` (shared with the
//! tests); this bin times them, counts, and reports: one JSON object on
//! stdout, a table on stderr.

mod alloc;
mod callgrind;
mod measure;

use anyhow::{bail, Context, Result};
use clap::Parser;
use ramqp_bench_compare::codec_compare::agree;
use ramqp_bench_compare::codec_compare::cases::{CaseId, Runner, Side};
use ramqp_bench_compare::report;
use serde_json::{json, Value};

use measure::CaseResult;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Compare our AMQP codec with serde_amqp on the same frames.
#[derive(Debug, Parser)]
#[command(name = "codec", version)]
struct Args {
    /// Operations per trial.
    #[arg(long, env = "CODEC_ITERATIONS", default_value_t = 100_000)]
    iterations: u64,
    /// Trials per case (ours and serde_amqp alternate, trial by trial).
    #[arg(long, env = "CODEC_TRIALS", default_value_t = 7)]
    trials: usize,
    /// Untimed operations per case before the trials.
    #[arg(long, env = "CODEC_WARMUP", default_value_t = 10_000)]
    warmup: u64,
    /// Only these operations (comma-separated, e.g.
    /// `decode-transfer-256-hot,encode-disposition`); default all.
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// Also count instructions per operation under valgrind's callgrind.
    #[arg(long)]
    callgrind: bool,
    /// The two operation counts of the callgrind runs (N1,N2).
    #[arg(long, value_delimiter = ',', default_values_t = [1_000u64, 5_000])]
    callgrind_ops: Vec<u64>,
    /// Check that both codecs agree, print the check's report, and stop.
    #[arg(long)]
    check_only: bool,
    /// Internal (the callgrind runs): run only this case, untimed.
    #[arg(long, hide = true)]
    one: Option<String>,
    /// Internal: operations for `--one`.
    #[arg(long, hide = true, default_value_t = 1_000)]
    ops: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(name) = &args.one {
        let id = CaseId::parse(name).with_context(|| format!("no case named {name}"))?;
        let mut runner = Runner::new(id)?;
        measure::trial(&mut runner, args.ops)?;
        return Ok(());
    }
    // Never time a comparison whose two sides do not read the same values.
    let encodings = agree::check_all(16).context("the two codecs disagree")?;
    eprintln!("check: both codecs decode every frame to the fixture's values");
    if args.check_only {
        report::emit(&json!({ "agree": true, "encodings": encodings }))?;
        return Ok(());
    }
    if args.trials == 0 || args.iterations == 0 {
        bail!("--trials and --iterations must be at least 1");
    }
    let ids: Vec<CaseId> = CaseId::all()
        .into_iter()
        .filter(|id| args.cases.is_empty() || args.cases.contains(&id.op_name()))
        .collect();
    if ids.is_empty() {
        bail!("no case matches --cases {:?}", args.cases);
    }
    let mut results = Vec::new();
    // Ours and serde_amqp alternate trial by trial, so a change in the
    // machine's load falls on both sides of a comparison.
    for pair in ids.chunks(2) {
        let mut runners = pair
            .iter()
            .map(|id| Runner::new(*id))
            .collect::<Result<Vec<_>>>()?;
        for runner in &mut runners {
            measure::trial(runner, args.warmup.max(1))?;
        }
        let mut trials = vec![Vec::new(); runners.len()];
        for _ in 0..args.trials {
            for (runner, trials) in runners.iter_mut().zip(&mut trials) {
                trials.push(measure::trial(runner, args.iterations)?);
            }
        }
        for (runner, trials) in runners.iter().zip(trials) {
            let result = measure::result(runner, trials);
            eprintln!("  {}: {}", result.case, line(&result));
            results.push(result);
        }
    }
    if args.callgrind {
        // After every timed trial, so other work started meanwhile cannot
        // disturb the timings; instruction counts do not mind.
        let (n1, n2) = callgrind_ops(&args)?;
        eprintln!("timing done; callgrind runs ({n1} and {n2} ops per case)");
        for result in &mut results {
            let id = CaseId::parse(&result.case).context("a measured case")?;
            result.instructions_per_op = Some(callgrind::per_op(&id, n1, n2)?);
            eprintln!("  {}: {}", result.case, line(result));
        }
    }
    eprintln!("\n{}", table(&results));
    let output = output(&args, &encodings, &results)?;
    report::emit(&output)
}

fn callgrind_ops(args: &Args) -> Result<(u64, u64)> {
    match args.callgrind_ops[..] {
        [n1, n2] if n2 > n1 => Ok((n1, n2)),
        _ => bail!("--callgrind-ops takes two counts N1,N2 with N2 > N1"),
    }
}

fn line(r: &CaseResult) -> String {
    let ir = r
        .instructions_per_op
        .map(|i| format!(", {i:.0} instructions/op"))
        .unwrap_or_default();
    format!(
        "{} ns/op, {:.2} allocs/op, {:.0} B/op{ir}",
        r.ns_per_op.line(1),
        r.allocs_per_op.median,
        r.bytes_per_op.median
    )
}

/// The human table: one row per operation, ours against serde_amqp.
fn table(results: &[CaseResult]) -> String {
    let mut out = String::from(
        "| operation | ours ns/op median (min-max) | serde_amqp ns/op median (min-max) | serde_amqp / ours | ours allocs, B /op | serde_amqp allocs, B /op | ours / serde_amqp instructions/op |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for pair in results.chunks(2) {
        let [ours, theirs] = pair else { continue };
        let ir = match (ours.instructions_per_op, theirs.instructions_per_op) {
            (Some(a), Some(b)) => format!("{a:.0} / {b:.0}"),
            _ => "n/a".to_owned(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {:.1}x | {:.2}, {:.0} | {:.2}, {:.0} | {ir} |\n",
            ours.op,
            ours.ns_per_op.line(0),
            theirs.ns_per_op.line(0),
            theirs.ns_per_op.median / ours.ns_per_op.median,
            ours.allocs_per_op.median,
            ours.bytes_per_op.median,
            theirs.allocs_per_op.median,
            theirs.bytes_per_op.median,
        ));
    }
    out
}

fn output(
    args: &Args,
    encodings: &[agree::EncodingReport],
    results: &[CaseResult],
) -> Result<Value> {
    let other = format!(
        "serde_amqp {} + fe2o3-amqp-types {} (fe2o3-amqp {}'s frame decoder)",
        env!("BENCH_SERDE_AMQP_VERSION"),
        env!("BENCH_FE2O3_TYPES_VERSION"),
        env!("BENCH_FE2O3_VERSION")
    );
    let target = json!({
        "kind": "codec",
        "ours": format!("ramqpd-broker {} (broker::codec)", env!("CARGO_PKG_VERSION")),
        "other": other,
    });
    let mut map = report::context("codec", "ours-vs-serde_amqp", target);
    map.insert("client".into(), json!(other));
    map.insert(
        "settings".into(),
        json!({
            "iterations": args.iterations,
            "trials": args.trials,
            "warmup": args.warmup,
            "callgrind_ops": args.callgrind.then_some(&args.callgrind_ops),
            "valgrind": args.callgrind.then(callgrind::version).flatten(),
            "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        }),
    );
    map.insert("agree".into(), json!(true));
    map.insert("encodings".into(), serde_json::to_value(encodings)?);
    map.insert("results".into(), serde_json::to_value(results)?);
    let comparison: Vec<Value> = results
        .chunks(2)
        .filter_map(|pair| match pair {
            [ours, theirs] if ours.side == Side::Ours.name() => Some(json!({
                "op": ours.op,
                "ns_per_op_median": { "ours": ours.ns_per_op.median, "serde_amqp": theirs.ns_per_op.median },
                "serde_amqp_over_ours": theirs.ns_per_op.median / ours.ns_per_op.median,
                "allocs_per_op": { "ours": ours.allocs_per_op.median, "serde_amqp": theirs.allocs_per_op.median },
                "bytes_per_op": { "ours": ours.bytes_per_op.median, "serde_amqp": theirs.bytes_per_op.median },
                "instructions_per_op": { "ours": ours.instructions_per_op, "serde_amqp": theirs.instructions_per_op },
            })),
            _ => None,
        })
        .collect();
    map.insert("comparison".into(), json!(comparison));
    Ok(Value::Object(map))
}
