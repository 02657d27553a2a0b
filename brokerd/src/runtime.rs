//! The daemon's tokio runtime, built from the `[runtime]` table: how many
//! workers and which scheduler.
//!
//! Why a current-thread scheduler for one worker (the `auto` flavor): a
//! multi-thread runtime of one worker still runs the daemon's own future
//! on the main thread beside the worker, and pays for work stealing it
//! cannot use (the searching state, the poll-time average it keeps per
//! batch, waking the parked worker from the main thread). On 2 cores the
//! 3-node local cluster gives each node one worker.
//!
//! Must not know: the broker; only the settings' [`RuntimeConfig`].

use tokio::runtime::{Builder, Runtime};

use crate::cli::RuntimeFlavor;
use crate::settings::RuntimeConfig;

/// The runtime `config` asks for, with `flavor` its scheduler resolved
/// ([`RuntimeConfig::resolved_flavor`]).
pub fn build(config: &RuntimeConfig, flavor: RuntimeFlavor) -> std::io::Result<Runtime> {
    let mut builder = match flavor {
        RuntimeFlavor::CurrentThread => Builder::new_current_thread(),
        RuntimeFlavor::Auto | RuntimeFlavor::MultiThread => {
            let mut builder = Builder::new_multi_thread();
            if config.worker_threads > 0 {
                builder.worker_threads(config.worker_threads);
            }
            builder
        }
    };
    builder.enable_all().thread_name("ramqp-worker");
    builder.build()
}
