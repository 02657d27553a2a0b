//! Command-line interface of `ramqp-brokerd`: every flag, its environment
//! variable and its help text.
//!
//! Every field is optional (or a switch that defaults to off) on purpose:
//! "not given" must stay distinguishable from "given the default value" so
//! that a flag or environment variable only overrides the config file when
//! the operator actually set it (see `settings::resolve`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use broker::config::PeerAddress;
use clap::builder::BoolishValueParser;
use clap::{ArgAction, Parser, ValueEnum};
use serde::Deserialize;

/// Shown after the option list of `--help`: an example file and the rules
/// that decide which setting wins. Kept in sync with the parser by the
/// `after_help_example_parses` unit test.
pub const AFTER_HELP: &str = "\
Precedence: command-line flag > RAMQP_* environment variable > config file >
built-in default. Without any argument the broker serves ANONYMOUS clients on
127.0.0.1:5672 with its data in ./ramqp-data.

Example config file (every key optional; see deploy/ramqp.example.toml and
docs/operations.md for all of them):

    listen = \"0.0.0.0:5672\"
    data_dir = \"/var/lib/ramqp\"

    [log]
    level = \"info\"          # or e.g. \"info,broker=debug\"
    format = \"json\"         # \"text\" or \"json\"

    [limits]
    max_frame_size_bytes = 262144
    idle_timeout_ms = 60000

    [sasl]
    users_file = \"/etc/ramqp/users.toml\"   # ramqp-ctl user add --file ...
    allow_anonymous = false

    [tls]
    listen = \"0.0.0.0:5671\"
    cert_file = \"/etc/ramqp/server.pem\"
    key_file = \"/etc/ramqp/server.key\"

    [http]                    # health, metrics, management API
    listen = \"0.0.0.0:15672\"
    tls = true                # HTTPS with the [tls] certificate

    [queues]
    auto_create = false
    declare = [\"orders\", \"audit\"]

    [quorum]
    node_id = 1
    resident_budget_bytes = 67108864   # bodies in memory, whole node

    [cluster]                 # cluster mode: the fabric between nodes
    fabric_listen = \"127.0.0.1:5682\"
    peers = [\"2=127.0.0.1:5683\", \"3=127.0.0.1:5684\"]

    [cluster.tls]             # mutual TLS between nodes and ramqp-ctl
    ca_file = \"/etc/ramqp/cluster-ca.pem\"
    cert_file = \"/etc/ramqp/node.pem\"     # SAN DNS:ramqp-fabric
    key_file = \"/etc/ramqp/node.key\"

Signals: SIGHUP re-reads the TLS certificate, key and client CA and the users
file (new connections use them), and the config file's [[policies]] (queue
policies, put on every queue at once). SIGTERM or SIGINT close every connection with
amqp:connection:forced and exit 0 (in cluster mode after handing away the leadership of every
queue this node leads). Exit code 2 means the configuration was rejected;
70 that the node stopped on a storage fault (a failed write or fsync, a full
disk) and must be restarted to recover from its data directory.
Once listening, the line `ramqp-brokerd listening on <addr>` is printed to
stdout (the plain listener, or the TLS one if there is no plain one), then,
with TLS, `ramqp-brokerd tls listening on <addr>`; logs go to stderr.";

/// The `ramqp-brokerd` command line.
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "ramqp-brokerd",
    version,
    about = "ramqp AMQP 1.0 broker node",
    long_about = "ramqp AMQP 1.0 broker node. Clients connect with any AMQP 1.0 \
                  client and use the addresses /queues/<name>.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// TOML config file. Its top level holds `listen`, `data_dir`,
    /// `container_id` and the tables [log], [limits], [sasl], [queues];
    /// unknown keys are an error.
    #[arg(long, env = "RAMQP_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address the AMQP listener binds; port 0 picks a free port (the
    /// chosen address is printed on stdout) [default: 127.0.0.1:5672].
    #[arg(long, env = "RAMQP_LISTEN", value_name = "HOST:PORT", value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,

    /// Directory for the node's data, created if missing
    /// [default: ./ramqp-data].
    #[arg(long, env = "RAMQP_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Log filter: a level (error, warn, info, debug, trace) or a
    /// tracing-subscriber directive list such as "info,broker=debug"
    /// [default: info,openraft=error,openraft::replication=off].
    #[arg(long, env = "RAMQP_LOG_LEVEL", value_name = "FILTER")]
    pub log_level: Option<String>,

    /// Log line format on stderr [default: text].
    #[arg(long, env = "RAMQP_LOG_FORMAT", value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    /// Worker threads of the async runtime; 0 means one per core
    /// (`[runtime] worker_threads`) [default: 0].
    #[arg(long, env = "RAMQP_WORKER_THREADS", value_name = "N")]
    pub worker_threads: Option<usize>,

    /// Scheduler of the async runtime (`[runtime] flavor`) [default:
    /// auto: current-thread with one worker, else multi-thread].
    #[arg(long, env = "RAMQP_RUNTIME_FLAVOR", value_name = "FLAVOR")]
    pub runtime_flavor: Option<RuntimeFlavor>,

    /// Address of the TLS (amqps) listener; needs --tls-cert and --tls-key.
    /// Without --listen (flag, variable or file) there is then no plain
    /// listener. Clients may also start TLS on the plain listener with
    /// the AMQP TLS header (`[tls] listen`) [default: none].
    #[arg(long, env = "RAMQP_TLS_LISTEN", value_name = "HOST:PORT", value_parser = parse_listen)]
    pub tls_listen: Option<SocketAddr>,

    /// The server's certificate chain, PEM, leaf first; re-read on SIGHUP
    /// (`[tls] cert_file`).
    #[arg(long, env = "RAMQP_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,

    /// The server's private key, PEM; re-read on SIGHUP (`[tls] key_file`).
    #[arg(long, env = "RAMQP_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,

    /// CA certificates (PEM) that client certificates are verified
    /// against; a client with a valid one may log in with SASL EXTERNAL as
    /// its subject CN (a user of --users, if given). Re-read on SIGHUP
    /// (`[tls] client_ca_file`).
    #[arg(long, env = "RAMQP_TLS_CLIENT_CA", value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,

    /// Serve AMQP over WebSocket (subprotocol `amqp`, binary messages) on
    /// this address; wss with the --tls-* certificates when TLS is
    /// configured, ws otherwise (`[websocket] listen`) [default: none].
    #[arg(long, env = "RAMQP_WS_LISTEN", value_name = "HOST:PORT", value_parser = parse_listen)]
    pub ws_listen: Option<SocketAddr>,

    /// Serve HTTP on this address: /healthz (alive), /readyz (serving:
    /// metadata leader known, store writable, no disk alarm) and /metrics
    /// (Prometheus text), not authenticated: bind it to a private address;
    /// and the JSON management API under /api/ (basic auth with the
    /// --users credentials), which answers only on a loopback address or
    /// with --http-tls (`[http] listen`) [default: none].
    #[arg(long, env = "RAMQP_HTTP_LISTEN", value_name = "HOST:PORT", value_parser = parse_listen)]
    pub http_listen: Option<SocketAddr>,

    /// Serve --http-listen as HTTPS with the AMQP TLS certificate and key
    /// (--tls-listen, --tls-cert, --tls-key), so the management API may
    /// be reached from other hosts (`[http] tls = true`).
    #[arg(
        long,
        env = "RAMQP_HTTP_TLS",
        action = ArgAction::SetTrue,
        value_parser = BoolishValueParser::new()
    )]
    pub http_tls: bool,

    /// The users file: salted SCRAM-SHA-256 credentials and permissions,
    /// managed with `ramqp-ctl user add|delete|list --file FILE`. PLAIN and
    /// SCRAM-SHA-256 are checked against it, attaches authorized by its
    /// permissions, and ANONYMOUS is off unless --allow-anonymous.
    /// Re-read on SIGHUP (`[sasl] users_file`).
    #[arg(long, env = "RAMQP_USERS", value_name = "FILE")]
    pub users: Option<PathBuf>,

    /// Accept SASL ANONYMOUS (and connections without SASL) even with a
    /// users file; they get the permissions of its user "anonymous", or
    /// none (`[sasl] allow_anonymous = true`).
    #[arg(
        long,
        env = "RAMQP_ALLOW_ANONYMOUS",
        action = ArgAction::SetTrue,
        value_parser = BoolishValueParser::new(),
        conflicts_with = "no_anonymous"
    )]
    pub allow_anonymous: bool,

    /// Deprecated (use --users): a SASL PLAIN user as NAME:PASSWORD (split
    /// at the first ':'), with every permission. Repeatable; in the
    /// environment variable separate users with ','. Added to the config
    /// file's [sasl] users; a flag user replaces a file user of the same
    /// name.
    #[arg(
        long,
        env = "RAMQP_SASL_USER",
        value_name = "NAME:PASSWORD",
        value_parser = parse_user,
        value_delimiter = ',',
        action = ArgAction::Append,
        hide_env_values = true
    )]
    pub sasl_user: Vec<UserArg>,

    /// Refuse SASL ANONYMOUS and connections without SASL; needs some way
    /// to log in (--users, --sasl-user or --tls-client-ca).
    #[arg(
        long,
        env = "RAMQP_NO_ANONYMOUS",
        action = ArgAction::SetTrue,
        value_parser = BoolishValueParser::new()
    )]
    pub no_anonymous: bool,

    /// Do not create queues on first attach: an attach to an unknown
    /// /queues/<name> is refused with amqp:not-found. Declare queues in
    /// the config file's [queues] declare list.
    #[arg(
        long,
        env = "RAMQP_NO_AUTO_CREATE",
        action = ArgAction::SetTrue,
        value_parser = BoolishValueParser::new()
    )]
    pub no_auto_create: bool,

    /// Largest frame accepted, announced as max-frame-size in `open`
    /// (at least 512) [default: 262144].
    #[arg(long, env = "RAMQP_MAX_FRAME_SIZE", value_name = "BYTES")]
    pub max_frame_size: Option<u32>,

    /// Largest frame accepted before a peer's `open` (SASL frames and the
    /// `open` itself), at least 512; never above --max-frame-size
    /// [default: 8192].
    #[arg(long, env = "RAMQP_MAX_FRAME_SIZE_BEFORE_OPEN", value_name = "BYTES")]
    pub max_frame_size_before_open: Option<u32>,

    /// Most connections at once from one source IP address, counted from
    /// accept (before TLS and login); further ones are dropped at once.
    /// 0: no limit [default: 1000].
    #[arg(long, env = "RAMQP_MAX_CONNECTIONS_PER_ADDRESS", value_name = "N")]
    pub max_connections_per_address: Option<usize>,

    /// Idle time-out announced to peers; a peer silent this long is closed.
    /// 0 disables it [default: 60000].
    #[arg(long, env = "RAMQP_IDLE_TIMEOUT_MS", value_name = "MS")]
    pub idle_timeout_ms: Option<u32>,

    /// Bytes of message bodies the node's quorum queues keep in memory
    /// together; past it bodies are paged to segment files (`[quorum]
    /// resident_budget_bytes`) [default: 67108864].
    #[arg(long, env = "RAMQP_RESIDENT_BUDGET", value_name = "BYTES")]
    pub resident_budget: Option<u64>,

    /// Bytes of message bodies one quorum queue keeps in memory at most
    /// (`[quorum] queue_resident_budget_bytes`) [default: 16777216].
    #[arg(long, env = "RAMQP_QUEUE_RESIDENT_BUDGET", value_name = "BYTES")]
    pub queue_resident_budget: Option<u64>,

    /// A quorum queue's segment file rolls past this size (`[quorum]
    /// segment_max_bytes`) [default: 67108864].
    #[arg(long, env = "RAMQP_SEGMENT_MAX_BYTES", value_name = "BYTES", value_parser = clap::value_parser!(u32).range(4096..))]
    pub segment_max_bytes: Option<u32>,

    /// Bytes written to a segment file before the kernel is asked to start
    /// writing them back, so a snapshot's fdatasync is not one burst of
    /// hundreds of MB; 0: no early writeback (`[quorum]
    /// segment_writeback_step_bytes`) [default: 4194304].
    #[arg(long, env = "RAMQP_SEGMENT_WRITEBACK_STEP", value_name = "BYTES")]
    pub segment_writeback_step: Option<u32>,

    /// Publishers to quorum queues get no new credit while free disk space
    /// under the data dir is below this; 0 turns the check off (`[quorum]
    /// min_free_disk_bytes`) [default: 52428800].
    #[arg(long, env = "RAMQP_MIN_FREE_DISK", value_name = "BYTES")]
    pub min_free_disk: Option<u64>,

    /// ... or while the data dir holds more than this; 0: no limit
    /// (`[quorum] max_data_bytes`) [default: 0].
    #[arg(long, env = "RAMQP_MAX_DATA_BYTES", value_name = "BYTES")]
    pub max_data_bytes: Option<u64>,

    /// ... or while the process's resident memory is above this, and then
    /// publishers to transient queues too; 0: no limit
    /// (`[quorum] memory_high_watermark_bytes`) [default: 0].
    #[arg(long, env = "RAMQP_MEMORY_HIGH_WATERMARK", value_name = "BYTES")]
    pub memory_high_watermark: Option<u64>,

    /// This node's id in its cluster: unique, non-zero [default: 1].
    #[arg(long, env = "RAMQP_NODE_ID", value_name = "ID", value_parser = clap::value_parser!(u64).range(1..))]
    pub node_id: Option<u64>,

    /// Address the fabric (inter-node gRPC) listens on; setting it turns
    /// on cluster mode [default: none, the node runs alone].
    #[arg(long, env = "RAMQP_FABRIC_LISTEN", value_name = "HOST:PORT", value_parser = parse_listen)]
    pub fabric_listen: Option<SocketAddr>,

    /// Another node of the cluster and its fabric address, as
    /// ID=HOST:PORT. Repeatable; in the environment variable separate
    /// peers with ','. Replaces the config file's [cluster] peers.
    #[arg(
        long,
        env = "RAMQP_PEERS",
        value_name = "ID=HOST:PORT",
        value_delimiter = ',',
        action = ArgAction::Append
    )]
    pub peer: Vec<PeerAddress>,

    /// Cluster name every node shares; fabric connections from a node of
    /// another cluster are refused [default: ramqp].
    #[arg(long, env = "RAMQP_CLUSTER_NAME", value_name = "NAME")]
    pub cluster_name: Option<String>,

    /// The cluster CA (PEM) for mutual TLS on the fabric: peers and
    /// ramqp-ctl must present a certificate it issued, and so does this
    /// node. Needs --fabric-tls-cert and --fabric-tls-key
    /// (`[cluster.tls] ca_file`) [default: none, plaintext fabric].
    #[arg(long, env = "RAMQP_FABRIC_TLS_CA", value_name = "FILE")]
    pub fabric_tls_ca: Option<PathBuf>,

    /// This node's fabric certificate chain (PEM, leaf first) from the
    /// cluster CA, for server and client authentication, with the fabric
    /// server name as a DNS subject alternative name
    /// (`[cluster.tls] cert_file`).
    #[arg(long, env = "RAMQP_FABRIC_TLS_CERT", value_name = "FILE")]
    pub fabric_tls_cert: Option<PathBuf>,

    /// The private key of --fabric-tls-cert, PEM (`[cluster.tls] key_file`).
    #[arg(long, env = "RAMQP_FABRIC_TLS_KEY", value_name = "FILE")]
    pub fabric_tls_key: Option<PathBuf>,

    /// The DNS name checked in every node's fabric certificate, the same
    /// for the whole cluster (`[cluster.tls] server_name`)
    /// [default: ramqp-fabric].
    #[arg(long, env = "RAMQP_FABRIC_TLS_SERVER_NAME", value_name = "NAME")]
    pub fabric_tls_server_name: Option<String>,

    /// Join a running cluster instead of bootstrapping one: the node waits
    /// until an operator adds it (`ramqp-ctl add-node ID HOST:PORT` on a
    /// member). Give the current members as --peer.
    #[arg(
        long,
        env = "RAMQP_JOIN",
        action = ArgAction::SetTrue,
        value_parser = BoolishValueParser::new()
    )]
    pub join: bool,

    /// Let `ramqp-ctl isolate` cut this node off from its peers (fault
    /// injection for partition tests; never in production).
    #[arg(
        long,
        env = "RAMQP_ALLOW_FAULT_INJECTION",
        action = ArgAction::SetTrue,
        value_parser = BoolishValueParser::new()
    )]
    pub allow_fault_injection: bool,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Which tokio scheduler runs the daemon's tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeFlavor {
    /// `current-thread` when the runtime gets one worker, else
    /// `multi-thread`.
    #[default]
    Auto,
    /// Worker threads that steal each other's tasks; the process's main
    /// thread only waits.
    MultiThread,
    /// Every task on the process's main thread (one worker, no stealing).
    CurrentThread,
}

