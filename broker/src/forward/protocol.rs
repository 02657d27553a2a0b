//! The forwarding messages, postcard-encoded into an envelope's `meta`.
//! Message bytes travel in the envelope's `payload` exactly as the client
//! sent them (never re-encoded); the receiving node only re-scans the
//! header.
//!
//! Link ids are chosen by the client's node (the *origin*) and are unique
//! per origin incarnation, so the serving node keys its links by
//! (origin, link) and a restarted origin never collides with its past.
//!
//! Everything the serving node ships to one origin is a [`Shipment`]: one
//! numbered *stream* per (server incarnation, origin, generation), so the
//! origin can tell when shipments were lost or its links there dropped
//! (see `follow.rs`, "Streams").

use std::sync::Arc;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::net::{kind, Envelope, NodeId};
use crate::queue::filter::MessageFilter;
use crate::queue::{ConsumerOptions, Outcome, QueueAddress};

/// Requests by `call` (kind [`kind::FORWARD_CALL`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Request {
    /// Which node leads (quorum) or owns (transient) this queue, as the
    /// asked node knows it; with `create`, a replica creates the quorum
    /// queue's group first (asked by non-replica nodes).
    Locate {
        /// The queue's address.
        address: String,
        /// Create the quorum queue if it does not exist.
        create: bool,
    },
    /// The origin asks whether the serving node still serves `address` and
    /// still knows these links (after a partition it may have dropped them).
    Probe {
        /// The queue's address.
        address: String,
        /// The origin's links to it.
        links: Vec<u64>,
    },
    /// The serving node asks the origin which of these links still exist
    /// (a link whose close was lost, or an origin that restarted).
    Alive {
        /// Links the serving node holds for the origin.
        links: Vec<u64>,
    },
    /// A quorum queue's leader hands leadership to the asked node (which
    /// has matched its log): campaign until elected, bounded. openraft 0.9
    /// has no transfer-leader call; see `quorum/handoff.rs`.
    Elect {
        /// The queue's address.
        address: String,
        /// The leader handing off (a leader other than it means done).
        from: NodeId,
    },
    /// Settle these messages by id on the queue's leader (settlements held
    /// while no leader was known, see `held_settles.rs`). Added last: a
    /// node of an older version fails to read it and answers `Failed`.
    Settle {
        /// The quorum queue's address.
        address: String,
        /// (message id, outcome), in the order they were made.
        settles: Vec<(u64, Outcome)>,
    },
}

/// Answers to [`Request`]s.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Reply {
    /// Answer to `Locate`.
    Located {
        /// The leader or owner, if known.
        node: Option<NodeId>,
    },
    /// Answer to `Probe`.
    Probed {
        /// Whether the asked node serves the queue now.
        serves: bool,
        /// Who leads, if the asked node knows.
        leader: Option<NodeId>,
        /// How long ago (ms) the asked node's replica last took an
        /// AppendEntries from that leader, if it ever did: a fresh figure
        /// vouches that the leader is alive (see `cut_off.rs`).
        leader_heard_ms: Option<u64>,
        /// Links the asked node does not know.
        unknown: Vec<u64>,
        /// The asked node's stream to the asking node and the last
        /// sequence number it handed to the transport on it (0: none yet).
        shipped: (StreamId, u64),
    },
    /// Answer to `Alive`: the links that are gone.
    Dead {
        /// Links the origin no longer has.
        links: Vec<u64>,
    },
    /// Answer to `Elect`: who leads now.
    Elected {
        /// The new leader.
        leader: NodeId,
    },
    /// The request could not be served.
    Failed(String),
    /// Answer to `Settle`.
    Settled {
        /// Whether the asked node led the queue and settled them.
        taken: bool,
        /// Who leads, if the asked node knows.
        leader: Option<NodeId>,
    },
}

