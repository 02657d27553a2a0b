//! Tests of `settings.rs`: defaults, the file, flags over the file, and
//! the errors a bad configuration gets.

use super::*;
use clap::Parser;
use std::sync::Mutex;

#[path = "settings_http_tests.rs"]
mod http;
#[path = "settings_policies_tests.rs"]
mod policies;
#[path = "settings_runtime_tests.rs"]
mod runtime;

/// Tests that parse a command line read the process environment, and
/// one test writes it: they all hold this lock.
static ENV_LOCK: Mutex<()> = Mutex::new(());

const OUR_VARS: &[&str] = &[
    "RAMQP_CONFIG",
    "RAMQP_LISTEN",
    "RAMQP_DATA_DIR",
    "RAMQP_LOG_LEVEL",
    "RAMQP_LOG_FORMAT",
    "RAMQP_SASL_USER",
    "RAMQP_NO_ANONYMOUS",
    "RAMQP_NO_AUTO_CREATE",
    "RAMQP_MAX_FRAME_SIZE",
    "RAMQP_MAX_FRAME_SIZE_BEFORE_OPEN",
    "RAMQP_MAX_CONNECTIONS_PER_ADDRESS",
    "RAMQP_IDLE_TIMEOUT_MS",
    "RAMQP_HTTP_LISTEN",
    "RAMQP_HTTP_TLS",
    "RAMQP_NODE_ID",
    "RAMQP_FABRIC_LISTEN",
    "RAMQP_PEERS",
    "RAMQP_CLUSTER_NAME",
    "RAMQP_ALLOW_FAULT_INJECTION",
    "RAMQP_JOIN",
    "RAMQP_TLS_LISTEN",
    "RAMQP_TLS_CERT",
    "RAMQP_TLS_KEY",
    "RAMQP_TLS_CLIENT_CA",
    "RAMQP_USERS",
    "RAMQP_ALLOW_ANONYMOUS",
];

/// Parse `args` with exactly the given RAMQP_* variables set.
fn parse_with_env(args: &[&str], env: &[(&str, &str)]) -> Result<Cli, clap::Error> {
    let _guard = ENV_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // SAFETY-free in edition 2021, but racy: hence the lock above.
    for var in OUR_VARS {
        std::env::remove_var(var);
    }
    for (name, value) in env {
        std::env::set_var(name, value);
    }
    let result = Cli::try_parse_from(std::iter::once("ramqp-brokerd").chain(args.iter().copied()));
    for (name, _) in env {
        std::env::remove_var(name);
    }
    result
}

fn parse(args: &[&str]) -> Cli {
    parse_with_env(args, &[]).unwrap()
}

const FILE: &str = r#"
listen = "0.0.0.0:6000"
data_dir = "/srv/ramqp"
container_id = "node-a"

[log]
level = "warn"
format = "json"

[limits]
max_frame_size_bytes = 65536
idle_timeout_ms = 30000
max_frame_size_before_open_bytes = 2048
max_connections_per_address = 50

[sasl]
allow_anonymous = true
users = [{ username = "app", password = "file-pw" }, { username = "ops", password = "ops-pw" }]

[queues]
auto_create = true
declare = ["orders"]
"#;

#[test]
fn no_arguments_give_a_usable_single_node() {
    let settings = resolve(&parse(&[])).unwrap();
    assert_eq!(settings.broker.listen, "127.0.0.1:5672".parse().unwrap());
    assert_eq!(settings.broker.data_dir, Some(PathBuf::from("ramqp-data")));
    assert!(settings.broker.sasl.anonymous_allowed());
    assert!(settings.broker.queues.auto_create);
    assert_eq!(settings.log, LogConfig::default());
}

#[test]
fn file_values_are_read() {
    let settings = parse_file(FILE).unwrap();
    let broker = &settings.broker;
    assert_eq!(broker.listen, "0.0.0.0:6000".parse().unwrap());
    assert_eq!(broker.data_dir, Some(PathBuf::from("/srv/ramqp")));
    assert_eq!(broker.container_id.as_deref(), Some("node-a"));
    assert_eq!(broker.limits.max_frame_size_bytes, 65536);
    assert_eq!(broker.limits.idle_timeout_ms, 30000);
    assert_eq!(broker.limits.max_frame_size_before_open_bytes, 2048);
    assert_eq!(broker.limits.max_connections_per_address, 50);
    assert_eq!(broker.sasl.users.len(), 2);
    assert_eq!(broker.queues.declare, vec!["orders".to_owned()]);
    assert_eq!(
        settings.log,
        LogConfig {
            level: "warn".into(),
            format: LogFormat::Json
        }
    );
    // Untouched keys keep the library defaults.
    assert_eq!(
        broker.limits.channel_max,
        broker::config::Limits::default().channel_max
    );
}

