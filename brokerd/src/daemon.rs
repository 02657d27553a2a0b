//! The daemon's life cycle: start the broker, announce readiness on stdout,
//! re-read the TLS files, the users file and the config file's queue
//! policies on SIGHUP, wait for SIGINT or
//! SIGTERM, shut down gracefully; or, on a fatal storage
//! fault of the broker (`Broker::fatal`), exit at once with
//! [`EXIT_STORAGE_FAULT`] (fail-stop, see docs/operations.md "Disk errors").

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use broker::{Broker, BrokerConfig, BrokerError, FatalError};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Exit code after a fatal storage fault (a failed fsync or write, a full
/// disk): 70, `EX_SOFTWARE` of sysexits(3), "an internal software error
/// has been detected": the node can no longer serve and must be restarted,
/// which recovers every committed message from disk.
pub const EXIT_STORAGE_FAULT: i32 = 70;

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

/// Run one broker node until a signal stops it. `config_file` is read
/// again on SIGHUP for its `[[policies]]`.
pub async fn run(config: BrokerConfig, config_file: Option<PathBuf>) -> Result<(), Failure> {
    // Handlers go in before the readiness line: a supervisor (or a test)
    // may send SIGTERM the moment it reads that line, and the default
    // action would kill the process without a graceful shutdown.
    let mut signals = Signals::install()?;
    // SIGHUP's default action would kill the process too.
    let mut hangup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;

    let broker = Broker::start(config).await.map_err(|error| match error {
        BrokerError::Config(message) => Failure::Config(message),
        // A missing or bad certificate or users file is the operator's
        // configuration too.
        error @ (BrokerError::Tls(_) | BrokerError::Auth(_)) => Failure::Config(error.to_string()),
        other => Failure::Runtime(anyhow::Error::new(other).context("starting the broker")),
    })?;
    tracing::info!(
        addr = %broker.local_addr(),
        data_dir = %broker.data_dir().display(),
        "ramqp-brokerd ready"
    );
    announce(&broker);

    let fatal = broker.fatal();
    tokio::pin!(fatal);
    let first = loop {
        tokio::select! {
            stop = signals.next() => break stop,
            error = &mut fatal => fail_stop(&error),
            _ = hangup.recv() => reload(&broker, config_file.as_deref()),
        }
    };
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

/// SIGHUP: read the TLS files, the users file and the config file's
/// queue policies again. A part that fails keeps what it had; the error is
/// logged and the broker goes on.
fn reload(broker: &Broker, config_file: Option<&Path>) {
    if let Some(path) = config_file {
        reload_policies(broker, path);
    }
    let reloaded = broker.reload();
    match reloaded.tls {
        Some(Ok(())) => tracing::info!("SIGHUP: TLS certificate, key and client CA reloaded"),
        Some(Err(error)) => {
            tracing::error!(%error, "SIGHUP: TLS reload failed; keeping the old certificates")
        }
        None => {}
    }
    match reloaded.users {
        Some(Ok(users)) => tracing::info!(users, "SIGHUP: users file reloaded"),
        Some(Err(error)) => {
            tracing::error!(%error, "SIGHUP: users file reload failed; keeping the old users")
        }
        None => {}
    }
}

/// The `[[policies]]` of the config file, put in force on every queue of
/// the node. Only the policies are taken from the file: its other settings
/// need a restart.
fn reload_policies(broker: &Broker, path: &Path) {
    let policies = match crate::settings::load_file(path) {
        Ok(settings) => settings.broker.policies,
        Err(error) => {
            tracing::error!(%error, "SIGHUP: config file unreadable; keeping the old policies");
            return;
        }
    };
    match broker.set_policies(&policies) {
        Ok(n) => tracing::info!(policies = n, "SIGHUP: queue policies reloaded"),
        Err(error) => {
            tracing::error!(%error, "SIGHUP: queue policies refused; keeping the old ones")
        }
    }
}

/// Fail-stop: log the fault, print one line on stderr, exit with
/// [`EXIT_STORAGE_FAULT`] at once. No graceful shutdown and no destructors:
/// the log store must not be written again by this process (its in-memory
/// state is ahead of the disk), and a disk that hangs must not hold the
/// exit. A supervisor restarts the node, which recovers from disk.
fn fail_stop(error: &FatalError) -> ! {
    tracing::error!(%error, exit_code = EXIT_STORAGE_FAULT, "fatal storage fault: exiting");
    eprintln!(
        "ramqp-brokerd: fatal: {error}; exiting with code {EXIT_STORAGE_FAULT} \
         (restart the node to recover from its data directory)"
    );
    std::process::exit(EXIT_STORAGE_FAULT)
}

/// Print the one stdout line scripts wait for and flush it right away:
/// stdout to a pipe is block-buffered and the reader would hang.
fn announce(broker: &Broker) {
    let mut stdout = std::io::stdout().lock();
    let mut written = writeln!(stdout, "ramqp-brokerd listening on {}", broker.local_addr());
    if let Some(tls) = broker.tls_addr() {
        written = written.and_then(|()| writeln!(stdout, "ramqp-brokerd tls listening on {tls}"));
    }
    if let Some(ws) = broker.ws_addr() {
        let scheme = if broker.tls_addr().is_some() {
            "wss"
        } else {
            "ws"
        };
        written =
            written.and_then(|()| writeln!(stdout, "ramqp-brokerd {scheme} listening on {ws}"));
    }
    if let Some(http) = broker.http_addr() {
        written = written.and_then(|()| writeln!(stdout, "ramqp-brokerd http listening on {http}"));
    }
    let written = written.and_then(|()| stdout.flush());
    if let Err(error) = written {
        // Nobody reading stdout (closed pipe) must not stop the broker.
        tracing::warn!(%error, "cannot write the readiness line to stdout");
    }
}
