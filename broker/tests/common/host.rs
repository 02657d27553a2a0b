//! A broker on a tokio runtime of its own, so that a test can stop it two
//! ways: gracefully (`Broker::shutdown`) or abruptly, by dropping that
//! runtime without a shutdown. The abrupt stop drops every task wherever
//! it was: unwritten segment buffers are lost and nothing is flushed or
//! handed off, while what the process already wrote stays in the kernel
//! (a process crash, not a power cut). The Broker API has no abrupt stop
//! of its own; a real SIGKILL needs `ramqp-brokerd` (tests/interop).

use std::time::Duration;

use ramqpd_broker::{Broker, BrokerConfig};

use super::wait::within;

/// A running broker and the runtime its tasks run on.
pub struct Host {
    runtime: Option<tokio::runtime::Runtime>,
    broker: Option<Broker>,
}

impl Host {
    /// Start a broker on a new two-thread runtime.
    pub async fn start(config: BrokerConfig) -> Host {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hosted-broker")
            .enable_all()
            .build()
            .expect("broker runtime");
        let started = within(
            Duration::from_secs(20),
            "broker start",
            runtime.spawn(Broker::start(config)),
        )
        .await;
        let broker = started.expect("start task").expect("broker starts");
        Host {
            runtime: Some(runtime),
            broker: Some(broker),
        }
    }

    /// The broker.
    pub fn broker(&self) -> &Broker {
        self.broker.as_ref().expect("running")
    }

    /// Graceful stop (bounded), then the runtime goes.
    pub async fn shutdown(mut self) {
        let broker = self.broker.take().expect("running");
        let runtime = self.runtime.take().expect("running");
        let stopped = within(
            Duration::from_secs(30),
            "graceful shutdown",
            runtime.spawn(broker.shutdown()),
        )
        .await;
        stopped.expect("shutdown task");
        drop_off_runtime(runtime, None).await;
    }

    /// Abrupt stop: the runtime goes with every task on it, then the
    /// broker's handles (its files are closed once both are gone).
    pub async fn kill(mut self) {
        let broker = self.broker.take();
        let runtime = self.runtime.take().expect("running");
        drop_off_runtime(runtime, broker).await;
    }
}

/// Drop a runtime (which waits for its threads) where blocking is allowed,
/// then the broker, whose log store joins its writer thread.
async fn drop_off_runtime(runtime: tokio::runtime::Runtime, broker: Option<Broker>) {
    let dropped = tokio::task::spawn_blocking(move || {
        drop(runtime);
        drop(broker);
    });
    within(Duration::from_secs(30), "broker runtime dropped", dropped)
        .await
        .expect("drop task");
}

impl Drop for Host {
    fn drop(&mut self) {
        // A failed test unwinds inside its own runtime, where another
        // runtime may not be dropped in place.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
