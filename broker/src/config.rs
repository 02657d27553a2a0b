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
    /// Serve plain (non-TLS) AMQP on `listen`. Off needs `tls.listen`;
    /// `ramqp-brokerd` turns it off when `--tls-listen` is given and
    /// `--listen` is not.
    pub listen_plain: bool,
    /// TLS on the AMQP port.
    pub tls: TlsConfig,
    /// AMQP over WebSocket.
    pub websocket: WebSocketConfig,
    /// The HTTP endpoint: health, readiness and Prometheus metrics.
    pub http: HttpConfig,
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
    /// The fabric between the nodes of a multi-process cluster.
    pub cluster: ClusterConfig,
    /// Queue policies (`[[policies]]`), in file order: a queue takes the
    /// first whose pattern matches its address. Checked at start
    /// (`queue::PolicySet::compile`); replaced at run time by SIGHUP or
    /// `PUT /api/policies`.
    pub policies: Vec<PolicyConfig>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            listen_plain: true,
            tls: TlsConfig::default(),
            websocket: WebSocketConfig::default(),
            http: HttpConfig::default(),
            data_dir: None,
            container_id: None,
            limits: Limits::default(),
            sasl: SaslConfig::default(),
            queues: QueuesConfig::default(),
            quorum: QuorumConfig::default(),
            cluster: ClusterConfig::default(),
            policies: Vec::new(),
        }
    }
}

/// Protocol limits, each enforced on what peers send.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest frame we accept, announced as max-frame-size in `open`.
    pub max_frame_size_bytes: u32,
    /// Largest frame we accept before the peer's `open` (SASL frames and
    /// the `open` itself): a peer that has not logged in cannot make us
    /// buffer more. At least 512 (the spec's minimum max-frame-size); a
    /// larger `max_frame_size_bytes` does not raise it, a smaller one
    /// lowers it.
    pub max_frame_size_before_open_bytes: u32,
    /// Most connections served at once from one source IP address,
    /// counted from accept, before TLS and login; further ones are
    /// dropped at once. 0: no limit.
    pub max_connections_per_address: usize,
    /// Highest channel number we accept (channel-max in `open`).
    pub channel_max: u16,
    /// Highest link handle we accept per session (handle-max in `begin`).
    pub handle_max: u32,
    /// A peer silent for this long is closed with
    /// amqp:resource-limit-exceeded; we announce half of it as our
    /// idle-time-out (transport 2.4.5). 0 disables it.
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
    /// Most transactions one connection may have declared and not yet
    /// discharged; a further declare is rejected with
    /// amqp:resource-limit-exceeded.
    pub txn_max_open: usize,
    /// Most operations (posted messages and settlements) the live
    /// transactions of one connection may stage together; past it the
    /// operation is refused with amqp:resource-limit-exceeded and its
    /// transaction can only roll back.
    pub txn_max_operations: usize,
    /// Most bytes of posted messages the live transactions of one
    /// connection may stage together (same refusal).
    pub txn_max_bytes: u64,
}

impl Limits {
    /// The frame limit before `open`: the pre-open limit, never above
    /// the connection's own.
    pub fn frame_max_before_open(&self) -> u32 {
        self.max_frame_size_before_open_bytes
            .min(self.max_frame_size_bytes)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_size_bytes: 256 * 1024,
            max_frame_size_before_open_bytes: 8 * 1024,
            max_connections_per_address: 1000,
            channel_max: 255,
            handle_max: 1023,
            idle_timeout_ms: 60_000,
            handshake_timeout_ms: 10_000,
            max_message_size_bytes: 128 * 1024 * 1024,
            link_credit: 1000,
            session_window: 8192,
            consumer_credit_max: 10_000,
            max_connections: 10_000,
            txn_max_open: 64,
            txn_max_operations: 4096,
            txn_max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// AMQP over TLS (rustls). The certificate files are read at start and
/// again on `Broker::reload` (SIGHUP in `ramqp-brokerd`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// Address of the TLS listener (amqps); none: no TLS listener. A
    /// client may also start TLS on the plain listener with the AMQP TLS
    /// protocol header (spec 5.2.1) when this is set.
    pub listen: Option<SocketAddr>,
    /// The server's certificate chain, PEM (leaf first).
    pub cert_file: Option<PathBuf>,
    /// The server's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
    /// CA certificates (PEM) that client certificates are verified
    /// against. A client that presents a valid one may log in with SASL
    /// EXTERNAL as its subject CN; clients without one may still use the
    /// other mechanisms.
    pub client_ca_file: Option<PathBuf>,
}

/// AMQP over WebSocket (the OASIS binding: subprotocol `amqp`, binary
/// messages). Served as wss, with the `tls` certificates, when TLS is
/// configured; as plain ws otherwise.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSocketConfig {
    /// Address of the WebSocket listener; none: no WebSocket listener.
    pub listen: Option<SocketAddr>,
    /// Largest WebSocket message (and frame) a client may send; a larger
    /// one closes the connection with code 1009. Must hold a whole AMQP
    /// frame of `limits.max_frame_size_bytes`.
    pub max_message_bytes: usize,
}

