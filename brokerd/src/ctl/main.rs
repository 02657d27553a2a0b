//! `ramqp-ctl`: the operator's command line for a running cluster. It
//! connects to one node's fabric port as a client (node id 0), sends one
//! admin request and prints the answer: a table for people, `--json` for
//! scripts and tests. `ramqp-ctl user ...` edits a users file instead and
//! needs no node (`user.rs`).

#![forbid(unsafe_code)]

mod render;
mod user;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use broker::admin::{self, AdminRequest, AdminResponse, NodeStatus};
use bytes::Bytes;
use clap::{Parser, Subcommand};

/// The `ramqp-ctl` command line.
#[derive(Debug, Parser)]
#[command(
    name = "ramqp-ctl",
    version,
    about = "Inspect and operate a ramqp cluster"
)]
struct Cli {
    /// Fabric address of the node to ask.
    #[arg(long, env = "RAMQP_CTL_FABRIC", default_value = "127.0.0.1:5682")]
    fabric: SocketAddr,
    /// The cluster's name (must match the nodes' [cluster] name).
    #[arg(long, env = "RAMQP_CLUSTER_NAME", default_value = "ramqp")]
    cluster_name: String,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// The cluster CA (PEM) when the fabric runs mutual TLS; needs
    /// --tls-cert and --tls-key, a certificate the cluster CA issued.
    #[arg(long, env = "RAMQP_FABRIC_TLS_CA", value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// The certificate (PEM) ramqp-ctl presents to the node.
    #[arg(long, env = "RAMQP_FABRIC_TLS_CERT", value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, env = "RAMQP_FABRIC_TLS_KEY", value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// The DNS name checked in the node's fabric certificate.
    #[arg(
        long,
        env = "RAMQP_FABRIC_TLS_SERVER_NAME",
        value_name = "NAME",
        default_value = fabric::DEFAULT_FABRIC_SERVER_NAME
    )]
    tls_server_name: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Members, queue leaders and depths as the node sees them.
    Status {
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Exit 0 when the node reaches every member and knows a metadata
    /// leader (and has at least --expect-members members).
    Health {
        /// The number of members the cluster should have.
        #[arg(long, default_value_t = 1)]
        expect_members: usize,
    },
    /// Add a node (already started with the others as peers) to the cluster.
    AddNode {
        /// Its node id.
        id: u64,
        /// Its fabric address.
        fabric: String,
    },
    /// Remove a node from the cluster; its replicas move to other nodes.
    RemoveNode {
        /// Its node id.
        id: u64,
    },
    /// Hand a queue's leadership (every queue the node leads by default)
    /// to another node.
    MoveLeadership {
        /// The queue address, e.g. /quorum/orders.
        #[arg(long)]
        queue: Option<String>,
        /// The node that should lead.
        #[arg(long)]
        to: Option<u64>,
    },
    /// Fault injection (the node must run with --allow-fault-injection):
    /// cut the node off from every peer.
    Isolate,
    /// Undo `isolate`.
    Heal,
    /// Manage a users file (--users of ramqp-brokerd): no node is asked.
    User {
        #[command(subcommand)]
        action: user::UserCommand,
    },
    /// Delete or purge a queue.
    Queue {
        #[command(subcommand)]
        action: QueueAction,
    },
}

