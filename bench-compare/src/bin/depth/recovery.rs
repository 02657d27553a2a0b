//! Recovery mode: with the queue full, stop the broker the bench started
//! (SIGTERM, or SIGKILL), start it again on the same data dir and port, and
//! time how long until it serves the queue again: the port accepting, a
//! receiver attached, the first delivery, and every accepted message back.
//! The count is checked against what the broker had accepted before the
//! stop (missing, duplicated, extra are reported, not fatal).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use ramqp_bench_compare::raw::{Connection, Receiver};

use crate::child::Brokerd;
use crate::drain::{self, Drained};
use crate::progress::Progress;

/// How often a restarting broker's port and queue are tried again.
const RETRY: Duration = Duration::from_millis(20);

/// How to restart and reach the broker.
pub(crate) struct Restart {
    pub(crate) binary: PathBuf,
    pub(crate) data_dir: PathBuf,
    pub(crate) logs: PathBuf,
    pub(crate) addr: SocketAddr,
    pub(crate) address: String,
    pub(crate) run: u32,
    pub(crate) credit: u32,
    pub(crate) kill: bool,
    /// Limit on each single wait (a receive, a connect).
    pub(crate) timeout: Duration,
    /// Limit from the restart to the first delivery.
    pub(crate) limit: Duration,
}

/// What the restart took.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Recovery {
    /// "SIGTERM" or "SIGKILL".
    pub(crate) signal: &'static str,
    /// From the signal to the old process's exit.
    pub(crate) stop_ms: f64,
    /// The old process's exit status.
    pub(crate) exit_status: String,
    /// From the new process's spawn to its AMQP port accepting TCP.
    pub(crate) restart_to_port_ms: f64,
    /// ... to a receiver attached (after `attach_attempts` tries).
    pub(crate) restart_to_attach_ms: f64,
    /// ... to the first delivery received.
    pub(crate) restart_to_first_delivery_ms: f64,
    /// ... to the last accepted message received back.
    pub(crate) restart_to_all_received_ms: f64,
    pub(crate) attach_attempts: u32,
    /// Accepted before the stop; received, missing, duplicated, extra after.
    pub(crate) drained: Drained,
    /// Exactly the accepted messages came back, once each.
    pub(crate) count_matches: bool,
}

/// Stop `old`, restart on the same data dir and port, drain everything.
/// Returns the measurements, the new process and its consumer (still
/// attached, for the caller to close after sampling).
pub(crate) async fn recover(
    old: &mut Brokerd,
    restart: &Restart,
    expected: u64,
    progress: &Progress,
) -> Result<(Recovery, Brokerd, Connection, Receiver)> {
    let signal = if restart.kill { "SIGKILL" } else { "SIGTERM" };
    eprintln!(
        "depth: recovery: stopping ramqp-brokerd (pid {}) with {signal}",
        old.pid
    );
    let (stop_took, exit_status) = old
        .stop(restart.kill, restart.timeout.max(Duration::from_secs(60)))
        .await
        .context("recovery: stop the broker")?;
    let mut new = Brokerd::spawn(
        &restart.binary,
        &restart.addr.to_string(),
        &restart.data_dir,
        &restart.logs,
        "brokerd-restarted",
    )?;
    let t0 = new.spawned_at;
    let deadline = t0 + restart.limit;
    eprintln!(
        "depth: recovery: restarted ramqp-brokerd (pid {}) on {}",
        new.pid, restart.addr
    );

    // The port: poll until it accepts a TCP connection.
    loop {
        new.check_running()
            .context("recovery: the restarted broker")?;
        let probe = tokio::time::timeout(RETRY * 5, tokio::net::TcpStream::connect(restart.addr));
        if let Ok(Ok(_)) = probe.await {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "recovery: port {} not accepting within {:?}",
                restart.addr,
                restart.limit
            );
        }
        tokio::time::sleep(RETRY).await;
    }
    let port_at = Instant::now();

    // A receiver, then its first delivery: retried until the queue serves.
    let url = format!("amqp://{}", restart.addr);
    let mut attempts = 0u32;
    let (mut conn, receiver, attach_started, attach_at, first, first_at) = loop {
        attempts += 1;
        new.check_running()
            .context("recovery: the restarted broker")?;
        let attach_started = Instant::now();
        let error = match drain::attach(
            &url,
            &restart.address,
            restart.run,
            restart.credit,
            restart.timeout,
        )
        .await
        {
            Ok((mut conn, receiver)) => {
                let attach_at = Instant::now();
                let wait = deadline
                    .saturating_duration_since(attach_at)
                    .min(restart.timeout);
                match receiver.recv_within(&mut conn, wait).await {
                    Ok(Some(first)) => {
                        break (
                            conn,
                            receiver,
                            attach_started,
                            attach_at,
                            first,
                            Instant::now(),
                        )
                    }
                    Ok(None) => format!("attached, but no delivery within {wait:?}"),
                    Err(e) => format!("{e:#}"),
                }
            }
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() >= deadline {
            bail!(
                "recovery: no delivery within {:?} of the restart ({attempts} attempts); last: {error}",
                restart.limit
            );
        }
        tokio::time::sleep(RETRY).await;
    };
    eprintln!(
        "depth: recovery: first delivery {:.0} ms after the restart; draining {expected}",
        ms(first_at - t0)
    );
    progress.phase("recovery drain", expected);
    let drained = drain::drain(
        attach_started,
        &mut conn,
        &receiver,
        restart.run,
        expected,
        restart.timeout,
        Some(first),
        progress,
    )
    .await?;
    progress.idle();
    let all_at = attach_started + Duration::from_secs_f64(drained.secs);
    let recovery = Recovery {
        signal,
        stop_ms: ms(stop_took),
        exit_status,
        restart_to_port_ms: ms(port_at - t0),
        restart_to_attach_ms: ms(attach_at - t0),
        restart_to_first_delivery_ms: ms(first_at - t0),
        restart_to_all_received_ms: ms(all_at.saturating_duration_since(t0)),
        attach_attempts: attempts,
        count_matches: drained.exact() && drained.received == expected,
        drained,
    };
    Ok((recovery, new, conn, receiver))
}

/// Milliseconds with one decimal.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}
