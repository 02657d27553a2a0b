//! Start one embedded broker with the default configuration and serve until
//! Ctrl-C: `cargo run -p ramqpd-broker --example embedded`.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = ramqpd_broker::BrokerConfig {
        listen: std::env::var("RAMQP_LISTEN")
            .ok()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| "127.0.0.1:5672".parse().expect("literal address")),
        ..ramqpd_broker::BrokerConfig::default()
    };
    let broker = ramqpd_broker::Broker::start(config).await?;
    println!("listening on {}", broker.local_addr());
    tokio::signal::ctrl_c().await?;
    broker.shutdown().await;
    Ok(())
}
