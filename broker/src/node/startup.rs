//! What a node derives from its configuration before it starts: the checks
//! that refuse an inconsistent configuration, the quorum settings with the
//! cluster's members filled in, and the member set a fresh cluster's
//! metadata group starts with.

use std::collections::BTreeMap;

use super::broker::BrokerError;
use crate::config::{BrokerConfig, FabricTlsConfig, QuorumConfig};
use crate::meta::NodeInfo;
use crate::net::NodeId;

/// The quorum settings with the cluster's members filled in: in cluster
/// mode without an explicit `quorum.members`, this node and its peers.
pub(crate) fn effective_quorum_config(config: &BrokerConfig) -> QuorumConfig {
    let mut quorum = config.quorum.clone();
    if quorum.members.is_empty() && !config.cluster.peers.is_empty() {
        quorum.members = std::iter::once(quorum.node_id)
            .chain(config.cluster.peers.iter().map(|p| p.id))
            .collect();
        quorum.members.sort_unstable();
        quorum.members.dedup();
    }
    quorum
}

/// The member set a fresh cluster's metadata group starts with: the same
/// on every node (ids and fabric addresses from the shared peer lists). A
/// node joining a running cluster starts with none and is added by an
/// operator (`ramqp-ctl add-node`).
pub(crate) fn initial_members(
    config: &BrokerConfig,
    quorum: &QuorumConfig,
) -> BTreeMap<NodeId, NodeInfo> {
    if config.cluster.join {
        return Default::default();
    }
    let mut members: BTreeMap<NodeId, NodeInfo> = quorum
        .cluster_members()
        .into_iter()
        .map(|id| (id, NodeInfo::default()))
        .collect();
    for peer in &config.cluster.peers {
        members.entry(peer.id).or_default().fabric = peer.fabric.to_string();
    }
    if let Some(listen) = config.cluster.fabric_listen {
        members.entry(quorum.node_id).or_default().fabric = listen.to_string();
    }
    members
}

/// The fabric's mutual TLS from its files: all three or none.
pub(crate) fn fabric_tls(
    config: &FabricTlsConfig,
) -> Result<Option<fabric::FabricTls>, BrokerError> {
    let name = config
        .server_name
        .clone()
        .unwrap_or_else(|| fabric::DEFAULT_FABRIC_SERVER_NAME.to_owned());
    match (&config.ca_file, &config.cert_file, &config.key_file) {
        (None, None, None) => Ok(None),
        (Some(ca), Some(cert), Some(key)) => fabric::FabricTls::from_files(ca, cert, key, name)
            .map(Some)
            .map_err(|e| BrokerError::Config(e.to_string())),
        _ => Err(BrokerError::Config(
            "fabric TLS needs all of [cluster.tls] ca_file, cert_file and key_file".into(),
        )),
    }
}

pub(crate) fn validate(config: &BrokerConfig) -> Result<(), BrokerError> {
    let limits = &config.limits;
    if limits.max_frame_size_bytes < crate::codec::frame::MIN_MAX_FRAME_SIZE {
        return Err(BrokerError::Config(format!(
            "limits.max_frame_size_bytes must be at least {}",
            crate::codec::frame::MIN_MAX_FRAME_SIZE
        )));
    }
    if limits.max_frame_size_before_open_bytes < crate::codec::frame::MIN_MAX_FRAME_SIZE {
        return Err(BrokerError::Config(format!(
            "limits.max_frame_size_before_open_bytes must be at least {}",
            crate::codec::frame::MIN_MAX_FRAME_SIZE
        )));
    }
    if config.websocket.max_message_bytes < limits.max_frame_size_bytes as usize {
        return Err(BrokerError::Config(format!(
            "websocket.max_message_bytes must hold a whole frame of limits.max_frame_size_bytes ({})",
            limits.max_frame_size_bytes
        )));
    }
    if limits.link_credit == 0 || limits.session_window == 0 || limits.consumer_credit_max == 0 {
        return Err(BrokerError::Config(
            "limits.link_credit, session_window and consumer_credit_max must be positive".into(),
        ));
    }
    let sasl = &config.sasl;
    if !sasl.anonymous_allowed()
        && sasl.users.is_empty()
        && sasl.users_file.is_none()
        && config.tls.client_ca_file.is_none()
    {
        return Err(BrokerError::Config(
            "sasl.allow_anonymous is off and there is no users file, no sasl.users and no \
             tls.client_ca_file: nobody could connect"
                .into(),
        ));
    }
    if config.http.tls && (config.http.listen.is_none() || config.tls.listen.is_none()) {
        return Err(BrokerError::Config(
            "http.tls needs http.listen and the AMQP TLS listener's certificate and key \
             (tls.listen, tls.cert_file, tls.key_file)"
                .into(),
        ));
    }
    if !config.listen_plain && config.tls.listen.is_none() {
        return Err(BrokerError::Config(
            "listen_plain is off and there is no tls.listen: no AMQP listener".into(),
        ));
    }
    let cluster = &config.cluster;
    if cluster.peers.iter().any(|p| p.id == config.quorum.node_id) {
        return Err(BrokerError::Config(format!(
            "cluster.peers lists this node's own id {}",
            config.quorum.node_id
        )));
    }
    if cluster.fabric_listen.is_none() && (!cluster.peers.is_empty() || cluster.join) {
        return Err(BrokerError::Config(
            "cluster.peers and cluster.join need cluster.fabric_listen".into(),
        ));
    }
    if config.quorum.node_id == 0 {
        return Err(BrokerError::Config("quorum.node_id 0 is reserved".into()));
    }
    crate::queue::PolicySet::compile(&config.policies)
        .map_err(|e| BrokerError::Config(e.to_string()))?;
    for name in &config.queues.declare {
        crate::queue::QueueAddress::parse(&format!("/queues/{name}"))
            .map_err(|e| BrokerError::Config(format!("queues.declare: {e}")))?;
    }
    Ok(())
}