impl Default for WebSocketConfig {
    fn default() -> Self {
        WebSocketConfig {
            listen: None,
            max_message_bytes: 1024 * 1024,
        }
    }
}

/// The HTTP endpoint: off unless `listen` is set. `/healthz`, `/readyz`
/// and `/metrics` are not authenticated (bind them where only the
/// operator's scraper and probes reach them). The management API under
/// `/api/` answers only on a loopback listener or over TLS, with HTTP
/// basic auth against the users when there are any.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Address of the HTTP listener; none: no HTTP endpoint.
    pub listen: Option<SocketAddr>,
    /// Serve HTTPS with the AMQP listener's `[tls]` certificate and key
    /// (which then must be configured).
    pub tls: bool,
}

/// SASL settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaslConfig {
    /// Offer ANONYMOUS, and accept connections that skip SASL entirely.
    /// Unset: on, unless `users_file` is given.
    pub allow_anonymous: Option<bool>,
    /// The users file: salted SCRAM-SHA-256 credentials and permissions
    /// (`ramqp-ctl user add`). With one, PLAIN and SCRAM-SHA-256 are
    /// checked against it and attaches are authorized by its permissions.
    pub users_file: Option<PathBuf>,
    /// Deprecated: plaintext users for PLAIN, with every permission. They
    /// are hashed at start-up; `ramqp-brokerd` warns when any are set.
    /// Use `users_file` instead.
    pub users: Vec<User>,
}

impl SaslConfig {
    /// Whether anonymous connections are accepted.
    pub fn anonymous_allowed(&self) -> bool {
        self.allow_anonymous.unwrap_or(self.users_file.is_none())
    }
}

/// One plaintext PLAIN user (deprecated, see [`SaslConfig::users`]).
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Login name.
    pub username: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
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
    /// How often the node lets go of the routed queues nothing uses (how
    /// it reaches a `/quorum/` queue, or a transient queue held by another
    /// node, for the clients attached through it): one is dropped at the
    /// second sweep in a row that finds it without links or anything in
    /// flight, and made again by the next attach. 0: never.
    pub route_sweep_ms: u64,
}

impl Default for QueuesConfig {
    fn default() -> Self {
        QueuesConfig {
            auto_create: true,
            declare: Vec::new(),
            max_messages: 1_000_000,
            max_bytes: 1024 * 1024 * 1024,
            route_sweep_ms: 10_000,
        }
    }
}

/// One queue policy as written in the config file (`[[policies]]`) or the
/// management API: plain data, checked and compiled by
/// `queue::PolicySet::compile` (pattern syntax, dead-letter address). An
/// absent limit is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// A glob on the queue address: `*` any run of characters within one
    /// `/`-separated part, `?` one character (e.g. `/quorum/orders-*`).
    pub pattern: String,
    /// Most messages the queue holds (waiting and unsettled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// Most bytes of messages the queue holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length_bytes: Option<u64>,
    /// What a full queue does with one more message.
    #[serde(default)]
    pub overflow: Overflow,
    /// Messages expire this long after they were enqueued (a header ttl
    /// that is shorter wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ttl_ms: Option<u64>,
    /// A message delivered this many times without being settled is
    /// dead-lettered (or dropped without a dead-letter address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_limit: Option<u32>,
    /// Where rejected, expired, dropped and over-the-limit messages go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_address: Option<String>,
    /// Only one consumer at a time gets messages; the others wait.
    #[serde(default)]
    pub single_active_consumer: bool,
}

