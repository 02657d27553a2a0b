//! `probe`: a minimal connectivity check with per-step timeouts — connect,
//! attach, publish one message, receive and accept it — printing each step.
//! Handy when bringing up a broker or a new client path. `RUST_LOG=debug`
//! shows the in-process broker's logs.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use fe2o3_amqp::types::messaging::Data;

use ramqp_bench_compare::amqp::{self, within};
use ramqp_bench_compare::target::TargetSpec;

/// Connect, publish one message, receive it; every step timed out.
#[derive(Debug, Parser)]
#[command(name = "probe", version)]
struct Args {
    /// Broker URL; unset: the in-process broker.
    #[arg(long, env = "PROBE_URL")]
    url: Option<String>,
    /// Queue address.
    #[arg(long, env = "PROBE_ADDRESS", default_value = "/queues/probe")]
    address: String,
    /// Timeout per step, ms.
    #[arg(long, env = "PROBE_TIMEOUT_MS", default_value_t = 5_000)]
    timeout_ms: u64,
    /// Publish unsettled and wait for the outcome.
    #[arg(long)]
    confirm: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ramqp_bench_compare::target::init_stderr_logs();
    let timeout = Duration::from_millis(args.timeout_ms);
    let spec = TargetSpec {
        url: args.url.clone(),
        ..TargetSpec::default()
    };
    let target = spec.start().await?;
    let url = target.url();
    let t = Instant::now();
    let step = |name: &str| eprintln!("probe: {:>9.3} ms  {name}", t.elapsed().as_secs_f64() * 1e3);
    let mut publisher = amqp::connect(&url, "ramqp-probe-pub", timeout)
        .await
        .context("publisher connection")?;
    step("publisher connected");
    let mut consumer = amqp::connect(&url, "ramqp-probe-con", timeout)
        .await
        .context("consumer connection")?;
    step("consumer connected");
    let mut sender = publisher
        .sender("probe-sender", &args.address, !args.confirm)
        .await?;
    step("sender attached");
    let mut receiver = consumer
        .receiver("probe-receiver", &args.address, 10)
        .await?;
    step("receiver attached");
    let outcome = within(
        timeout,
        "send",
        sender.send(amqp::message(b"probe".to_vec())),
    )
    .await?;
    step(&format!("sent: {outcome:?}"));
    let delivery = within(timeout, "receive", receiver.recv::<Data>()).await?;
    step(&format!("received {} bytes", delivery.body().0.len()));
    within(timeout, "accept", receiver.accept(&delivery)).await?;
    step("accepted");
    // Some brokers answer a closing detach in ways fe2o3 rejects (RabbitMQ
    // 3.10: IllegalState); report it and go on closing.
    for (what, closed) in [
        ("sender", amqp::close_sender(sender, timeout).await),
        ("receiver", amqp::close_receiver(receiver, timeout).await),
    ] {
        match closed {
            Ok(()) => step(&format!("{what} closed")),
            Err(error) => step(&format!("{what} close FAILED: {error:#}")),
        }
    }
    publisher.close().await?;
    consumer.close().await?;
    step("connections closed");
    target.shutdown().await;
    step("broker stopped");
    if delivery.body().0.as_slice() != b"probe" {
        return Err(anyhow!("received a different body"));
    }
    Ok(())
}