impl RuntimeFlavor {
    /// The name the flag and the config file take.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeFlavor::Auto => "auto",
            RuntimeFlavor::MultiThread => "multi-thread",
            RuntimeFlavor::CurrentThread => "current-thread",
        }
    }
}

/// One `--sasl-user NAME:PASSWORD` value.
#[derive(Clone, PartialEq, Eq)]
pub struct UserArg {
    /// Login name.
    pub username: String,
    /// Password.
    pub password: String,
}

// Hand-written so that a password never ends up in a log line or a panic
// message through `{:?}`.
impl std::fmt::Debug for UserArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserArg")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

fn parse_user(value: &str) -> Result<UserArg, String> {
    // Split at the first ':' so that passwords may contain ':'.
    let Some((username, password)) = value.split_once(':') else {
        return Err("expected NAME:PASSWORD".to_owned());
    };
    if username.is_empty() {
        return Err("the user name is empty".to_owned());
    }
    Ok(UserArg {
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

fn parse_listen(value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Ok(addr);
    }
    // Also accept a host name such as localhost:5672; binding needs one
    // concrete address, so the first one the resolver returns is taken.
    let mut addrs = value
        .to_socket_addrs()
        .map_err(|e| format!("expected HOST:PORT (e.g. 127.0.0.1:5672): {e}"))?;
    addrs
        .next()
        .ok_or_else(|| format!("{value} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn user_is_split_at_first_colon() {
        let user = parse_user("app:pa:ss").unwrap();
        assert_eq!(user.username, "app");
        assert_eq!(user.password, "pa:ss");
        assert!(parse_user("app:").is_ok(), "empty passwords are allowed");
        assert!(parse_user("nopassword").is_err());
        assert!(parse_user(":pw").is_err());
    }

    #[test]
    fn debug_output_hides_password() {
        let user = parse_user("app:topsecret").unwrap();
        assert!(!format!("{user:?}").contains("topsecret"));
    }

    #[test]
    fn listen_accepts_ip_and_host_names() {
        assert_eq!(
            parse_listen("127.0.0.1:0").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 0))
        );
        assert_eq!(parse_listen("localhost:5672").unwrap().port(), 5672);
        assert!(parse_listen("127.0.0.1").is_err());
        assert!(parse_listen("nonsense").is_err());
    }

    #[test]
    fn help_mentions_every_option_and_its_env_var() {
        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "--config",
            "RAMQP_CONFIG",
            "--listen",
            "RAMQP_LISTEN",
            "--data-dir",
            "RAMQP_DATA_DIR",
            "--log-level",
            "RAMQP_LOG_LEVEL",
            "--log-format",
            "RAMQP_LOG_FORMAT",
            "--sasl-user",
            "RAMQP_SASL_USER",
            "--no-anonymous",
            "RAMQP_NO_ANONYMOUS",
            "--no-auto-create",
            "RAMQP_NO_AUTO_CREATE",
            "--max-frame-size",
            "RAMQP_MAX_FRAME_SIZE",
            "--max-frame-size-before-open",
            "RAMQP_MAX_FRAME_SIZE_BEFORE_OPEN",
            "--max-connections-per-address",
            "RAMQP_MAX_CONNECTIONS_PER_ADDRESS",
            "--idle-timeout-ms",
            "RAMQP_IDLE_TIMEOUT_MS",
            "--node-id",
            "RAMQP_NODE_ID",
            "--fabric-listen",
            "RAMQP_FABRIC_LISTEN",
            "--peer",
            "RAMQP_PEERS",
            "--cluster-name",
            "RAMQP_CLUSTER_NAME",
            "--fabric-tls-ca",
            "RAMQP_FABRIC_TLS_CA",
            "--fabric-tls-cert",
            "RAMQP_FABRIC_TLS_CERT",
            "--fabric-tls-key",
            "RAMQP_FABRIC_TLS_KEY",
            "--fabric-tls-server-name",
            "RAMQP_FABRIC_TLS_SERVER_NAME",
            "[cluster.tls]",
            "--tls-listen",
            "RAMQP_TLS_LISTEN",
            "--tls-cert",
            "RAMQP_TLS_CERT",
            "--tls-key",
            "RAMQP_TLS_KEY",
            "--tls-client-ca",
            "RAMQP_TLS_CLIENT_CA",
            "--ws-listen",
            "RAMQP_WS_LISTEN",
            "--http-listen",
            "RAMQP_HTTP_LISTEN",
            "--http-tls",
            "RAMQP_HTTP_TLS",
            "--users",
            "RAMQP_USERS",
            "--allow-anonymous",
            "RAMQP_ALLOW_ANONYMOUS",
            "SIGHUP",
            "[limits]",
        ] {
            assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
        }
    }
}
