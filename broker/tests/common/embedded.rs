//! The embedded broker under test: start (optionally with a tweaked
//! config) on an ephemeral port, bounded shutdown, queue depth.

use std::time::Duration;

use ramqpd_broker::{Broker, BrokerConfig};

use super::wait::{step, within};

/// Start a broker on an ephemeral port with the default config.
pub async fn start() -> Broker {
    start_with(|_| {}).await
}

/// Start a broker on an ephemeral port after `tweak` adjusts the config.
pub async fn start_with(tweak: impl FnOnce(&mut BrokerConfig)) -> Broker {
    let mut config = BrokerConfig::default();
    tweak(&mut config);
    step("broker start", Broker::start(config))
        .await
        .expect("broker starts")
}

/// Shut a broker down, bounded.
pub async fn stop(broker: Broker) {
    within(
        Duration::from_secs(15),
        "broker shutdown",
        broker.shutdown(),
    )
    .await;
}

/// (ready, unsettled, consumers) of `/queues/<name>`, if the queue exists.
pub fn depth(broker: &Broker, name: &str) -> Option<(usize, usize, usize)> {
    let address = format!("/queues/{name}");
    broker
        .queues()
        .into_iter()
        .find(|q| q.address == address)
        .map(|q| (q.ready, q.unsettled, q.consumers))
}