#[test]
fn empty_file_keeps_daemon_defaults() {
    let settings = parse_file("").unwrap();
    assert_eq!(settings.broker.listen, DEFAULT_LISTEN);
    assert_eq!(
        settings.broker.data_dir,
        Some(PathBuf::from(DEFAULT_DATA_DIR))
    );
    assert_eq!(settings.log, LogConfig::default());
}

#[test]
fn explicit_port_zero_in_file_is_kept() {
    let settings = parse_file("listen = \"127.0.0.1:0\"").unwrap();
    assert_eq!(settings.broker.listen.port(), 0);
}

#[test]
fn unknown_top_level_key_is_rejected_with_line_and_choices() {
    let error = parse_file("listen = \"127.0.0.1:1\"\nlisten_adress = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `listen_adress`"), "{error}");
    assert!(error.contains("`listen`"), "valid keys are listed: {error}");
    assert!(error.contains("line 2"), "{error}");
}

#[test]
fn unknown_key_in_a_table_is_rejected() {
    let error = parse_file("[limits]\nmax_frame_size = 4096\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `max_frame_size`"), "{error}");
    assert!(error.contains("max_frame_size_bytes"), "{error}");
    assert!(error.contains("line 2"), "{error}");

    let error = parse_file("[log]\nlevel = \"info\"\ncolour = true\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `colour`"), "{error}");
}

#[test]
fn bad_values_are_rejected() {
    let error = parse_file("listen = \"nowhere\"").unwrap_err().to_string();
    assert!(error.contains("line 1"), "{error}");
    let error = parse_file("[log]\nformat = \"xml\"")
        .unwrap_err()
        .to_string();
    assert!(error.contains("xml"), "{error}");
    assert!(parse_file("[limits]\nchannel_max = 70000").is_err());
    assert!(parse_file("listen = ").is_err(), "syntax error");
}

#[test]
fn flags_override_file() {
    let file = parse_file(FILE).unwrap();
    let cli = parse(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        "/tmp/x",
        "--log-level",
        "debug",
        "--log-format",
        "text",
        "--no-anonymous",
        "--no-auto-create",
        "--max-frame-size",
        "4096",
        "--idle-timeout-ms",
        "1000",
        "--max-frame-size-before-open",
        "1024",
        "--max-connections-per-address",
        "7",
    ]);
    let settings = apply_cli(file, &cli);
    let broker = &settings.broker;
    assert_eq!(broker.limits.max_frame_size_before_open_bytes, 1024);
    assert_eq!(broker.limits.max_connections_per_address, 7);
    assert_eq!(broker.listen, "127.0.0.1:0".parse().unwrap());
    assert_eq!(broker.data_dir, Some(PathBuf::from("/tmp/x")));
    assert_eq!(broker.limits.max_frame_size_bytes, 4096);
    assert_eq!(broker.limits.idle_timeout_ms, 1000);
    assert!(!broker.sasl.anonymous_allowed());
    assert!(!broker.queues.auto_create);
    assert_eq!(settings.log.level, "debug");
    assert_eq!(settings.log.format, LogFormat::Text);
    // Not overridable from the command line: stays from the file.
    assert_eq!(broker.container_id.as_deref(), Some("node-a"));
}

#[test]
fn absent_flags_keep_file_values() {
    let settings = apply_cli(parse_file(FILE).unwrap(), &parse(&[]));
    assert_eq!(settings.broker.listen, "0.0.0.0:6000".parse().unwrap());
    assert_eq!(settings.broker.limits.max_frame_size_bytes, 65536);
    assert_eq!(settings.log.format, LogFormat::Json);
    assert!(settings.broker.sasl.anonymous_allowed());
}

#[test]
fn sasl_users_are_merged_by_name() {
    let cli = parse(&["--sasl-user", "app:flag-pw", "--sasl-user", "new:x:y"]);
    let settings = apply_cli(parse_file(FILE).unwrap(), &cli);
    let mut users: Vec<_> = settings
        .broker
        .sasl
        .users
        .iter()
        .map(|u| (u.username.as_str(), u.password.as_str()))
        .collect();
    users.sort();
    assert_eq!(
        users,
        vec![("app", "flag-pw"), ("new", "x:y"), ("ops", "ops-pw")]
    );
}

