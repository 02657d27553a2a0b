//! Shared helpers for the integration tests: bounded waits, an embedded
//! broker with a tweaked config (also on a runtime of its own, so it can
//! be stopped abruptly), a real third-party AMQP 1.0 client (fe2o3-amqp)
//! and a raw-socket client that speaks frames through the broker's own
//! public codec.
//!
//! Every wait here is bounded: a hung broker fails a test, never hangs it.
//! Each test binary's root (`amqp.rs`, `quorum.rs`, ...) declares `mod
//! common;` once and its files `use crate::common;` then `use common::*;`,
//! so this file only re-exports its submodules.
#![allow(dead_code)]

mod embedded;
mod fe2o3;
mod frames;
mod host;
mod http;
mod pki;
mod quorum;
mod raw;
mod source_tree;
mod trace;
mod wait;

// A test that uses nothing from one submodule must not warn about it.
#[allow(unused_imports)]
pub use embedded::*;
#[allow(unused_imports)]
pub use fe2o3::*;
#[allow(unused_imports)]
pub use frames::*;
#[allow(unused_imports)]
pub use host::*;
#[allow(unused_imports)]
pub use http::*;
#[allow(unused_imports)]
pub use pki::*;
#[allow(unused_imports)]
pub use quorum::*;
#[allow(unused_imports)]
pub use raw::*;
#[allow(unused_imports)]
pub use source_tree::*;
#[allow(unused_imports)]
pub use trace::*;
#[allow(unused_imports)]
pub use wait::*;
