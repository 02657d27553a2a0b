//! Broker configuration: every limit and switch the engine and the queues
//! read, with the defaults an embedded test broker wants. `ramqp-brokerd`
//! deserializes the same structure from its TOML file.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// The whole configuration of one broker node.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// Address the AMQP listener binds. Port 0 picks a free port (the
    /// embedded default); `ramqp-brokerd` defaults to 127.0.0.1:5672.
    pub listen: SocketAddr,
    /// Directory for the node's data. `None` creates a temporary directory
    /// that is removed when the broker is dropped.
    pub data_dir: Option<PathBuf>,
    /// The container-id announced in `open`; a random one when `None`.
    pub container_id: Option<String>,
    /// Protocol limits.
    pub limits: Limits,
    /// Authentication.
    pub sasl: SaslConfig,
    /// Queue behaviour.
    pub queues: QueuesConfig,
    /// Quorum queues and the Raft groups behind them.
    pub quorum: QuorumConfig,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            container_id: None,
            limits: Limits::default(),
            sasl: SaslConfig::default(),
            queues: QueuesConfig::default(),
            quorum: QuorumConfig::default(),
        }
    }
}

/// Protocol limits, each enforced on what peers send.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest frame we accept, announced as max-frame-size in `open`.
    pub max_frame_size_bytes: u32,
    /// Highest channel number we accept (channel-max in `open`).
    pub channel_max: u16,
    /// Highest link handle we accept per session (handle-max in `begin`).
    pub handle_max: u32,
    /// Idle time-out we announce; a peer silent for this long is closed
    /// with amqp:resource-limit-exceeded. 0 disables it.
    pub idle_timeout_ms: u32,
    /// Time a new connection has to finish the protocol header, SASL and
    /// `open` exchange before it is dropped.
    pub handshake_timeout_ms: u64,
    /// Largest message we accept on a link (max-message-size in `attach`).
    pub max_message_size_bytes: u64,
    /// Credit we grant each publishing link, topped up as the queue takes
    /// messages.
    pub link_credit: u32,
    /// Transfer frames a session accepts before it must see our next flow
    /// (incoming-window in `begin`).
    pub session_window: u32,
    /// Most link credit we honour on one consuming link: bounds how many
    /// deliveries one link can have in flight inside the broker.
    pub consumer_credit_max: u32,
    /// Most connections served at once; further ones are closed with
    /// amqp:resource-limit-exceeded.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_size_bytes: 256 * 1024,
            channel_max: 255,
            handle_max: 1023,
            idle_timeout_ms: 60_000,
            handshake_timeout_ms: 10_000,
            max_message_size_bytes: 128 * 1024 * 1024,
            link_credit: 1000,
            session_window: 8192,
            consumer_credit_max: 10_000,
            max_connections: 10_000,
        }
    }
}

/// SASL settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaslConfig {
    /// Offer ANONYMOUS, and accept connections that skip SASL entirely.
    pub allow_anonymous: bool,
    /// Users accepted by PLAIN.
    pub users: Vec<User>,
}

impl Default for SaslConfig {
    fn default() -> Self {
        SaslConfig {
            allow_anonymous: true,
            users: Vec::new(),
        }
    }
}

/// One PLAIN user.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Login name.
    pub username: String,
    /// Password, compared in constant time.
    pub password: String,
}

/// Queue settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueuesConfig {
    /// Create a queue on first attach to an unknown `/queues/<name>`. When
    /// off, such an attach is refused with amqp:not-found.
    pub auto_create: bool,
    /// Queue names that exist from start-up (without the `/queues/` prefix).
    pub declare: Vec<String>,
    /// A transient queue holding this many messages stops granting its
    /// publishers credit until consumers take some.
    pub max_messages: usize,
    /// The same limit in body bytes.
    pub max_bytes: u64,
}

impl Default for QueuesConfig {
    fn default() -> Self {
        QueuesConfig {
            auto_create: true,
            declare: Vec::new(),
            max_messages: 1_000_000,
            max_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// Quorum queues: node identity, cluster members, Raft timings.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuorumConfig {
    /// This node's id in the cluster (unique, non-zero).
    pub node_id: u64,
    /// Ids of every node of the cluster; empty means this node alone.
    pub members: Vec<u64>,
    /// Replicas per quorum queue (capped by the number of members).
    pub replication_factor: usize,
    /// Leader heartbeat period. Idle cost grows with groups / this.
    pub heartbeat_interval_ms: u64,
    /// Election time-out range: long enough that a loaded 2-core machine
    /// does not trigger elections, short enough for a quick fail-over.
    pub election_timeout_min_ms: u64,
    /// Upper end of the election time-out range.
    pub election_timeout_max_ms: u64,
    /// Log entries between snapshots (logs before a snapshot are purged).
    pub snapshot_every_entries: u64,
    /// Publishes proposed and not yet committed, per queue, before the
    /// queue's publishers stop getting credit.
    pub max_inflight_publishes: usize,
    /// How long a publish may wait for its commit before the publisher
    /// hears `released` (e.g. no quorum).
    pub publish_timeout_ms: u64,
    /// How long an attach waits for a new queue's first leader.
    pub leader_wait_ms: u64,
}

impl Default for QuorumConfig {
    fn default() -> Self {
        QuorumConfig {
            node_id: 1,
            members: Vec::new(),
            replication_factor: 3,
            heartbeat_interval_ms: 1000,
            election_timeout_min_ms: 3000,
            election_timeout_max_ms: 6000,
            snapshot_every_entries: 100_000,
            max_inflight_publishes: 10_000,
            publish_timeout_ms: 10_000,
            leader_wait_ms: 15_000,
        }
    }
}
