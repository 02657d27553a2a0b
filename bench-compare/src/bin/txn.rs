//! `txn`: what a local transaction costs, against the same number of
//! plain confirmed publishes, on one queue (a quorum queue by default).
//!
//! Rounds alternate between two ways of getting `--batch` messages
//! accepted by the broker, on one connection:
//!
//! * **confirmed**: `--batch` unsettled publishes in flight together, then
//!   wait for every `accepted`;
//! * **transaction**: declare a transaction, post `--batch` messages in it
//!   (all in flight together, each answered with its presumptive outcome),
//!   commit, wait for the commit's `accepted`. Timed whole, and from the
//!   first post (a client may declare the next transaction while the
//!   previous one commits, taking the declare off the path).
//!
//! Both use fe2o3-amqp (its `Controller` / `Transaction` for the second).
//! A message that is not accepted, or a commit that fails, fails the bin.
//! Nothing consumes: the queue grows by `trials * 2 * (warmup + rounds) *
//! batch` messages, small at the defaults.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use fe2o3_amqp::transaction::{Controller, Transaction, TransactionDischarge, TransactionPosting};
use fe2o3_amqp::types::messaging::Outcome;
use serde_json::{json, Value};

use ramqp_bench_compare::amqp::{self, within};
use ramqp_bench_compare::report::{self, histogram, Percentiles};
use ramqp_bench_compare::target::{self, TargetSpec};

/// A transaction of `batch` publishes against `batch` confirmed publishes.
#[derive(Debug, Clone, Parser)]
#[command(name = "txn", version)]
struct Args {
    /// Broker URL; unset: the in-process broker.
    #[arg(long, env = "TXN_URL")]
    url: Option<String>,
    /// Queue address.
    #[arg(long, env = "TXN_ADDRESS", default_value = "/quorum/txn-bench")]
    address: String,
    /// Messages per transaction (and per confirmed batch).
    #[arg(long, env = "TXN_BATCH", default_value_t = 10)]
    batch: usize,
    /// Recorded rounds of each kind per trial.
    #[arg(long, env = "TXN_ROUNDS", default_value_t = 500)]
    rounds: u64,
    /// Rounds of each kind discarded first.
    #[arg(long, env = "TXN_WARMUP", default_value_t = 50)]
    warmup: u64,
    /// Trials (fresh connections; a fresh in-process broker each).
    #[arg(long, env = "TXN_TRIALS", default_value_t = 3)]
    trials: u32,
    /// Body size in bytes.
    #[arg(long, env = "TXN_PAYLOAD", default_value_t = 256)]
    payload: usize,
    /// Longest wait for any single step, ms.
    #[arg(long, env = "TXN_TIMEOUT_MS", default_value_t = 10_000)]
    timeout_ms: u64,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    target::init_stderr_logs();
    let spec = TargetSpec {
        url: args.url.clone(),
        ..TargetSpec::default()
    };
    let mut trials = Vec::new();
    for trial in 0..args.trials {
        let result = run_trial(&args, &spec)
            .await
            .with_context(|| format!("trial {trial}"))?;
        eprintln!(
            "txn: trial {trial}: confirmed {} | transaction {} | after declare {}",
            line(&result, "confirmed_us"),
            line(&result, "transaction_us"),
            line(&result, "after_declare_us"),
        );
        trials.push(result);
    }
    let mut out = report::context(
        "txn",
        &scenario(&args),
        target::describe(&spec, &args.address),
    );
    out.insert(
        "params".into(),
        json!({"batch": args.batch, "rounds": args.rounds, "warmup": args.warmup,
               "payload": args.payload, "trials": args.trials}),
    );
    out.insert(
        "summary".into(),
        report::summarize(
            &trials,
            &[
                "/confirmed_us/p50",
                "/transaction_us/p50",
                "/after_declare_us/p50",
                "/ratio_p50",
                "/ratio_after_declare_p50",
            ],
        ),
    );
    out.insert("trials".into(), Value::Array(trials));
    report::emit(&Value::Object(out))
}

fn scenario(args: &Args) -> String {
    format!(
        "{} messages per commit vs {} confirmed in flight",
        args.batch, args.batch
    )
}

fn line(result: &Value, key: &str) -> String {
    let p50 = result
        .pointer(&format!("/{key}/p50"))
        .and_then(Value::as_f64);
    let p99 = result
        .pointer(&format!("/{key}/p99"))
        .and_then(Value::as_f64);
    format!(
        "p50 {:.1} p99 {:.1} µs",
        p50.unwrap_or(f64::NAN),
        p99.unwrap_or(f64::NAN)
    )
}

async fn run_trial(args: &Args, spec: &TargetSpec) -> Result<Value> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let target = spec.start().await?;
    let url = target.url();
    let mut endpoint = amqp::connect(&url, "ramqp-txn-bench", timeout).await?;
    let mut sender = endpoint.sender("txn-bench", &args.address, false).await?;
    let controller = within(
        timeout,
        "attach the coordinator",
        Controller::attach(&mut endpoint.session, "txn-bench-ctl"),
    )
    .await?;
    let body = vec![0x5a; args.payload];
    let (mut confirmed, mut whole, mut after) = (histogram(), histogram(), histogram());
    for round in 0..args.warmup + args.rounds {
        let record = round >= args.warmup;
        let started = Instant::now();
        let mut confirms = Vec::with_capacity(args.batch);
        for _ in 0..args.batch {
            let fut = within(
                timeout,
                "publish",
                sender.send_batchable(amqp::message(body.clone())),
            )
            .await?;
            confirms.push(fut);
        }
        for fut in confirms {
            amqp::confirmed(fut, timeout, &|| format!("round {round}")).await?;
        }
        let took = started.elapsed();
        if record {
            confirmed.record(took.as_nanos() as u64)?;
        }

        let started = Instant::now();
        let txn = within(timeout, "declare", Transaction::declare(&controller, None)).await?;
        let declared = Instant::now();
        let mut posts = Vec::with_capacity(args.batch);
        for _ in 0..args.batch {
            let fut = within(
                timeout,
                "post",
                txn.post_batchable(&mut sender, amqp::message(body.clone())),
            )
            .await?;
            posts.push(fut);
        }
        for fut in posts {
            match tokio::time::timeout(timeout, fut).await {
                Ok(Ok(Outcome::Accepted(_))) => {}
                other => return Err(anyhow!("round {round}: post not accepted: {other:?}")),
            }
        }
        within(timeout, "commit", txn.commit()).await?;
        let done = Instant::now();
        if record {
            whole.record((done - started).as_nanos() as u64)?;
            after.record((done - declared).as_nanos() as u64)?;
        }
    }
    let _ = within(timeout, "close controller", controller.close()).await;
    let _ = amqp::close_sender(sender, timeout).await;
    let _ = endpoint.close().await;
    target.shutdown().await;
    let (c, w, a) = (
        Percentiles::of(&confirmed),
        Percentiles::of(&whole),
        Percentiles::of(&after),
    );
    Ok(json!({
        "confirmed_us": c,
        "transaction_us": w,
        "after_declare_us": a,
        "ratio_p50": ratio(w.p50, c.p50),
        "ratio_after_declare_p50": ratio(a.p50, c.p50),
    }))
}

/// `a / b` to three decimals.
fn ratio(a: f64, b: f64) -> f64 {
    (a / b * 1000.0).round() / 1000.0
}
