//! The rig's connections and links, for either client stack (`--client`):
//! fe2o3-amqp (tasks in `consumer.rs` and `publisher.rs`) or the bench's raw
//! client on broker::codec (tasks in `raw.rs`). Consumers connect first (so
//! nothing published waits for one to attach) and, on an external broker,
//! the first one purges what an earlier run left in the queue; then the
//! publishers connect. The run then spawns one task per connection.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use fe2o3_amqp::types::messaging::Data;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use ramqp_bench_compare::amqp::{self, within, Endpoint};
use ramqp_bench_compare::raw;

use crate::consumer::ConsumerDone;
use crate::publisher::PublisherDone;
use crate::run::Shared;
use crate::Args;

/// One publisher's job: its message quota (closed loop with `--count`) and
/// its tick channel (open loop).
pub(crate) type Job = (Option<u64>, Option<mpsc::UnboundedReceiver<u64>>);

/// The connected links of one run, until their tasks take them.
pub(crate) enum Links {
    Fe2o3 {
        consumers: Vec<(Endpoint, fe2o3_amqp::Receiver)>,
        publishers: Vec<(Endpoint, fe2o3_amqp::Sender)>,
    },
    Raw {
        consumers: Vec<(raw::Connection, raw::Receiver)>,
        publishers: Vec<(raw::Connection, raw::Sender)>,
    },
}

/// Container ids and link names of run `run`: (container, link) for
/// consumer or publisher `i`.
fn names(run: u32, role: &str, i: u32) -> (String, String) {
    let link = if role == "con" { "receiver" } else { "sender" };
    (
        format!("ramqp-rig-{role}-{run:08x}-{i}"),
        format!("rig-{link}-{run:08x}-{i}"),
    )
}

impl Links {
    /// Connect and attach every consumer and publisher; purge the queue
    /// first when `purge` (external brokers). Returns the links and how many
    /// messages were purged.
    pub(crate) async fn connect(
        args: &Args,
        url: &str,
        run: u32,
        timeout: Duration,
        purge: bool,
    ) -> Result<(Links, u64)> {
        let idle = Duration::from_millis(500);
        let mut purged = 0;
        if args.client == "raw" {
            let mut consumers = Vec::new();
            for c in 0..args.consumers {
                let (container, link) = names(run, "con", c);
                let mut conn = raw::Connection::connect(url, &container, timeout)
                    .await
                    .with_context(|| format!("consumer {c} connection"))?;
                let receiver = conn
                    .attach_receiver(&link, &args.address, args.credit)
                    .await?;
                if purge && c == 0 {
                    purged = receiver.purge(&mut conn, idle).await?;
                }
                consumers.push((conn, receiver));
            }
            let mut publishers = Vec::new();
            for p in 0..args.publishers {
                let (container, link) = names(run, "pub", p);
                let mut conn = raw::Connection::connect(url, &container, timeout)
                    .await
                    .with_context(|| format!("publisher {p} connection"))?;
                let sender = conn
                    .attach_sender(&link, &args.address, args.presettled)
                    .await?;
                publishers.push((conn, sender));
            }
            return Ok((
                Links::Raw {
                    consumers,
                    publishers,
                },
                purged,
            ));
        }
        let mut consumers = Vec::new();
        for c in 0..args.consumers {
            let (container, link) = names(run, "con", c);
            let mut endpoint = amqp::connect(url, &container, timeout)
                .await
                .with_context(|| format!("consumer {c} connection"))?;
            let mut receiver = endpoint.receiver(&link, &args.address, args.credit).await?;
            if purge && c == 0 {
                purged = purge_fe2o3(&mut receiver, idle, timeout).await?;
            }
            consumers.push((endpoint, receiver));
        }
        let mut publishers = Vec::new();
        for p in 0..args.publishers {
            let (container, link) = names(run, "pub", p);
            let mut endpoint = amqp::connect(url, &container, timeout)
                .await
                .with_context(|| format!("publisher {p} connection"))?;
            let sender = endpoint
                .sender(&link, &args.address, args.presettled)
                .await?;
            publishers.push((endpoint, sender));
        }
        Ok((
            Links::Fe2o3 {
                consumers,
                publishers,
            },
            purged,
        ))
    }

    /// Start one task per consumer (takes the consumer links).
    pub(crate) fn spawn_consumers(
        &mut self,
        shared: &Arc<Shared>,
        publishers: usize,
    ) -> Vec<JoinHandle<Result<ConsumerDone>>> {
        match self {
            Links::Fe2o3 { consumers, .. } => std::mem::take(consumers)
                .into_iter()
                .map(|(endpoint, receiver)| {
                    let task =
                        crate::consumer::consume(shared.clone(), endpoint, receiver, publishers);
                    tokio::spawn(task)
                })
                .collect(),
            Links::Raw { consumers, .. } => std::mem::take(consumers)
                .into_iter()
                .map(|(conn, receiver)| {
                    tokio::spawn(crate::raw::consume(
                        shared.clone(),
                        conn,
                        receiver,
                        publishers,
                    ))
                })
                .collect(),
        }
    }

    /// Start one task per publisher with its job (takes the publisher links).
    pub(crate) fn spawn_publishers(
        &mut self,
        shared: &Arc<Shared>,
        jobs: Vec<Job>,
    ) -> Vec<JoinHandle<Result<PublisherDone>>> {
        match self {
            Links::Fe2o3 { publishers, .. } => std::mem::take(publishers)
                .into_iter()
                .zip(jobs)
                .enumerate()
                .map(|(p, ((endpoint, sender), (quota, ticks)))| {
                    let task = crate::publisher::publish(
                        shared.clone(),
                        p as u32,
                        endpoint,
                        sender,
                        quota,
                        ticks,
                    );
                    tokio::spawn(task)
                })
                .collect(),
            Links::Raw { publishers, .. } => std::mem::take(publishers)
                .into_iter()
                .zip(jobs)
                .enumerate()
                .map(|(p, ((conn, sender), (quota, ticks)))| {
                    let task =
                        crate::raw::publish(shared.clone(), p as u32, conn, sender, quota, ticks);
                    tokio::spawn(task)
                })
                .collect(),
        }
    }
}

/// Take whatever is in the queue already (fe2o3 client).
async fn purge_fe2o3(
    receiver: &mut fe2o3_amqp::Receiver,
    idle: Duration,
    timeout: Duration,
) -> Result<u64> {
    let mut purged = 0u64;
    while let Ok(received) = tokio::time::timeout(idle, receiver.recv::<Data>()).await {
        let delivery = received.map_err(|e| anyhow!("purge: receive failed: {e:?}"))?;
        within(timeout, "purge: accept", receiver.accept(&delivery)).await?;
        purged += 1;
    }
    Ok(purged)
}
