//! `ramqp-brokerd`: one ramqp AMQP 1.0 broker node as a process.
//!
//! Reads the command line, the optional TOML config file and `RAMQP_*`
//! environment variables (see `settings`), sets up logging, runs the broker
//! until SIGINT/SIGTERM. Exit codes: 0 after a graceful shutdown, 2 for a
//! rejected configuration, 70 after a fatal storage fault (fail-stop, see
//! `daemon`), 1 for any other failure.

// Unsafe code only in `heap_trim` (two glibc calls) and `malloc_arenas`
// (one), allowed there alone.
#![deny(unsafe_code)]

mod cli;
mod crash_at;
mod daemon;
mod fd_limit;
mod heap_trim;
mod logging;
mod malloc_arenas;
mod runtime;
mod settings;

use std::process::ExitCode;

use clap::Parser;

/// Exit code for a configuration the daemon refuses (the same one clap
/// uses for a bad command line).
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let settings = match settings::resolve(&cli) {
        Ok(settings) => settings,
        Err(error) => return config_error(&error),
    };
    let flavor = match settings.runtime.resolved_flavor() {
        Ok(flavor) => flavor,
        Err(error) => return config_error(&error),
    };
    // Before logging's thread and the runtime's start allocating.
    let arenas = malloc_arenas::limit(settings.runtime.workers());
    if let Err(error) = logging::init(&settings.log) {
        return config_error(&error);
    }
    if let Some(arenas) = arenas {
        tracing::debug!(arenas, "malloc arenas limited");
    }
    match crash_at::arm_from_env() {
        Ok(None) => {}
        Ok(Some(point)) => {
            tracing::warn!(%point, "{} is set: this process kills itself there", crash_at::VAR)
        }
        Err(error) => return config_error(&error),
    }
    match fd_limit::raise_open_files() {
        Ok((before, after)) => tracing::debug!(?before, ?after, "open-file limit"),
        Err(error) => tracing::warn!(%error, "cannot raise the open-file limit"),
    }
    if let Err(error) = heap_trim::spawn() {
        tracing::warn!(%error, "cannot start the heap-trim thread");
    }
    let broker_config = settings.broker;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        listen = %broker_config.listen,
        data_dir = %broker_config
            .data_dir
            .as_deref()
            .map_or_else(|| "<temporary>".into(), |dir| dir.display().to_string()),
        tls_listen = ?broker_config.tls.listen,
        ws_listen = ?broker_config.websocket.listen,
        plain_listener = broker_config.listen_plain,
        anonymous = broker_config.sasl.anonymous_allowed(),
        users_file = ?broker_config.sasl.users_file,
        auto_create = broker_config.queues.auto_create,
        max_frame_size = broker_config.limits.max_frame_size_bytes,
        idle_timeout_ms = broker_config.limits.idle_timeout_ms,
        worker_threads = settings.runtime.worker_threads,
        "starting ramqp-brokerd"
    );

    if !broker_config.sasl.users.is_empty() {
        tracing::warn!(
            users = broker_config.sasl.users.len(),
            "plaintext [sasl] users / --sasl-user are deprecated: they get every permission; \
             move them to a users file (ramqp-ctl user add --file FILE ...; --users FILE)"
        );
    }

    let runtime = match runtime::build(&settings.runtime, flavor) {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the tokio runtime");
            eprintln!("ramqp-brokerd: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // tokio's own count, so an operator (and the interop test) sees what
    // the setting gave.
    tracing::info!(
        workers = runtime.metrics().num_workers(),
        flavor = flavor.as_str(),
        "async runtime started"
    );
    let outcome = runtime.block_on(daemon::run(broker_config, cli.config.clone()));
    // Connection tasks that ignored the shutdown must not keep the process
    // alive past its exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(daemon::Failure::Config(message)) => config_error(&settings::ConfigError(format!(
            "invalid configuration: {message}"
        ))),
        Err(daemon::Failure::Runtime(error)) => {
            tracing::error!(error = format!("{error:#}"), "ramqp-brokerd failed");
            eprintln!("ramqp-brokerd: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn config_error(error: &dyn std::fmt::Display) -> ExitCode {
    // Plain stderr rather than a log line: logging may not be set up yet,
    // and the operator needs to see this whatever the log settings are.
    eprintln!("ramqp-brokerd: configuration error: {error}");
    ExitCode::from(EXIT_CONFIG)
}
