//! The ramqp broker library: an AMQP 1.0 codec, the connection / session /
//! link engine, queues behind one narrow interface, and the embedding API
//! ([`Broker`]) used by `ramqp-brokerd` and by tests.
//!
//! Layers, bottom to top (a module imports only from layers below it; the
//! test `tests/architecture.rs` checks it, `docs/architecture.md` says why):
//! `codec`; `config`, `crash_point`, `latency`, `lock_order` and `process`; `net`, `queue`, `paging`, `auth`, `tls` and `ws`; `engine`; `raft`; `quorum` and
//! `meta`; `forward`; `admin` and `http`; `node`.
//!
//! Features: `test-cluster` adds `Cluster`, several nodes in one process
//! for tests.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod admin;
pub mod auth;
pub mod codec;
pub mod config;
pub mod crash_point;
#[doc(hidden)]
pub mod fuzz_checks;
pub mod latency;
pub mod meta;
pub mod net;
pub mod paging;
pub mod process;
pub mod queue;
pub mod quorum;
pub mod raft;
pub mod tls;

mod engine;
mod forward;
mod http;
mod lock_order;
mod node;
pub mod ws;

pub use config::BrokerConfig;
#[cfg(feature = "test-cluster")]
pub use node::Cluster;
pub use node::{Broker, BrokerError, FatalError, Reloaded};