/// What a queue at its `max_length` or `max_length_bytes` does with one
/// more message (RabbitMQ's `overflow`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// The publish is refused: the publisher gets `rejected`, and no new
    /// credit while the queue is full.
    #[default]
    RejectPublish,
    /// The oldest waiting messages are dropped (or dead-lettered) to make
    /// room.
    DropHead,
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
    /// A snapshot is also taken once the log bytes applied since the last
    /// one pass this or the queue's live bytes, whichever is larger, so a
    /// busy queue's log (and the redb file) stays bounded by size; 0 turns
    /// the size rule off.
    pub snapshot_min_log_bytes: u64,
    /// Entries kept before a snapshot's index when the log is purged, so a
    /// follower a little behind catches up from the log instead of a
    /// snapshot. One entry holds up to 4 MiB, so keep this small.
    pub log_entries_kept_after_snapshot: u64,
    /// Publishes proposed and not yet committed, per queue, before the
    /// queue's publishers stop getting credit.
    pub max_inflight_publishes: usize,
    /// How long a publish may wait for its commit before the publisher
    /// hears `released` (e.g. no quorum).
    pub publish_timeout_ms: u64,
    /// AppendEntries a queue's leader keeps in flight to each follower
    /// (pipelined, answered in order); 1 sends one at a time, waiting for
    /// each answer (openraft's sequential stream). 4 by default since it
    /// measured better than 1 on every 3-node figure (docs/benchmarks.md,
    /// "Pipelined AppendEntries with one worker per node").
    pub append_pipeline_depth: usize,
    /// How long an attach waits for a new queue's first leader.
    pub leader_wait_ms: u64,
    /// Bytes of message bodies all quorum queues of this node keep in
    /// memory together; past it, bodies are paged to segment files.
    pub resident_budget_bytes: u64,
    /// Bytes of message bodies one quorum queue keeps in memory at most.
    pub queue_resident_budget_bytes: u64,
    /// A queue's segment file is closed and a new one started past this
    /// size.
    pub segment_max_bytes: u32,
    /// Bytes a segment file is written past before the kernel is asked to
    /// start writing them back (no wait; durability still comes from the
    /// snapshot's fdatasync); 0 leaves it all to that fdatasync.
    pub segment_writeback_step_bytes: u32,
    /// redb's page cache for the node's Raft log, in bytes.
    pub log_cache_bytes: usize,
    /// The Raft log's append journal, in bytes: batches of appends are made
    /// durable there with one write and one fdatasync each and folded into
    /// redb in large transactions (store-redb's `journal.rs`). 0: every
    /// batch is a redb commit.
    pub log_journal_bytes: u64,
    /// Write the journal's records with `O_DIRECT | O_DSYNC` (each write
    /// durable by itself, past the page cache) instead of a write and an
    /// `fdatasync` each, where the file system does direct I/O.
    pub log_journal_direct: bool,
    /// Publishers to quorum queues get no new credit while the free space
    /// under the data dir is below this (0: no check).
    pub min_free_disk_bytes: u64,
    /// ... or while the data dir holds more than this (0: no limit).
    pub max_data_bytes: u64,
    /// ... or while the process's resident memory is above this (0: no
    /// limit); this one holds back publishers to transient queues too.
    pub memory_high_watermark_bytes: u64,
    /// How often a node hands the groups it leads back to their preferred
    /// leader (the first member of the replica set), once that node has
    /// run three times this long and caught up; 0 never (leaderships then stay where
    /// fail-overs and graceful stops put them).
    pub leader_rebalance_interval_ms: u64,
    /// Count a peer lost at once when its address refuses connections
    /// (its process is not running) instead of after the down time-out,
    /// and have its groups' successors take over without waiting out its
    /// lease (on by default; off: a dead node is found by the down
    /// time-out and its groups wait out its lease, as for a node that is
    /// merely silent).
    pub lost_when_not_listening: bool,
}

impl QuorumConfig {
    /// Every node of the cluster, sorted (this node alone when `members`
    /// is empty).
    pub fn cluster_members(&self) -> Vec<u64> {
        let mut all = self.members.clone();
        if !all.contains(&self.node_id) {
            all.push(self.node_id);
        }
        all.sort_unstable();
        all.dedup();
        all
    }
}

