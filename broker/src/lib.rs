//! The ramqp broker library: an AMQP 1.0 codec, the connection / session /
//! link engine, queues behind one narrow interface, and the embedding API
//! ([`Broker`]) used by `ramqp-brokerd` and by tests.
#![warn(missing_docs, unreachable_pub)]

pub mod admin;
pub mod codec;
pub mod config;
pub mod meta;
pub mod net;
pub mod paging;
pub mod queue;
pub mod quorum;

mod broker;
mod cluster;
mod engine;
mod forward;
mod leadership;

pub use broker::{Broker, BrokerError};
pub use cluster::Cluster;
pub use config::BrokerConfig;
