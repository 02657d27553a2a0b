//! The daemon's life cycle: start the broker, announce readiness on stdout,
//! wait for SIGINT or SIGTERM, shut down gracefully.

use std::io::Write;

use anyhow::Context;
use broker::{Broker, BrokerConfig, BrokerError};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Why a run ended badly; `main` turns it into an exit code.
#[derive(Debug)]
pub enum Failure {
    /// The configuration was rejected by the broker (exit code 2).
    Config(String),
    /// Anything else: bind failure, data directory, signal set-up
    /// (exit code 1).
    Runtime(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure::Runtime(error)
    }
}

/// SIGINT and SIGTERM streams.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            terminate: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }

    /// Wait for the next SIGINT or SIGTERM.
    async fn next(&mut self) -> Stop {
        tokio::select! {
            _ = self.interrupt.recv() => Stop::Interrupt,
            _ = self.terminate.recv() => Stop::Terminate,
        }
    }
}

/// The signals that stop the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (service managers, `kill`).
    Terminate,
}

impl Stop {
    fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
        }
    }
}

/// Run one broker node until a signal stops it.
pub async fn run(config: BrokerConfig) -> Result<(), Failure> {
    // Handlers go in before the readiness line: a supervisor (or a test)
    // may send SIGTERM the moment it reads that line, and the default
    // action would kill the process without a graceful shutdown.
    let mut signals = Signals::install()?;

    let broker = Broker::start(config).await.map_err(|error| match error {
        BrokerError::Config(message) => Failure::Config(message),
        other => Failure::Runtime(anyhow::Error::new(other).context("starting the broker")),
    })?;
    tracing::info!(
        addr = %broker.local_addr(),
        data_dir = %broker.data_dir().display(),
        "ramqp-brokerd ready"
    );
    announce(&broker);

    let first = signals.next().await;
    tracing::info!(signal = first.name(), "shutting down: closing connections");
    let shutdown = broker.shutdown();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            again = signals.next() => {
                // A second Ctrl-C is an operator who wants out now, not
                // after the grace period. A repeated SIGTERM is not: a
                // supervisor or script may well send it twice, and the
                // graceful path is already under way.
                if again == Stop::Interrupt {
                    tracing::warn!("second SIGINT: exiting without waiting for connections");
                    return Err(Failure::Runtime(anyhow::anyhow!("interrupted during shutdown")));
                }
                tracing::info!(signal = again.name(), "already shutting down");
            }
        }
    }
    tracing::info!("shutdown complete");
    Ok(())
}

/// Print the one stdout line scripts wait for and flush it right away:
/// stdout to a pipe is block-buffered and the reader would hang.
fn announce(broker: &Broker) {
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "ramqp-brokerd listening on {}", broker.local_addr())
        .and_then(|()| stdout.flush());
    if let Err(error) = written {
        // Nobody reading stdout (closed pipe) must not stop the broker.
        tracing::warn!(%error, "cannot write the readiness line to stdout");
    }
}