/// Link traffic from the origin to the serving node (kind
/// [`kind::FORWARD_TO_SERVER`]), ordered per pair of nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ToServer {
    /// Open a publishing link to `address`.
    Publisher {
        /// Link id.
        link: u64,
        /// The queue's address.
        address: String,
    },
    /// One message (in the payload); the outcome comes back as
    /// `Published` with `token`, also for pre-settled ones (flow control).
    Publish {
        /// Link id.
        link: u64,
        /// Opaque to the server.
        token: u64,
    },
    /// Open a consuming link to `address`. Its delivery-count starts at 0
    /// on the server; the origin translates.
    Subscribe {
        /// Link id.
        link: u64,
        /// The queue's address.
        address: String,
    },
    /// Credit and drain of a consuming link.
    Flow {
        /// Link id.
        link: u64,
        /// In the server's delivery-count space.
        credit_limit: u32,
        /// Drain.
        drain: bool,
    },
    /// Settle a message delivered on the link (or, after a leadership
    /// change, delivered by the previous leader: by replicated id).
    Settle {
        /// Link id.
        link: u64,
        /// Message id.
        message: u64,
        /// Outcome.
        outcome: Outcome,
    },
    /// Take a delivery back (the client's credit shrank). No longer sent:
    /// the engine now holds such deliveries until credit returns (the
    /// link's order stays the queue's); kept so that the variants after it
    /// keep their indices on the wire, and ignored when received.
    Undeliver {
        /// Link id.
        link: u64,
        /// Message id.
        message: u64,
    },
    /// Close a link (consumer: its unsettled messages return).
    Close {
        /// Link id.
        link: u64,
    },
    /// A local transaction's part on the queue of publishing link `link`:
    /// the messages (one after another in the payload, of these lengths)
    /// and settlements of deliveries on this origin's consuming links,
    /// applied at once by the queue; the outcome comes back as `Published`
    /// with `token`.
    Commit {
        /// The publishing link.
        link: u64,
        /// Opaque to the server.
        token: u64,
        /// Byte length of each message in the payload, in order.
        lens: Vec<u32>,
        /// (consuming link, message id, outcome).
        settles: Vec<(u64, u64, Outcome)>,
    },
    /// `Subscribe` for a consumer with options (a filter, a priority).
    /// A variant of its own, added last, rather than a field added to
    /// `Subscribe`: postcard has no optional trailing fields, and a node
    /// of an older version must fail to read it (and the link be closed)
    /// rather than serve the consumer without its filter. Consumers with
    /// default options are still sent as `Subscribe`, which every version
    /// reads.
    SubscribeWith {
        /// Link id.
        link: u64,
        /// The queue's address.
        address: String,
        /// The consumer's options.
        options: WireOptions,
    },
}

impl ToServer {
    /// The subscribe message for a consumer with `options`: `Subscribe`
    /// when they are the defaults, else `SubscribeWith`.
    pub(crate) fn subscribe(link: u64, address: &QueueAddress, options: &ConsumerOptions) -> Self {
        let address = address.to_string();
        if options.is_default() {
            ToServer::Subscribe { link, address }
        } else {
            ToServer::SubscribeWith {
                link,
                address,
                options: WireOptions::from(options),
            }
        }
    }
}

/// [`ConsumerOptions`] on the wire: the filter as the AMQP encoding of the
/// filter-set entries it applies (the serving node rebuilds it with the
/// same code that built it from the attach).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireOptions {
    /// [`MessageFilter::to_wire`], if the consumer has a filter.
    pub(crate) filter: Option<Vec<u8>>,
    /// Consumer priority.
    pub(crate) priority: i32,
    /// Registration stamp from an earlier leader.
    pub(crate) registered: Option<u64>,
}

impl From<&ConsumerOptions> for WireOptions {
    fn from(options: &ConsumerOptions) -> Self {
        WireOptions {
            filter: options.filter.as_ref().map(|f| f.to_wire()),
            priority: options.priority,
            registered: options.registered,
        }
    }
}