impl Default for QuorumConfig {
    fn default() -> Self {
        QuorumConfig {
            node_id: 1,
            members: Vec::new(),
            replication_factor: 3,
            heartbeat_interval_ms: 500,
            election_timeout_min_ms: 1500,
            election_timeout_max_ms: 3000,
            snapshot_every_entries: 100_000,
            snapshot_min_log_bytes: 64 * 1024 * 1024,
            log_entries_kept_after_snapshot: 10,
            max_inflight_publishes: 10_000,
            publish_timeout_ms: 10_000,
            append_pipeline_depth: 4,
            leader_wait_ms: 15_000,
            resident_budget_bytes: 64 * 1024 * 1024,
            queue_resident_budget_bytes: 16 * 1024 * 1024,
            segment_max_bytes: 64 * 1024 * 1024,
            // The same as `paging::WRITEBACK_STEP_BYTES_DEFAULT` (config sits
            // below paging and cannot name it).
            segment_writeback_step_bytes: 4 * 1024 * 1024,
            log_cache_bytes: 32 * 1024 * 1024,
            // store-redb's `JOURNAL_BYTES_DEFAULT` (config cannot name it).
            log_journal_bytes: 4 * 1024 * 1024,
            log_journal_direct: true,
            min_free_disk_bytes: 50 * 1024 * 1024,
            max_data_bytes: 0,
            memory_high_watermark_bytes: 0,
            leader_rebalance_interval_ms: 10_000,
            lost_when_not_listening: true,
        }
    }
}

/// The fabric: how the nodes of a cluster of separate processes reach each
/// other. Without `fabric_listen` the node runs alone (or, embedded, over
/// the in-process transport of `Cluster`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Shared by every node; a fabric connection announcing another name
    /// is refused, so two clusters on one host cannot mix.
    pub name: String,
    /// Address the fabric (inter-node gRPC) listens on.
    pub fabric_listen: Option<SocketAddr>,
    /// The other nodes and their fabric addresses, as `ID=HOST:PORT`.
    pub peers: Vec<PeerAddress>,
    /// Largest fabric message (a batch of Raft entries, a snapshot chunk,
    /// a forwarded message), enforced by sender and receiver.
    pub max_message_bytes: usize,
    /// How long a fabric request may take before it fails.
    pub call_timeout_ms: u64,
    /// This node joins a running cluster: it does not bootstrap the
    /// metadata group, an operator adds it (`ramqp-ctl add-node`).
    pub join: bool,
    /// Accept `ramqp-ctl isolate`/`heal` (cut this node off from its peers
    /// and back): for partition tests, never for production.
    pub allow_fault_injection: bool,
    /// Mutual TLS on the fabric (`[cluster.tls]`).
    pub tls: FabricTlsConfig,
}

/// Mutual TLS between the nodes (and `ramqp-ctl`): every node holds a
/// certificate from one cluster CA and accepts only peers that hold one
/// too. All three files or none; read once at start.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FabricTlsConfig {
    /// The cluster CA certificate (PEM): the only issuer trusted, both ways.
    pub ca_file: Option<PathBuf>,
    /// This node's certificate chain (PEM, leaf first), issued by the
    /// cluster CA, usable for server and client authentication, with the
    /// server name below as a DNS subject alternative name.
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM).
    pub key_file: Option<PathBuf>,
    /// The DNS name a dialler checks in a listener's certificate; one name
    /// for the whole cluster, whatever the nodes' addresses (default
    /// `ramqp-fabric`).
    pub server_name: Option<String>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            name: "ramqp".to_owned(),
            fabric_listen: None,
            peers: Vec::new(),
            max_message_bytes: 64 * 1024 * 1024,
            call_timeout_ms: 10_000,
            join: false,
            allow_fault_injection: false,
            tls: FabricTlsConfig::default(),
        }
    }
}

/// Another node of the cluster: `ID=HOST:PORT` of its fabric listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct PeerAddress {
    /// Its node id.
    pub id: u64,
    /// Its fabric address.
    pub fabric: SocketAddr,
}

impl std::str::FromStr for PeerAddress {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let (id, addr) = value
            .split_once('=')
            .ok_or_else(|| format!("expected ID=HOST:PORT, got {value:?}"))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("node id {id:?} is not a number"))?;
        if id == 0 {
            return Err("node id 0 is reserved".into());
        }
        let fabric = std::net::ToSocketAddrs::to_socket_addrs(addr.trim())
            .map_err(|e| format!("{addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr} resolves to no address"))?;
        Ok(PeerAddress { id, fabric })
    }
}

impl TryFrom<String> for PeerAddress {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl std::fmt::Display for PeerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.id, self.fabric)
    }
}
