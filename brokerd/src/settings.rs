//! Effective settings of one daemon run: the TOML config file parsed into
//! the broker's own [`BrokerConfig`] plus the daemon's `[log]` and
//! `[runtime]` tables, then overridden by flags and `RAMQP_*` environment
//! variables.
//!
//! Precedence is flag > environment > config file > default. clap already
//! resolves flag > environment (an unset flag falls back to its variable),
//! so this module only has to lay the `Cli` values over the file's.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use broker::config::User;
use broker::BrokerConfig;
use serde::Deserialize;
use toml::de::{DeTable, Deserializer};
use toml::Spanned;

use crate::cli::{Cli, LogFormat, RuntimeFlavor};

/// Where the daemon listens when neither the file nor a flag says. The
/// library's own default is port 0, right for embedded tests but useless
/// for a service clients must find.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    5672,
));

/// The daemon's data directory when none is configured, relative to the
/// working directory. The library would use a throw-away temporary
/// directory instead, which a long-running node must not.
pub const DEFAULT_DATA_DIR: &str = "ramqp-data";

/// The default log filter. openraft reports every failed RPC to an
/// unreachable peer at WARN/ERROR, per group, twice a second: with many
/// queues and one node down that would bury everything else. Our own code
/// logs what matters about leadership and failures at INFO/WARN.
pub const DEFAULT_LOG_FILTER: &str = "info,openraft=error,openraft::replication=off";

/// The `[log]` table of the config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A tracing-subscriber `EnvFilter` directive list, e.g. "info".
    pub level: String,
    /// Text or JSON lines.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: DEFAULT_LOG_FILTER.to_owned(),
            format: LogFormat::Text,
        }
    }
}

/// The `[runtime]` table of the config file: the process's tokio runtime,
/// which only the daemon builds (an embedding program brings its own).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Worker threads of the async runtime; absent or 0: one per core.
    /// Several nodes on one machine do better with a share of the cores
    /// each: a task woken on a parked worker of its own node costs a
    /// thread wake-up, and more workers than cores only add them
    /// (`deploy/local-cluster.sh` gives each node the cores divided by the
    /// node count, at least 1).
    pub worker_threads: usize,
    /// The scheduler: `auto` (the default) runs one worker as tokio's
    /// current-thread scheduler, on the process's main thread, where a
    /// multi-thread runtime of one worker would keep its work-stealing
    /// state and poll the daemon's own future on a second thread
    /// (`runtime.rs`).
    pub flavor: RuntimeFlavor,
}

impl RuntimeConfig {
    /// Worker threads this configuration gives on this machine.
    pub fn workers(&self) -> usize {
        match self.worker_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// The scheduler this configuration gives on this machine (`auto`
    /// resolved), or why it is refused.
    pub fn resolved_flavor(&self) -> Result<RuntimeFlavor, ConfigError> {
        match (self.flavor, self.workers()) {
            (RuntimeFlavor::Auto, 1) => Ok(RuntimeFlavor::CurrentThread),
            (RuntimeFlavor::Auto, _) => Ok(RuntimeFlavor::MultiThread),
            (RuntimeFlavor::CurrentThread, n) if n > 1 => Err(ConfigError(format!(
                "runtime flavor current-thread runs one worker, but worker_threads gives {n}"
            ))),
            (flavor, _) => Ok(flavor),
        }
    }
}

/// Everything the daemon needs to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Handed unchanged to `Broker::start`.
    pub broker: BrokerConfig,
    /// Logging set-up.
    pub log: LogConfig,
    /// The async runtime's set-up.
    pub runtime: RuntimeConfig,
    /// The config file set `listen` (so a TLS listener does not turn the
    /// plain one off).
    pub listen_given: bool,
}

impl Default for Settings {
    /// The settings of a run with no config file and no flags.
    fn default() -> Self {
        Settings {
            broker: BrokerConfig {
                listen: DEFAULT_LISTEN,
                data_dir: Some(PathBuf::from(DEFAULT_DATA_DIR)),
                ..BrokerConfig::default()
            },
            log: LogConfig::default(),
            runtime: RuntimeConfig::default(),
            listen_given: false,
        }
    }
}