#[derive(Debug, Subcommand)]
enum QueueAction {
    /// Delete a queue (/queues/<name> or /quorum/<name>): its messages are
    /// gone and its links are detached with amqp:resource-deleted. Any
    /// node may be asked; it passes the request to the node that can do it.
    Delete {
        /// The queue address.
        address: String,
    },
    /// Drop the messages waiting in a queue (those delivered and not yet
    /// settled stay); a quorum queue through its Raft log, on every replica.
    Purge {
        /// The queue address.
        address: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::User { action } = cli.command {
        return match user::run(action) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("ramqp-ctl: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ramqp-ctl: cannot start a runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("ramqp-ctl: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let timeout = Duration::from_millis(cli.timeout_ms);
    let request = match &cli.command {
        Command::Status { .. } | Command::Health { .. } => AdminRequest::Status,
        Command::AddNode { id, fabric } => AdminRequest::AddNode {
            id: *id,
            fabric: fabric.clone(),
        },
        Command::RemoveNode { id } => AdminRequest::RemoveNode { id: *id },
        Command::MoveLeadership { queue, to } => AdminRequest::MoveLeadership {
            queue: queue.clone(),
            to: *to,
        },
        Command::Isolate => AdminRequest::Isolate { isolated: true },
        Command::Heal => AdminRequest::Isolate { isolated: false },
        Command::User { .. } => bail!("user commands are handled without a node"),
        Command::Queue {
            action: QueueAction::Delete { address },
        } => AdminRequest::DeleteQueue {
            address: address.clone(),
            hops: 0,
        },
        Command::Queue {
            action: QueueAction::Purge { address },
        } => AdminRequest::PurgeQueue {
            address: address.clone(),
            hops: 0,
        },
    };
    let response = tokio::time::timeout(timeout, ask(&cli, &request))
        .await
        .with_context(|| format!("no answer from {} within {timeout:?}", cli.fabric))??;
    match (cli.command, response) {
        (Command::Status { json }, AdminResponse::Status(status)) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", render::status(&status));
            }
            Ok(ExitCode::SUCCESS)
        }
        (Command::Health { expect_members }, AdminResponse::Status(status)) => {
            Ok(health(&status, expect_members))
        }
        (_, AdminResponse::Done(message)) => {
            println!("{message}");
            Ok(ExitCode::SUCCESS)
        }
        (_, AdminResponse::Failed(message)) => bail!("{message}"),
        (_, other) => bail!("unexpected answer: {other:?}"),
    }
}

async fn ask(cli: &Cli, request: &AdminRequest) -> anyhow::Result<AdminResponse> {
    let mut config = fabric::ClientConfig::new(cli.fabric, cli.cluster_name.as_str());
    config.wire_version = broker::net::WIRE_VERSION;
    config.tls = match (&cli.tls_ca, &cli.tls_cert, &cli.tls_key) {
        (None, None, None) => None,
        (Some(ca), Some(cert), Some(key)) => Some(fabric::FabricTls::from_files(
            ca,
            cert,
            key,
            cli.tls_server_name.as_str(),
        )?),
        _ => bail!("fabric TLS needs all of --tls-ca, --tls-cert and --tls-key"),
    };
    let client = fabric::Client::connect_with(config)
        .await
        .with_context(|| format!("connecting to the fabric at {}", cli.fabric))?;
    let envelope = fabric::Envelope {
        channel: 0,
        kind: admin::ADMIN_ENVELOPE_KIND,
        meta: Bytes::new(),
        payload: Bytes::from(admin::encode_request(request)),
    };
    let answer = client
        .call(envelope)
        .await
        .with_context(|| format!("asking {}", cli.fabric))?;
    admin::decode_response(&answer).context("decoding the answer")
}

fn health(status: &NodeStatus, expect_members: usize) -> ExitCode {
    let unreachable: Vec<u64> = status
        .members
        .iter()
        .filter(|m| !m.reachable)
        .map(|m| m.id)
        .collect();
    let mut problems = Vec::new();
    if status.members.len() < expect_members {
        problems.push(format!(
            "{} members, expected {expect_members}",
            status.members.len()
        ));
    }
    if !unreachable.is_empty() {
        problems.push(format!("unreachable: {unreachable:?}"));
    }
    if status.metadata_leader.is_none() {
        problems.push("no metadata leader".into());
    }
    if problems.is_empty() {
        println!("node {}: healthy", status.node_id);
        ExitCode::SUCCESS
    } else {
        println!("node {}: {}", status.node_id, problems.join("; "));
        ExitCode::FAILURE
    }
}
