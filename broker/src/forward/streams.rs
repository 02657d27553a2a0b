//! The origin's side of the numbered streams of shipments (the server's
//! side is in `server.rs`, the messages in `protocol.rs`).
//!
//! A remote target can lose our links or what it ships to us
//! without any error reaching us (it restarted with the same id; it could
//! not reach us for a while and dropped our links; the transport lost
//! frames of a broken stream). Its shipments are numbered per stream
//! ([`StreamId`]: its incarnation and a generation bumped whenever it drops
//! our links), and [`Streams`] keeps, per node, the stream we follow and
//! the last number we got. Our links at a node are re-opened (every queue
//! targeting it goes back to searching; see `follow.rs` for what that does to
//! publishes and consumers) when:
//!
//! - a shipment skips numbers, or belongs to a new stream;
//! - a probe (every 500 ms, `follow.rs`, while links are in use) names links
//!   it does not know, shows a new stream, or shows shipments we never got
//!   and have made no progress towards for [`SHIPMENT_LAG_MAX`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::protocol::{self, Shipment, StreamId};
use super::routed::{RoutedQueue, Target};
use super::Forwarder;
use crate::net::{Envelope, NodeId};

/// How long shipments a probe said were sent may stay missing, with no
/// progress at all on their stream, before they count as lost.
const SHIPMENT_LAG_MAX: Duration = Duration::from_secs(2);

/// What we got from one node's stream.
struct StreamView {
    stream: StreamId,
    /// The highest sequence number seen (or given up on).
    seq: u64,
    /// A probe said `.1` were shipped when we had `.2`, at `.0`.
    behind: Option<(Instant, u64, u64)>,
}

/// The origin's view of every serving node's stream (one entry per node:
/// bounded by the cluster); see the module documentation.
#[derive(Default)]
pub(super) struct Streams {
    views: Mutex<HashMap<NodeId, StreamView>>,
}

impl Streams {
    fn views(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, StreamView>> {
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shipment `seq` of `stream` arrived from `node`: `false` when
    /// shipments before it were lost or it starts a new stream.
    fn arrived(&self, node: NodeId, stream: StreamId, seq: u64) -> bool {
        let mut views = self.views();
        let Some(view) = views.get_mut(&node) else {
            views.insert(
                node,
                StreamView {
                    stream,
                    seq,
                    behind: None,
                },
            );
            return true;
        };
        if view.stream != stream {
            *view = StreamView {
                stream,
                seq,
                behind: None,
            };
            return false;
        }
        // Lower: shipped before a probe made us skip ahead; harmless.
        let in_order = seq <= view.seq + 1;
        view.seq = view.seq.max(seq);
        in_order
    }

    /// Follow `node`'s stream as a probe shows it, when our links there are
    /// about to be re-opened anyway: `false` if it changed (links other
    /// queues had there are gone).
    pub(super) fn adopt(&self, node: NodeId, (stream, shipped): (StreamId, u64)) -> bool {
        let mut views = self.views();
        match views.get_mut(&node) {
            Some(view) if view.stream == stream => true,
            other => {
                let changed = other.is_some();
                views.insert(
                    node,
                    StreamView {
                        stream,
                        seq: shipped,
                        behind: None,
                    },
                );
                !changed
            }
        }
    }

    /// A probe of `node` showed its stream to us: `false` when our links
    /// there must be re-opened (new stream, or shipments lost at its end).
    pub(super) fn probed(&self, node: NodeId, (stream, shipped): (StreamId, u64)) -> bool {
        let mut views = self.views();
        let Some(view) = views.get_mut(&node) else {
            drop(views);
            return self.adopt(node, (stream, shipped));
        };
        if view.stream != stream {
            *view = StreamView {
                stream,
                seq: shipped,
                behind: None,
            };
            return false;
        }
        if view.seq >= shipped {
            view.behind = None;
            return true;
        }
        match view.behind {
            Some((since, wanted, had)) if view.seq == had && view.seq < wanted => {
                if since.elapsed() <= SHIPMENT_LAG_MAX {
                    return true;
                }
                // Nothing more came: the rest was lost on the way.
                view.seq = shipped;
                view.behind = None;
                false
            }
            // Not watching yet, or progress since (slow, not lost): watch
            // from here.
            _ => {
                view.behind = Some((Instant::now(), shipped, view.seq));
                true
            }
        }
    }
}

impl Forwarder {
    /// Take link traffic from a serving node (kind `FORWARD_TO_ORIGIN`).
    pub(super) fn on_shipment(&self, from: NodeId, envelope: Envelope) {
        let shipment: Shipment = match protocol::decode(&envelope.meta) {
            Ok(shipment) => shipment,
            Err(error) => {
                tracing::warn!(from, %error, "dropped forwarding message");
                return;
            }
        };
        if !self.streams.arrived(from, shipment.stream, shipment.seq) {
            // First, so the link of this very shipment is re-opened too
            // (what it carried returns to the queue there).
            tracing::info!(
                node = from,
                "lost shipments or a new stream; re-opening links"
            );
            self.resync(from);
        }
        let queue = self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(shipment.message.link())
            .and_then(Weak::upgrade);
        // Unknown: a link that moved on; what it carried returns to the
        // queue when the server drops the link.
        if let Some(queue) = queue {
            queue.on_origin(shipment.message, envelope.payload);
        }
    }

    /// Re-open every link at `node`: each queue targeting it searches
    /// again (and finds it again if it still serves).
    pub(super) fn resync(&self, node: NodeId) {
        let mut queues: Vec<Arc<RoutedQueue>> = self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .owners()
            .filter_map(Weak::upgrade)
            .collect();
        queues.sort_by_key(|q| Arc::as_ptr(q) as usize);
        queues.dedup_by_key(|q| Arc::as_ptr(q) as usize);
        for queue in queues {
            let mut state = queue.lock();
            if state.target == Target::Remote(node) {
                queue.lose_target(&mut state);
            }
        }
    }
}