#[test]
fn env_overrides_file_and_flag_overrides_env() {
    let env = [
        ("RAMQP_LISTEN", "127.0.0.1:7000"),
        ("RAMQP_DATA_DIR", "/env/dir"),
        ("RAMQP_LOG_LEVEL", "trace"),
        ("RAMQP_LOG_FORMAT", "text"),
        ("RAMQP_SASL_USER", "a:1,b:2"),
        ("RAMQP_NO_ANONYMOUS", "true"),
        ("RAMQP_NO_AUTO_CREATE", "1"),
        ("RAMQP_MAX_FRAME_SIZE", "8192"),
        ("RAMQP_IDLE_TIMEOUT_MS", "2000"),
        ("RAMQP_MAX_FRAME_SIZE_BEFORE_OPEN", "600"),
        ("RAMQP_MAX_CONNECTIONS_PER_ADDRESS", "0"),
    ];
    let file = parse_file(FILE).unwrap();

    // Environment alone beats the file.
    let settings = apply_cli(file.clone(), &parse_with_env(&[], &env).unwrap());
    let broker = &settings.broker;
    assert_eq!(broker.limits.max_frame_size_before_open_bytes, 600);
    assert_eq!(broker.limits.max_connections_per_address, 0);
    assert_eq!(broker.listen, "127.0.0.1:7000".parse().unwrap());
    assert_eq!(broker.data_dir, Some(PathBuf::from("/env/dir")));
    assert_eq!(broker.limits.max_frame_size_bytes, 8192);
    assert_eq!(broker.limits.idle_timeout_ms, 2000);
    assert!(!broker.sasl.anonymous_allowed());
    assert!(!broker.queues.auto_create);
    assert!(broker
        .sasl
        .users
        .iter()
        .any(|u| u.username == "a" && u.password == "1"));
    assert!(broker
        .sasl
        .users
        .iter()
        .any(|u| u.username == "b" && u.password == "2"));
    assert_eq!(settings.log.level, "trace");
    assert_eq!(settings.log.format, LogFormat::Text);

    // A flag beats the environment.
    let cli = parse_with_env(
        &["--listen", "127.0.0.1:7001", "--max-frame-size", "16384"],
        &env,
    )
    .unwrap();
    let settings = apply_cli(file.clone(), &cli);
    assert_eq!(settings.broker.listen, "127.0.0.1:7001".parse().unwrap());
    assert_eq!(settings.broker.limits.max_frame_size_bytes, 16384);
    assert_eq!(settings.broker.limits.idle_timeout_ms, 2000);

    // A false-ish switch variable does not turn the switch on.
    let cli = parse_with_env(&[], &[("RAMQP_NO_ANONYMOUS", "false")]).unwrap();
    assert!(!cli.no_anonymous);
    // A nonsense one is an error rather than a silent guess.
    assert!(parse_with_env(&[], &[("RAMQP_NO_ANONYMOUS", "maybe")]).is_err());
}