/// A rejected configuration: the daemon prints it and exits with code 2.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Read the config file named on the command line (if any) and apply the
/// flags and environment variables on top.
pub fn resolve(cli: &Cli) -> Result<Settings, ConfigError> {
    let base = match &cli.config {
        Some(path) => load_file(path)?,
        None => Settings::default(),
    };
    Ok(apply_cli(base, cli))
}

/// Read and parse one config file.
pub fn load_file(path: &Path) -> Result<Settings, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
    parse_file(&text).map_err(|e| ConfigError(format!("config file {}: {e}", path.display())))
}

/// Parse the text of a config file. Keys it does not set keep the daemon's
/// defaults (see [`Settings::default`]).
///
/// The document is split into the daemon's own entries (`log`, `runtime`)
/// and everything else, and the rest is deserialized straight into
/// [`BrokerConfig`]. Doing it this way
/// (rather than a wrapper struct with `#[serde(flatten)]`) keeps the
/// library's `deny_unknown_fields` in force at the top level, and keeps the
/// spans, so a typo is reported with its line and the list of valid keys.
pub fn parse_file(text: &str) -> Result<Settings, toml::de::Error> {
    let document = DeTable::parse(text)?;
    let span = document.span();
    let mut broker_table = DeTable::new();
    let mut daemon_table = DeTable::new();
    for (key, value) in document.into_inner() {
        if matches!(key.get_ref().as_ref(), "log" | "runtime") {
            daemon_table.insert(key, value);
        } else {
            broker_table.insert(key, value);
        }
    }
    let listen_given = broker_table.keys().any(|key| key.get_ref() == "listen");

    let with_input = |mut error: toml::de::Error| {
        // Without the input the error has no line number or excerpt.
        error.set_input(Some(text));
        error
    };
    let mut broker =
        BrokerConfig::deserialize(Deserializer::from(Spanned::new(span.clone(), broker_table)))
            .map_err(with_input)?;
    let DaemonSections { log, runtime } =
        DaemonSections::deserialize(Deserializer::from(Spanned::new(span, daemon_table)))
            .map_err(with_input)?;
    // Patterns and dead-letter addresses are checked here too, so a bad
    // one is reported with the file's name (the broker checks again).
    broker::queue::PolicySet::compile(&broker.policies)
        .map_err(|e| <toml::de::Error as serde::de::Error>::custom(e.to_string()))?;

    if !listen_given {
        broker.listen = DEFAULT_LISTEN;
    }
    if broker.data_dir.is_none() {
        broker.data_dir = Some(PathBuf::from(DEFAULT_DATA_DIR));
    }
    Ok(Settings {
        broker,
        log,
        runtime,
        listen_given,
    })
}

/// Only the daemon's own entries of the document.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct DaemonSections {
    log: LogConfig,
    runtime: RuntimeConfig,
}