impl WireOptions {
    /// The options again, or why the filter cannot be read.
    pub(crate) fn read(&self) -> Result<ConsumerOptions, String> {
        let filter = match &self.filter {
            Some(bytes) => Some(Arc::new(
                MessageFilter::from_wire(bytes).map_err(|e| e.to_string())?,
            )),
            None => None,
        };
        Ok(ConsumerOptions {
            filter,
            priority: self.priority,
            registered: self.registered,
        })
    }
}

/// Link traffic back to the origin (kind [`kind::FORWARD_TO_ORIGIN`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ToOrigin {
    /// A message (in the payload) for a consuming link.
    Deliver {
        /// Link id.
        link: u64,
        /// Message id (replicated for quorum queues).
        message: u64,
        /// delivery-count to put in the header.
        delivery_count: u32,
        /// Whether it was delivered before.
        redelivered: bool,
    },
    /// A drain completed at this credit limit (server space).
    Drained {
        /// Link id.
        link: u64,
        /// Credit limit used up.
        credit_limit: u32,
    },
    /// The outcome of a publish.
    Published {
        /// Link id.
        link: u64,
        /// The token of the publish.
        token: u64,
        /// Outcome.
        outcome: Outcome,
    },
    /// The server can no longer serve the link (not leader any more, queue
    /// gone, unknown link): the origin re-targets it.
    Closed {
        /// Link id.
        link: u64,
        /// Why.
        reason: String,
        /// The queue was deleted: the origin detaches its links with
        /// amqp:resource-deleted instead of looking for the queue again.
        deleted: bool,
    },
    /// The consumer's registration stamp (its place in the consumer order
    /// of a queue with a single active consumer), for the origin to bring
    /// to the next leader. Added last; sent only for such queues.
    Registered {
        /// Link id.
        link: u64,
        /// The stamp.
        stamp: u64,
    },
}

/// One stream of shipments from a serving node to an origin. A new one
/// starts when the server restarts (new incarnation) or when it dropped the
/// origin's links (new generation): whatever the origin had there is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StreamId {
    /// The serving node's incarnation (chosen at start, from the clock).
    pub(crate) incarnation: u64,
    /// Counts the server's streams to this origin within the incarnation.
    pub(crate) generation: u64,
}

/// The meta of a [`kind::FORWARD_TO_ORIGIN`] envelope.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Shipment {
    /// The stream it belongs to.
    pub(crate) stream: StreamId,
    /// 1, 2, 3, ... within the stream.
    pub(crate) seq: u64,
    /// The link traffic.
    pub(crate) message: ToOrigin,
}

impl ToOrigin {
    pub(crate) fn link(&self) -> u64 {
        match self {
            ToOrigin::Deliver { link, .. }
            | ToOrigin::Drained { link, .. }
            | ToOrigin::Published { link, .. }
            | ToOrigin::Closed { link, .. }
            | ToOrigin::Registered { link, .. } => *link,
        }
    }
}

/// Why a forwarding message could not be read.
#[derive(Debug, thiserror::Error)]
#[error("bad forwarding message: {0}")]
pub(crate) struct DecodeError(#[from] postcard::Error);

/// An envelope of `kind` carrying `meta` and `payload`.
pub(crate) fn envelope<T: Serialize>(
    kind: u32,
    channel: u64,
    meta: &T,
    payload: Bytes,
) -> Envelope {
    // Encoding plain enums of integers and strings into a Vec cannot fail.
    let meta = postcard::to_allocvec(meta)
        .map(Bytes::from)
        .unwrap_or_default();
    Envelope {
        channel,
        kind,
        meta,
        payload,
    }
}

/// Decode an envelope's meta.
pub(crate) fn decode<T: DeserializeOwned>(meta: &[u8]) -> Result<T, DecodeError> {
    Ok(postcard::from_bytes(meta)?)
}

/// A request envelope.
pub(crate) fn request(request: &Request) -> Envelope {
    envelope(kind::FORWARD_CALL, 0, request, Bytes::new())
}

/// A reply's bytes.
pub(crate) fn reply(reply: &Reply) -> Bytes {
    postcard::to_allocvec(reply)
        .map(Bytes::from)
        .unwrap_or_default()
}
