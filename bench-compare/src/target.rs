//! What a bench runs against: the in-process ramqp broker (started on an
//! ephemeral port, fresh for every trial) or any AMQP 1.0 broker by URL.

use std::path::PathBuf;

use anyhow::{Context, Result};
use broker::{Broker, BrokerConfig};
use serde_json::{json, Value};

/// The broker under test.
pub enum Target {
    /// A ramqp broker in this process (on its own runtime when given).
    InProcess(Box<Broker>, Option<tokio::runtime::Runtime>),
    /// An external broker.
    Url {
        /// Its URL (may carry user:password).
        url: String,
        /// Its process id, when given, to read its RSS.
        pid: Option<u32>,
    },
}

/// How to reach the broker under test.
#[derive(Debug, Clone, Default)]
pub struct TargetSpec {
    /// `None`: start the in-process broker.
    pub url: Option<String>,
    /// Process id of the external broker, for its RSS.
    pub pid: Option<u32>,
    /// Data directory for the in-process broker (a temporary one if unset).
    pub data_dir: Option<PathBuf>,
    /// Run the in-process broker on a runtime of its own with this many
    /// worker threads, instead of sharing the client's.
    pub broker_threads: Option<usize>,
}

impl TargetSpec {
    /// Start (in-process) or name (URL) the target.
    pub async fn start(&self) -> Result<Target> {
        match &self.url {
            Some(url) => Ok(Target::Url {
                url: url.clone(),
                pid: self.pid,
            }),
            None => {
                let config = BrokerConfig {
                    data_dir: self.data_dir.clone(),
                    ..BrokerConfig::default()
                };
                match self.broker_threads {
                    None => {
                        let broker = Broker::start(config)
                            .await
                            .context("start the in-process broker")?;
                        Ok(Target::InProcess(Box::new(broker), None))
                    }
                    Some(threads) => {
                        let runtime = tokio::runtime::Builder::new_multi_thread()
                            .worker_threads(threads.max(1))
                            .thread_name("broker")
                            .enable_all()
                            .build()
                            .context("build the broker's runtime")?;
                        let broker = runtime
                            .spawn(Broker::start(config))
                            .await
                            .context("broker start task")?
                            .context("start the in-process broker")?;
                        Ok(Target::InProcess(Box::new(broker), Some(runtime)))
                    }
                }
            }
        }
    }

    /// "in-process" or "url".
    pub fn kind(&self) -> &'static str {
        if self.url.is_some() {
            "url"
        } else {
            "in-process"
        }
    }
}

impl Target {
    /// The URL clients connect to.
    pub fn url(&self) -> String {
        match self {
            Target::InProcess(broker, _) => broker.url(),
            Target::Url { url, .. } => url.clone(),
        }
    }

    /// The broker's resident set in KiB, if it can be read: the whole
    /// process (broker + client + harness) for the in-process broker.
    pub fn rss_kib(&self) -> Option<u64> {
        match self {
            Target::InProcess(..) => read_rss_kib("/proc/self/status"),
            Target::Url { pid: Some(pid), .. } => read_rss_kib(&format!("/proc/{pid}/status")),
            Target::Url { pid: None, .. } => None,
        }
    }

    /// What [`Target::rss_kib`] measures.
    pub fn rss_scope(&self) -> &'static str {
        match self {
            Target::InProcess(..) => "VmRSS of the whole bench process (broker + client + harness)",
            Target::Url { pid: Some(_), .. } => "VmRSS of the broker process (--pid)",
            Target::Url { pid: None, .. } => "n/a (no --pid given)",
        }
    }

    /// Ready and unsettled messages of `address`, where the broker tells.
    pub fn queue_depth(&self, address: &str) -> Option<(usize, usize)> {
        match self {
            Target::InProcess(broker, _) => broker
                .queues()
                .into_iter()
                .find(|q| q.address == address)
                .map(|q| (q.ready, q.unsettled)),
            Target::Url { .. } => None,
        }
    }

    /// Stop the in-process broker; nothing for a URL target.
    pub async fn shutdown(self) {
        match self {
            Target::InProcess(broker, None) => broker.shutdown().await,
            Target::InProcess(broker, Some(runtime)) => {
                let _ = runtime.spawn(broker.shutdown()).await;
                runtime.shutdown_background();
            }
            Target::Url { .. } => {}
        }
    }
}

/// The target as it goes into a result, password redacted.
pub fn describe(spec: &TargetSpec, address: &str) -> Value {
    let url = spec.url.as_deref().map(redact);
    json!({
        "kind": spec.kind(),
        "broker_runtime": match (&spec.url, spec.broker_threads) {
            (Some(_), _) => Value::Null,
            (None, None) => json!("shared with the client"),
            (None, Some(n)) => json!(format!("own runtime, {n} worker thread(s)")),
        },
        "broker": match spec.url {
            None => format!("ramqpd-broker {} (in-process)", env!("CARGO_PKG_VERSION")),
            Some(_) => "external".to_string(),
        },
        "url": url,
        "address": address,
        "pid": spec.pid,
    })
}

/// A URL with its password replaced by `***`.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

/// VmRSS from a /proc/<pid>/status file, in KiB.
pub fn read_rss_kib(path: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// "transient", "quorum" or "other", from a ramqp-style address.
pub fn queue_kind(address: &str) -> &'static str {
    if address.starts_with("/queues/") {
        "transient"
    } else if address.starts_with("/quorum/") {
        "quorum"
    } else {
        "other"
    }
}

/// Logs on stderr (stdout carries the JSON result) as `RUST_LOG` asks:
/// with the in-process target, the broker's own logs too (`RUST_LOG=warn`
/// shows its slow commits).
pub fn init_stderr_logs() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
}

/// Run `bench` as a task on a multi-thread runtime with `threads` workers
/// (default: one per core), not on the main thread: on a 2-core machine a
/// third busy thread would skew the measurement.
pub fn run_on_runtime<F>(threads: Option<usize>, bench: F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = threads {
        runtime.worker_threads(threads.max(1));
    }
    let runtime = runtime.build().context("build the tokio runtime")?;
    runtime.block_on(async move {
        tokio::spawn(bench)
            .await
            .map_err(|e| anyhow::anyhow!("bench task failed: {e}"))?
    })
}