/// Lay the flags (or, where a flag is absent, its environment variable, as
/// clap resolved it) over `settings`.
pub fn apply_cli(mut settings: Settings, cli: &Cli) -> Settings {
    let listen_given = settings.listen_given;
    let broker = &mut settings.broker;
    if let Some(listen) = cli.listen {
        broker.listen = listen;
    }
    if let Some(addr) = cli.ws_listen {
        broker.websocket.listen = Some(addr);
    }
    if let Some(addr) = cli.http_listen {
        broker.http.listen = Some(addr);
    }
    if cli.http_tls {
        broker.http.tls = true;
    }
    if let Some(addr) = cli.tls_listen {
        broker.tls.listen = Some(addr);
    }
    if let Some(path) = &cli.tls_cert {
        broker.tls.cert_file = Some(path.clone());
    }
    if let Some(path) = &cli.tls_key {
        broker.tls.key_file = Some(path.clone());
    }
    if let Some(path) = &cli.tls_client_ca {
        broker.tls.client_ca_file = Some(path.clone());
    }
    // A TLS listener alone: nobody asked for the plain one.
    if broker.tls.listen.is_some() && cli.listen.is_none() && !listen_given {
        broker.listen_plain = false;
    }
    if let Some(path) = &cli.users {
        broker.sasl.users_file = Some(path.clone());
    }
    if cli.allow_anonymous {
        broker.sasl.allow_anonymous = Some(true);
    }
    if let Some(dir) = &cli.data_dir {
        broker.data_dir = Some(dir.clone());
    }
    if let Some(bytes) = cli.max_frame_size {
        broker.limits.max_frame_size_bytes = bytes;
    }
    if let Some(bytes) = cli.max_frame_size_before_open {
        broker.limits.max_frame_size_before_open_bytes = bytes;
    }
    if let Some(n) = cli.max_connections_per_address {
        broker.limits.max_connections_per_address = n;
    }
    if let Some(ms) = cli.idle_timeout_ms {
        broker.limits.idle_timeout_ms = ms;
    }
    if let Some(bytes) = cli.resident_budget {
        broker.quorum.resident_budget_bytes = bytes;
    }
    if let Some(bytes) = cli.queue_resident_budget {
        broker.quorum.queue_resident_budget_bytes = bytes;
    }
    if let Some(bytes) = cli.segment_max_bytes {
        broker.quorum.segment_max_bytes = bytes;
    }
    if let Some(bytes) = cli.segment_writeback_step {
        broker.quorum.segment_writeback_step_bytes = bytes;
    }
    if let Some(bytes) = cli.min_free_disk {
        broker.quorum.min_free_disk_bytes = bytes;
    }
    if let Some(bytes) = cli.max_data_bytes {
        broker.quorum.max_data_bytes = bytes;
    }
    if let Some(bytes) = cli.memory_high_watermark {
        broker.quorum.memory_high_watermark_bytes = bytes;
    }
    // Switches can only turn a feature off: an absent switch means "not
    // set here", so the file's value stands.
    if cli.no_anonymous {
        broker.sasl.allow_anonymous = Some(false);
    }
    if cli.no_auto_create {
        broker.queues.auto_create = false;
    }
    for user in &cli.sasl_user {
        // A user given on the command line is more specific than the
        // file's entry for the same name (e.g. a rotated password).
        broker.sasl.users.retain(|u| u.username != user.username);
        broker.sasl.users.push(User {
            username: user.username.clone(),
            password: user.password.clone(),
        });
    }
    if let Some(id) = cli.node_id {
        broker.quorum.node_id = id;
    }
    if let Some(addr) = cli.fabric_listen {
        broker.cluster.fabric_listen = Some(addr);
    }
    if !cli.peer.is_empty() {
        broker.cluster.peers = cli.peer.clone();
    }
    if let Some(name) = &cli.cluster_name {
        broker.cluster.name = name.clone();
    }
    let fabric_tls = &mut broker.cluster.tls;
    for (flag, field) in [
        (&cli.fabric_tls_ca, &mut fabric_tls.ca_file),
        (&cli.fabric_tls_cert, &mut fabric_tls.cert_file),
        (&cli.fabric_tls_key, &mut fabric_tls.key_file),
    ] {
        if let Some(path) = flag {
            *field = Some(path.clone());
        }
    }
    if let Some(name) = &cli.fabric_tls_server_name {
        fabric_tls.server_name = Some(name.clone());
    }
    if cli.join {
        broker.cluster.join = true;
    }
    if cli.allow_fault_injection {
        broker.cluster.allow_fault_injection = true;
    }
    if let Some(level) = &cli.log_level {
        settings.log.level = level.clone();
    }
    if let Some(format) = cli.log_format {
        settings.log.format = format;
    }
    if let Some(n) = cli.worker_threads {
        settings.runtime.worker_threads = n;
    }
    if let Some(flavor) = cli.runtime_flavor {
        settings.runtime.flavor = flavor;
    }
    settings
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
