//! A session endpoint: its links by handle, the two transfer windows, the
//! deliveries we sent that the peer has not settled, and the queue of
//! outgoing transfer frames waiting for the peer's incoming window.

use std::collections::VecDeque;

// Keyed by channels, handles and tags, looked up for every frame and
// queue event: a fast hasher (no flooding resistance needed for these
// small keys, bounded by channel-max and handle-max).
use foldhash::{HashMap, HashSet};

use bytes::Bytes;

use super::link::Link;
use super::outbox::Outbox;
use super::unsettled::UnsettledDeliveries;
use crate::codec::frame::transfer_frame_overhead;
use crate::codec::{Flow, TransferHead};

/// Room we assume a transfer performative needs when deciding whether a
/// payload surely fits one frame (a transfer with an 8-byte tag encodes in
/// under 40 bytes).
const TRANSFER_OVERHEAD_BOUND_BYTES: usize = 128;

/// A message on its way out, possibly split over several frames.
pub(crate) struct OutgoingTransfer {
    pub(crate) handle: u32,
    pub(crate) delivery_id: u32,
    /// The delivery-tag: the queue's message id, big-endian (held inline,
    /// so a delivery allocates no tag).
    pub(crate) delivery_tag: [u8; 8],
    pub(crate) settled: bool,
    /// The message: a rewritten header (or empty) and the rest.
    pub(crate) parts: [Bytes; 2],
    /// Bytes of `parts` already sent.
    pub(crate) sent: usize,
}

impl OutgoingTransfer {
    fn remaining(&self) -> usize {
        self.parts[0].len() + self.parts[1].len() - self.sent
    }

    /// The next `n` bytes as at most two slices, advancing `sent`.
    fn take(&mut self, n: usize) -> [Bytes; 2] {
        let first_len = self.parts[0].len();
        let mut slices = [Bytes::new(), Bytes::new()];
        let mut start = self.sent;
        let end = self.sent + n;
        if start < first_len {
            let stop = end.min(first_len);
            slices[0] = self.parts[0].slice(start..stop);
            start = stop;
        }
        if start < end {
            slices[1] = self.parts[1].slice(start - first_len..end - first_len);
        }
        self.sent = end;
        slices
    }
}

/// One session of a connection.
pub(crate) struct Session {
    pub(crate) channel: u16,
    pub(crate) handle_max: u32,
    pub(crate) links: HashMap<u32, Link>,
    /// Handles we detached and whose detach the peer has not answered yet:
    /// frames still in flight on them are ignored.
    pub(crate) detaching: HashSet<u32>,
    /// Handles whose detach exchange just ended and are not attached again
    /// yet: fe2o3-amqp sometimes answers the detach of a refused link
    /// twice, and the second must not end the connection.
    pub(crate) answered: HashSet<u32>,
    /// Next transfer-id we expect from the peer.
    pub(crate) next_incoming_id: u32,
    /// Transfer frames the peer may still send before our next flow.
    pub(crate) incoming_window: u32,
    /// What we re-open the incoming window to.
    pub(crate) incoming_window_max: u32,
    /// Next transfer-id we send.
    pub(crate) next_outgoing_id: u32,
    /// Transfer frames the peer still accepts from us.
    pub(crate) remote_incoming_window: u32,
    /// Next delivery-id we assign.
    pub(crate) next_delivery_id: u32,
    /// Deliveries we sent that the peer has not settled.
    pub(crate) unsettled: UnsettledDeliveries,
    /// Transfers waiting for the peer's incoming window.
    pub(crate) pending: VecDeque<OutgoingTransfer>,
    /// Publishes (by delivery-id) to answer with `accepted`, collected so
    /// a burst is answered with one ranged disposition.
    pub(crate) accepted: Vec<u32>,
    /// Publishes to answer with accepted but leave unsettled (rcv-settle-mode second).
    pub(crate) accepted_unsettled: Vec<u32>,
    /// Keeps the session in the node's open-session count while it lives.
    pub(crate) counted: Option<super::Counted>,
}