#[test]
fn config_path_comes_from_env_too() {
    let dir = std::env::temp_dir().join(format!("ramqp-brokerd-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:6100\"\n").unwrap();
    let cli = parse_with_env(&[], &[("RAMQP_CONFIG", path.to_str().unwrap())]).unwrap();
    let settings = resolve(&cli).unwrap();
    assert_eq!(settings.broker.listen.port(), 6100);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_config_file_is_a_config_error() {
    let cli = parse(&["--config", "/nonexistent/ramqp.toml"]);
    let error = resolve(&cli).unwrap_err().to_string();
    assert!(error.contains("/nonexistent/ramqp.toml"), "{error}");
}

#[test]
fn bad_flag_values_are_rejected() {
    assert!(parse_with_env(&["--max-frame-size", "big"], &[]).is_err());
    assert!(parse_with_env(&["--log-format", "xml"], &[]).is_err());
    assert!(parse_with_env(&["--sasl-user", "nopassword"], &[]).is_err());
    assert!(parse_with_env(&["--listen", "127.0.0.1"], &[]).is_err());
}

#[test]
fn example_config_file_parses() {
    let text = include_str!("../../deploy/ramqp.example.toml");
    let settings = parse_file(text).unwrap();
    assert_eq!(settings.broker.listen, DEFAULT_LISTEN);
}

#[test]
fn after_help_example_parses() {
    // The example in --help is indented by four spaces after a line
    // that ends with "them):".
    let example: String = crate::cli::AFTER_HELP
        .lines()
        .skip_while(|line| !line.starts_with("    listen"))
        .take_while(|line| line.is_empty() || line.starts_with("    "))
        .map(|line| format!("{}\n", line.trim_start()))
        .collect();
    assert!(example.contains("[queues]"), "{example}");
    let settings = parse_file(&example).unwrap();
    assert!(!settings.broker.sasl.anonymous_allowed());
    assert_eq!(settings.log.format, LogFormat::Json);
    assert!(settings.broker.http.tls);
}

#[test]
fn cluster_flags_and_file_table() {
    let file = parse_file(
        "[quorum]\nnode_id = 2\n[cluster]\nname = \"prod\"\nfabric_listen = \"127.0.0.1:7002\"\npeers = [\"1=127.0.0.1:7001\", \"3=127.0.0.1:7003\"]\n",
    )
    .unwrap();
    assert_eq!(file.broker.quorum.node_id, 2);
    assert_eq!(file.broker.cluster.name, "prod");
    assert_eq!(
        file.broker.cluster.fabric_listen,
        Some(SocketAddr::from(([127, 0, 0, 1], 7002)))
    );
    let ids: Vec<u64> = file.broker.cluster.peers.iter().map(|p| p.id).collect();
    assert_eq!(ids, [1, 3]);
    assert!(parse_file("[cluster]\npeers = [\"x=127.0.0.1:1\"]\n").is_err());
    assert!(parse_file("[cluster]\npeers = [\"0=127.0.0.1:1\"]\n").is_err());

    let cli = parse(&[
        "--node-id",
        "3",
        "--fabric-listen",
        "127.0.0.1:7103",
        "--peer",
        "1=127.0.0.1:7101",
        "--peer",
        "2=localhost:7102",
        "--cluster-name",
        "test",
    ]);
    let settings = apply_cli(file, &cli);
    let cluster = &settings.broker.cluster;
    assert_eq!(settings.broker.quorum.node_id, 3);
    assert_eq!(cluster.name, "test");
    assert_eq!(cluster.fabric_listen.map(|a| a.port()), Some(7103));
    let peers: Vec<String> = cluster.peers.iter().map(|p| p.to_string()).collect();
    assert_eq!(peers[0], "1=127.0.0.1:7101");
    assert_eq!(cluster.peers[1].id, 2);
    assert!(parse_with_env(&["--node-id", "0"], &[]).is_err());
    let from_env = parse_with_env(&[], &[("RAMQP_PEERS", "4=127.0.0.1:1,5=127.0.0.1:2")]).unwrap();
    assert_eq!(from_env.peer.len(), 2);
}

#[test]
fn fabric_tls_from_file_flags_and_env() {
    let file = parse_file(
        "[cluster.tls]\nca_file = \"/etc/ca.pem\"\ncert_file = \"/etc/n.pem\"\nkey_file = \"/etc/n.key\"\n",
    )
    .unwrap();
    let tls = &file.broker.cluster.tls;
    assert_eq!(tls.ca_file.as_deref(), Some(Path::new("/etc/ca.pem")));
    assert_eq!(tls.key_file.as_deref(), Some(Path::new("/etc/n.key")));
    assert_eq!(tls.server_name, None);
    assert!(parse_file("[cluster.tls]\nca = \"x\"\n").is_err());

    // A flag replaces the file's value; the others stand.
    let cli = parse(&[
        "--fabric-tls-cert",
        "/run/n2.pem",
        "--fabric-tls-server-name",
        "fabric.internal",
    ]);
    let settings = apply_cli(file, &cli);
    let tls = &settings.broker.cluster.tls;
    assert_eq!(tls.cert_file.as_deref(), Some(Path::new("/run/n2.pem")));
    assert_eq!(tls.ca_file.as_deref(), Some(Path::new("/etc/ca.pem")));
    assert_eq!(tls.server_name.as_deref(), Some("fabric.internal"));

    let from_env = parse_with_env(
        &[],
        &[
            ("RAMQP_FABRIC_TLS_CA", "/e/ca.pem"),
            ("RAMQP_FABRIC_TLS_CERT", "/e/n.pem"),
            ("RAMQP_FABRIC_TLS_KEY", "/e/n.key"),
        ],
    )
    .unwrap();
    let tls = resolve(&from_env).unwrap().broker.cluster.tls;
    assert_eq!(tls.ca_file.as_deref(), Some(Path::new("/e/ca.pem")));
    assert_eq!(tls.cert_file.as_deref(), Some(Path::new("/e/n.pem")));
    assert_eq!(tls.key_file.as_deref(), Some(Path::new("/e/n.key")));
}

#[test]
fn paging_budgets_come_from_flags() {
    let settings = resolve(&parse(&[
        "--resident-budget",
        "1048576",
        "--queue-resident-budget",
        "4096",
        "--segment-max-bytes",
        "65536",
        "--segment-writeback-step",
        "0",
        "--min-free-disk",
        "0",
        "--memory-high-watermark",
        "1000000000",
    ]))
    .unwrap();
    let quorum = &settings.broker.quorum;
    assert_eq!(quorum.resident_budget_bytes, 1_048_576);
    assert_eq!(quorum.queue_resident_budget_bytes, 4096);
    assert_eq!(quorum.segment_max_bytes, 65_536);
    assert_eq!(quorum.segment_writeback_step_bytes, 0);
    assert_eq!(quorum.min_free_disk_bytes, 0);
    assert_eq!(quorum.memory_high_watermark_bytes, 1_000_000_000);
    let defaults = resolve(&parse(&[])).unwrap();
    assert_eq!(
        defaults.broker.quorum.resident_budget_bytes,
        64 * 1024 * 1024
    );
}

#[test]
fn tls_alone_turns_the_plain_listener_off() {
    let tls = [
        "--tls-listen",
        "127.0.0.1:5671",
        "--tls-cert",
        "/etc/ramqp/server.pem",
        "--tls-key",
        "/etc/ramqp/server.key",
        "--tls-client-ca",
        "/etc/ramqp/ca.pem",
    ];
    let broker = apply_cli(Settings::default(), &parse(&tls)).broker;
    assert_eq!(broker.tls.listen, Some("127.0.0.1:5671".parse().unwrap()));
    assert_eq!(
        broker.tls.cert_file.as_deref(),
        Some(Path::new("/etc/ramqp/server.pem"))
    );
    assert_eq!(
        broker.tls.key_file.as_deref(),
        Some(Path::new("/etc/ramqp/server.key"))
    );
    assert_eq!(
        broker.tls.client_ca_file.as_deref(),
        Some(Path::new("/etc/ramqp/ca.pem"))
    );
    assert!(!broker.listen_plain);
    // --listen beside it keeps the plain listener, as does `listen` in
    // the file.
    let mut both = tls.to_vec();
    both.extend(["--listen", "127.0.0.1:5672"]);
    assert!(
        apply_cli(Settings::default(), &parse(&both))
            .broker
            .listen_plain
    );
    let file = parse_file("listen = \"127.0.0.1:5672\"\n").unwrap();
    assert!(apply_cli(file, &parse(&tls)).broker.listen_plain);
    // The same from the environment and the [tls] table.
    let env = parse_with_env(
        &[],
        &[
            ("RAMQP_TLS_LISTEN", "127.0.0.1:5671"),
            ("RAMQP_TLS_CERT", "/c.pem"),
            ("RAMQP_TLS_KEY", "/k.pem"),
        ],
    )
    .unwrap();
    assert_eq!(
        apply_cli(Settings::default(), &env)
            .broker
            .tls
            .key_file
            .as_deref(),
        Some(Path::new("/k.pem"))
    );
    let table =
        parse_file("[tls]\nlisten = \"127.0.0.1:5671\"\ncert_file = \"/c\"\nkey_file = \"/k\"\n")
            .unwrap();
    assert_eq!(table.broker.tls.cert_file.as_deref(), Some(Path::new("/c")));
}

#[test]
fn a_users_file_turns_anonymous_off_unless_asked() {
    let broker = apply_cli(Settings::default(), &parse(&["--users", "/etc/u.toml"])).broker;
    assert_eq!(
        broker.sasl.users_file.as_deref(),
        Some(Path::new("/etc/u.toml"))
    );
    assert!(!broker.sasl.anonymous_allowed());
    let broker = apply_cli(
        Settings::default(),
        &parse(&["--users", "/etc/u.toml", "--allow-anonymous"]),
    )
    .broker;
    assert!(broker.sasl.anonymous_allowed());
    let env = parse_with_env(
        &[],
        &[("RAMQP_USERS", "/u"), ("RAMQP_ALLOW_ANONYMOUS", "1")],
    )
    .unwrap();
    let broker = apply_cli(Settings::default(), &env).broker;
    assert_eq!(broker.sasl.users_file.as_deref(), Some(Path::new("/u")));
    assert!(broker.sasl.anonymous_allowed());
    let file = parse_file("[sasl]\nusers_file = \"/u\"\n").unwrap();
    assert!(!file.broker.sasl.anonymous_allowed());
    assert!(parse_with_env(&["--allow-anonymous", "--no-anonymous"], &[]).is_err());
}
