//! The generated prost messages and tonic service for `proto/fabric.proto`,
//! plus the conversions between [`Envelope`] and wire [`Frame`]s.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

use bytes::Bytes;

use crate::Envelope;

tonic::include_proto!("ramqp.fabric.v1");

/// gRPC metadata key carrying the dialling node's id (decimal).
pub(crate) const NODE_ID_KEY: &str = "ramqp-node-id";
/// gRPC metadata key carrying the dialling node's cluster name.
pub(crate) const CLUSTER_KEY: &str = "ramqp-cluster";

/// gRPC metadata key carrying the dialling node's wire versions, as
/// `<fabric protocol>.<application wire version>` (decimal, e.g. `1.3`).
pub(crate) const WIRE_VERSION_KEY: &str = "ramqp-wire-version";

/// The version of this crate's own framing (`Batch`, `Frame`, the stream's
/// metadata). Raised when either changes in a way an older node would
/// misread; the proto package name keeps its `v1` for gRPC routing.
pub const FABRIC_PROTOCOL_VERSION: u32 = 1;

/// The metadata value a node of application wire version `app` sends.
pub(crate) fn wire_version_value(app: u32) -> String {
    format!("{FABRIC_PROTOCOL_VERSION}.{app}")
}

/// Why a dialler's wire version is not ours, or `None` if it is.
pub(crate) fn wire_version_mismatch(sent: Option<&str>, app: u32) -> Option<String> {
    let ours = wire_version_value(app);
    match sent {
        Some(theirs) if theirs == ours => None,
        Some(theirs) => Some(format!(
            "wire version mismatch: the dialling node speaks {theirs}, this node {ours} \
             (<fabric protocol>.<application>); nodes of different wire versions cannot \
             form one cluster (see the rolling-upgrade notes)"
        )),
        None => Some(format!(
            "wire version mismatch: the dialling node sent no wire version (a release \
             before versioned streams), this node speaks {ours}"
        )),
    }
}

/// Bytes allowed on top of `max_message_bytes` for the frame and batch
/// headers, so that one envelope of exactly the maximum size still fits in a
/// batch and passes the codec limit.
pub(crate) const ENCODING_SLACK: usize = 64 * 1024;

impl Frame {
    /// A frame carrying `envelope` with the given op and correlation id.
    pub(crate) fn from_envelope(op: Op, id: u64, envelope: Envelope) -> Frame {
        Frame {
            op: op as i32,
            id,
            channel: envelope.channel,
            kind: envelope.kind,
            meta: envelope.meta,
            payload: envelope.payload,
        }
    }

    /// An answer frame for call `id`.
    pub(crate) fn answer(id: u64, result: Result<Bytes, String>) -> Frame {
        let (op, payload) = match result {
            Ok(bytes) => (Op::Reply, bytes),
            Err(text) => (Op::Error, Bytes::from(text)),
        };
        Frame {
            op: op as i32,
            id,
            payload,
            ..Frame::default()
        }
    }

    /// The envelope this frame carries (moves the byte buffers, no copy).
    pub(crate) fn into_envelope(self) -> Envelope {
        Envelope {
            channel: self.channel,
            kind: self.kind,
            meta: self.meta,
            payload: self.payload,
        }
    }

    /// Bytes counted against the message size limit (`meta` + `payload`).
    pub(crate) fn body_size(&self) -> usize {
        self.meta.len() + self.payload.len()
    }

    /// Bytes this frame adds to an encoded batch (its encoding plus the tag and
    /// length prefix of the repeated field).
    pub(crate) fn batch_size(&self) -> usize {
        let len = prost::Message::encoded_len(self);
        len + prost::length_delimiter_len(len) + 1
    }
}
