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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run by hand in release"]
async fn connection_cost_by_transport_and_mechanism() {
    let pki = Pki::new("cost CA");
    let users = pki.dir.path().join("users.toml");
    let mut file = UsersFile::default();
    file.upsert(UserRecord::new("app", "app-secret", ".*", ".*", ".*"));
    file.save(&users).unwrap();
    let (cert, key) = pki.server_files("server");
    let broker = start_with(|c| {
        c.sasl.users_file = Some(users.clone());
        c.sasl.allow_anonymous = Some(true);
        c.tls.listen = Some("127.0.0.1:0".parse().unwrap());
        c.tls.cert_file = Some(cert);
        c.tls.key_file = Some(key);
    })
    .await;
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
        let total: Duration = samples.iter().sum();
        println!(
            "{name:<22} mean {:>7.2} ms  p50 {:>7.2} ms  p90 {:>7.2} ms",
            total.as_secs_f64() * 1000.0 / ROUNDS as f64,
            percentile(&mut samples, 0.5).as_secs_f64() * 1000.0,
            percentile(&mut samples, 0.9).as_secs_f64() * 1000.0,
        );
    }
    println!(
        "one PBKDF2-HMAC-SHA-256, 4096 iterations: {:.2} ms",
        pbkdf2_alone().as_secs_f64() * 1000.0
    );
    stop(broker).await;
}