impl Session {
    pub(crate) fn new(channel: u16, handle_max: u32, window: u32, remote_window: u32) -> Self {
        Session {
            channel,
            handle_max,
            links: HashMap::default(),
            detaching: HashSet::default(),
            answered: HashSet::default(),
            next_incoming_id: 0,
            incoming_window: window,
            incoming_window_max: window,
            next_outgoing_id: 0,
            remote_incoming_window: remote_window,
            next_delivery_id: 0,
            unsettled: UnsettledDeliveries::default(),
            pending: VecDeque::new(),
            accepted: Vec::new(),
            accepted_unsettled: Vec::new(),
            counted: None,
        }
    }

    /// A flow carrying this session's window state (and no link state).
    pub(crate) fn flow(&self) -> Flow {
        Flow {
            next_incoming_id: Some(self.next_incoming_id),
            incoming_window: self.incoming_window,
            next_outgoing_id: self.next_outgoing_id,
            outgoing_window: u32::MAX,
            ..Flow::default()
        }
    }

    /// Account for one incoming transfer frame. Returns false if the peer
    /// overran the window we gave it.
    pub(crate) fn take_incoming_frame(&mut self) -> bool {
        if self.incoming_window == 0 {
            return false;
        }
        self.incoming_window -= 1;
        self.next_incoming_id = self.next_incoming_id.wrapping_add(1);
        true
    }

    /// Re-open our incoming window once it is half used; returns whether a
    /// session flow must be sent.
    pub(crate) fn replenish_incoming_window(&mut self) -> bool {
        if self.incoming_window < self.incoming_window_max / 2 {
            self.incoming_window = self.incoming_window_max;
            return true;
        }
        false
    }

    /// Apply the peer's session-level flow state.
    pub(crate) fn on_remote_flow(&mut self, flow: &Flow) {
        let next_incoming_id = flow.next_incoming_id.unwrap_or(0);
        self.remote_incoming_window = next_incoming_id
            .wrapping_add(flow.incoming_window)
            .wrapping_sub(self.next_outgoing_id);
    }

    /// Send as many pending transfer frames as the peer's window allows,
    /// none larger than `max_frame_size`.
    pub(crate) fn pump(&mut self, out: &mut Outbox, max_frame_size: usize) {
        while self.remote_incoming_window > 0 {
            let Some(transfer) = self.pending.front_mut() else {
                return;
            };
            let first = transfer.sent == 0;
            let tag = transfer.delivery_tag;
            let mut head = TransferHead {
                handle: transfer.handle,
                delivery_id: Some(transfer.delivery_id),
                delivery_tag: None,
                message_format: None,
                settled: None,
                more: false,
            };
            if first {
                head.delivery_tag = Some(&tag);
                head.message_format = Some(0);
                head.settled = Some(transfer.settled);
            }
            let remaining = transfer.remaining();
            let room = if remaining + TRANSFER_OVERHEAD_BOUND_BYTES <= max_frame_size {
                remaining
            } else {
                head.more = true;
                let overhead = transfer_frame_overhead(&head);
                max_frame_size.saturating_sub(overhead).max(1)
            };
            let n = room.min(remaining);
            head.more = n < remaining;
            let parts = transfer.take(n);
            out.transfer(self.channel, &head, &parts);
            self.remote_incoming_window -= 1;
            self.next_outgoing_id = self.next_outgoing_id.wrapping_add(1);
            if transfer.remaining() == 0 {
                self.pending.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_spans_both_parts() {
        let mut t = OutgoingTransfer {
            handle: 0,
            delivery_id: 0,
            delivery_tag: [0; 8],
            settled: false,
            parts: [Bytes::from_static(b"abc"), Bytes::from_static(b"defgh")],
            sent: 0,
        };
        let [a, b] = t.take(2);
        assert_eq!((&a[..], &b[..]), (&b"ab"[..], &b""[..]));
        let [a, b] = t.take(4);
        assert_eq!((&a[..], &b[..]), (&b"c"[..], &b"def"[..]));
        let [a, b] = t.take(2);
        assert_eq!((&a[..], &b[..]), (&b""[..], &b"gh"[..]));
        assert_eq!(t.remaining(), 0);
    }
}
