//! A measurement, not a check (ignored by default, never timed in the test
//! run): how long a connection takes from TCP connect to an open AMQP
//! connection and back to closed, over plain TCP and TLS, with ANONYMOUS,
//! PLAIN and SCRAM-SHA-256 against the users file, one connection after
//! another with fe2o3-amqp. The SCRAM rows include the client's PBKDF2. Run it in release:
//!
//! ```text
//! cargo test --release -p ramqpd-broker --test auth_cost -- --ignored --nocapture
//! ```
//!
//! The broker runs on a runtime of its own whose threads are named
//! `cost-broker`, so the CPU time the broker spends per connection (from
//! the threads' `schedstat`, nanoseconds) is printed beside the wall time:
//! the client's work (its PBKDF2 for SCRAM) is not in that column.
//!
//! The numbers it printed are in docs/operations.md "Cost of TLS and SCRAM".

mod common;

use std::time::{Duration, Instant};

use common::*;
use fe2o3_amqp::sasl_profile::{SaslProfile, SaslScramSha256};
use fe2o3_amqp::Connection;
use ramqpd_broker::auth::{UserRecord, UsersFile};

const ROUNDS: usize = 200;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

/// The client's share of a SCRAM login: one PBKDF2 of 4096 iterations,
/// timed alone (the broker's own implementation, as a reference).
fn pbkdf2_alone() -> Duration {
    let started = Instant::now();
    for _ in 0..ROUNDS {
        std::hint::black_box(ramqpd_broker::auth::ScramCredential::derive(
            "app-secret",
            b"0123456789abcdef",
            4096,
        ));
    }
    started.elapsed() / ROUNDS as u32
}

/// Nanoseconds on a CPU of every live thread of this process whose name
/// starts with `prefix` (Linux `/proc/self/task/*/schedstat`).
fn cpu_ns_of_threads(prefix: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run by hand in release"]
async fn connection_cost_by_transport_and_mechanism() {
    let pki = Pki::new("cost CA");
    let users = pki.dir.path().join("users.toml");
    let mut file = UsersFile::default();
    file.upsert(UserRecord::new("app", "app-secret", ".*", ".*", ".*"));
    file.save(&users).unwrap();
    let (cert, key) = pki.server_files("server");
    // The broker's own runtime (one worker; its blocking threads carry the
    // same name), so its CPU time can be told from the client's.
    let broker_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("cost-broker")
        .enable_all()
        .build()
        .unwrap();
    let users_for_broker = users.clone();
    let broker = broker_runtime
        .spawn(start_with(move |c| {
            c.sasl.users_file = Some(users_for_broker);
            c.sasl.allow_anonymous = Some(true);
            c.tls.listen = Some("127.0.0.1:0".parse().unwrap());
            c.tls.cert_file = Some(cert);
            c.tls.key_file = Some(key);
        }))
        .await
        .unwrap();
    let plain_url = format!("amqp://{}", broker.local_addr());
    let tls_addr = broker.tls_addr().unwrap();
    let connector = pki.connector(None);
    let plain = || SaslProfile::Plain {
        username: "app".into(),
        password: "app-secret".into(),
    };
    let scram = || SaslProfile::ScramSha256(SaslScramSha256::new("app", "app-secret"));
    for (name, tls, profile) in [
        (
            "tcp + ANONYMOUS",
            false,
            &(|| SaslProfile::Anonymous) as &dyn Fn() -> SaslProfile,
        ),
        ("tcp + PLAIN", false, &plain),
        ("tcp + SCRAM-SHA-256", false, &scram),
        ("tls + ANONYMOUS", true, &(|| SaslProfile::Anonymous)),
        ("tls + PLAIN", true, &plain),
        ("tls + SCRAM-SHA-256", true, &scram),
    ] {
        let mut samples = Vec::with_capacity(ROUNDS);
        let broker_cpu_before = cpu_ns_of_threads("cost-broker");
        for _ in 0..ROUNDS {
            let started = Instant::now();
            let builder = Connection::builder()
                .container_id("cost")
                .sasl_profile(profile());
            let mut connection = if tls {
                let stream = tls_connect(tls_addr, &connector).await.unwrap();
                builder.open_with_stream(stream).await.unwrap()
            } else {
                builder.open(plain_url.as_str()).await.unwrap()
            };
            connection.close().await.unwrap();
            samples.push(started.elapsed());
        }
        let broker_cpu = cpu_ns_of_threads("cost-broker").saturating_sub(broker_cpu_before);
        let total: Duration = samples.iter().sum();
        println!(
            "{name:<22} mean {:>7.2} ms  p50 {:>7.2} ms  p90 {:>7.2} ms  broker cpu {:>6.3} ms/conn",
            total.as_secs_f64() * 1000.0 / ROUNDS as f64,
            percentile(&mut samples, 0.5).as_secs_f64() * 1000.0,
            percentile(&mut samples, 0.9).as_secs_f64() * 1000.0,
            broker_cpu as f64 / 1e6 / ROUNDS as f64,
        );
    }
    println!(
        "one PBKDF2-HMAC-SHA-256, 4096 iterations: {:.2} ms",
        pbkdf2_alone().as_secs_f64() * 1000.0
    );
    broker_runtime.spawn(stop(broker)).await.unwrap();
    broker_runtime.shutdown_background();
}
