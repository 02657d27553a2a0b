//! Tests of `settings.rs` for the WebSocket and HTTP listeners: flags,
//! environment and file, and their bad values (split from
//! `settings_tests.rs`, whose helpers they use).

use super::*;

#[test]
fn websocket_listener_from_flag_and_file() {
    let broker = apply_cli(
        Settings::default(),
        &parse(&["--ws-listen", "127.0.0.1:5673"]),
    )
    .broker;
    assert_eq!(
        broker.websocket.listen,
        Some("127.0.0.1:5673".parse().unwrap())
    );
    // The plain listener stays: WebSocket is served beside it.
    assert!(broker.listen_plain);
    let file = parse_file("[websocket]\nlisten = \"0.0.0.0:5673\"\nmax_message_bytes = 4194304\n")
        .unwrap();
    assert_eq!(
        file.broker.websocket.listen,
        Some("0.0.0.0:5673".parse().unwrap())
    );
    assert_eq!(file.broker.websocket.max_message_bytes, 4 * 1024 * 1024);
}

#[test]
fn http_endpoint_from_flag_env_and_file() {
    // Off by default.
    assert_eq!(resolve(&parse(&[])).unwrap().broker.http.listen, None);
    let file = parse_file("[http]\nlisten = \"0.0.0.0:9100\"\n").unwrap();
    assert_eq!(
        file.broker.http.listen,
        Some("0.0.0.0:9100".parse().unwrap())
    );
    // The environment beats the file, the flag beats the environment.
    let env = [("RAMQP_HTTP_LISTEN", "127.0.0.1:9101")];
    let from_env = apply_cli(file.clone(), &parse_with_env(&[], &env).unwrap());
    assert_eq!(
        from_env.broker.http.listen,
        Some("127.0.0.1:9101".parse().unwrap())
    );
    let cli = parse_with_env(&["--http-listen", "127.0.0.1:9102"], &env).unwrap();
    assert_eq!(
        apply_cli(file, &cli).broker.http.listen,
        Some("127.0.0.1:9102".parse().unwrap())
    );
    assert!(parse_with_env(&["--http-listen", "not-an-address"], &[]).is_err());
    assert!(parse_file("[http]\nlisten = \"0.0.0.0:9100\"\nport = 1\n").is_err());
}

#[test]
fn http_tls_from_flag_env_and_file() {
    assert!(!resolve(&parse(&[])).unwrap().broker.http.tls);
    let file = parse_file("[http]\nlisten = \"0.0.0.0:9100\"\ntls = true\n").unwrap();
    assert!(file.broker.http.tls);
    let plain = parse_file("[http]\nlisten = \"0.0.0.0:9100\"\n").unwrap();
    let env = [("RAMQP_HTTP_TLS", "true")];
    assert!(
        apply_cli(plain.clone(), &parse_with_env(&[], &env).unwrap())
            .broker
            .http
            .tls
    );
    assert!(
        apply_cli(plain.clone(), &parse(&["--http-tls"]))
            .broker
            .http
            .tls
    );
    assert!(!apply_cli(plain, &parse(&[])).broker.http.tls);
    assert!(parse_file("[http]\ntls = \"yes\"\n").is_err());
}
