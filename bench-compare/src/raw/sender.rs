//! Sending links: credit and the peer's session window honoured (a send
//! waits for both), pre-settled or unsettled transfers with any number in
//! flight, outcomes taken from (ranged) dispositions, `drain` answered, and
//! messages larger than the peer's max-frame-size split into frames.

use anyhow::{bail, Result};
use broker::codec::frame::{self, FRAME_HEADER_BYTES};
use broker::codec::{
    DeliveryState, Disposition, Flow, Performative, Role, SenderSettleMode, Transfer,
};
use bytes::{Bytes, BytesMut};

use super::connection::{Connection, LinkKind, FLUSH_AT};
use super::session::push_range;
use super::{data_section_overhead, put_data_section};

/// Most bytes our transfer performative takes (it is ~30 B; a margin).
const TRANSFER_OVERHEAD_BOUND: usize = 96;

/// The state of one sending link.
pub(crate) struct SenderLink {
    presettled: bool,
    delivery_count: u32,
    credit: u32,
    next_tag: u64,
    unsettled: usize,
    accepted: u64,
    failed: Option<String>,
    drain: bool,
}

impl SenderLink {
    /// Apply the peer's flow; true if it asks for an answer (drain).
    pub(crate) fn on_flow(&mut self, flow: &Flow) -> bool {
        let Some(link_credit) = flow.link_credit else {
            return false;
        };
        // Credit counts from the receiver's view of the delivery-count.
        let their_count = flow.delivery_count.unwrap_or(0);
        let unseen = self.delivery_count.wrapping_sub(their_count);
        self.credit = link_credit.saturating_sub(unseen);
        self.drain = flow.drain;
        if flow.drain && self.credit > 0 {
            // Nothing is queued here: use the credit up and say so.
            self.delivery_count = self.delivery_count.wrapping_add(self.credit);
            self.credit = 0;
            return true;
        }
        false
    }

    /// Our link state for a flow frame.
    pub(crate) fn fill_flow(&self, flow: &mut Flow) {
        flow.delivery_count = Some(self.delivery_count);
        flow.link_credit = Some(self.credit);
        flow.drain = self.drain;
    }
}

/// A sending link: a handle into its [`Connection`].
#[derive(Debug)]
pub struct Sender {
    handle: u32,
    /// Encoded sections written before each message's `data` section
    /// (e.g. application-properties); empty by default.
    sections: Bytes,
}

impl Connection {
    /// Attach a sender to `address`: pre-settled (`presettled`, no
    /// dispositions) or unsettled (the peer's disposition gives the outcome).
    pub async fn attach_sender(
        &mut self,
        name: &str,
        address: &str,
        presettled: bool,
    ) -> Result<Sender> {
        let mode = if presettled {
            SenderSettleMode::Settled
        } else {
            SenderSettleMode::Unsettled
        };
        let attach =
            Connection::new_attach(name, Role::Sender, mode, None, Some(address.to_string()));
        let link = SenderLink {
            presettled,
            delivery_count: 0,
            credit: 0,
            next_tag: 0,
            unsettled: 0,
            accepted: 0,
            failed: None,
            drain: false,
        };
        let handle = self.attach(attach, LinkKind::Sender(link)).await?;
        Ok(Sender {
            handle,
            sections: Bytes::new(),
        })
    }

    fn sender_link(&mut self, handle: u32) -> Result<&mut SenderLink> {
        let link = self.link_mut(handle)?;
        link.check()?;
        match &mut link.kind {
            LinkKind::Sender(sender) => {
                if let Some(failed) = &sender.failed {
                    bail!("{failed}");
                }
                Ok(sender)
            }
            LinkKind::Receiver(_) => bail!("link {handle} is not a sender"),
        }
    }

    /// The peer's disposition of our deliveries `first..=last`.
    pub(crate) fn on_disposition(&mut self, d: Disposition) {
        let terminal = matches!(
            d.state,
            Some(
                DeliveryState::Accepted
                    | DeliveryState::Rejected { .. }
                    | DeliveryState::Released
                    | DeliveryState::Modified { .. }
            )
        );
        if !d.settled && !terminal {
            return; // e.g. `received`: progress, not an outcome
        }
        let first = d.first;
        let span = d.last.unwrap_or(first).wrapping_sub(first);
        let ids: Vec<u32> = if (span as usize) < self.unsettled.len().saturating_mul(2) + 16 {
            (0..=span).map(|k| first.wrapping_add(k)).collect()
        } else {
            self.unsettled
                .keys()
                .copied()
                .filter(|id| id.wrapping_sub(first) <= span)
                .collect()
        };
        for id in ids {
            let Some(handle) = self.unsettled.remove(&id) else {
                continue;
            };
            if !d.settled {
                push_range(&mut self.pending_settles, id);
            }
            let Ok(link) = self.link_mut(handle) else {
                continue;
            };
            let LinkKind::Sender(sender) = &mut link.kind else {
                continue;
            };
            sender.unsettled = sender.unsettled.saturating_sub(1);
            match &d.state {
                Some(DeliveryState::Accepted) => sender.accepted += 1,
                other => {
                    if sender.failed.is_none() {
                        sender.failed = Some(format!(
                            "delivery {id} on link {:?} was not accepted: {other:?}",
                            link.name
                        ));
                    }
                }
            }
        }
    }
}

impl Sender {
    /// Put these encoded sections (e.g. an application-properties section)
    /// in front of every message's `data` section.
    pub fn with_sections(self, sections: Bytes) -> Sender {
        Sender { sections, ..self }
    }

    /// Queue one message whose body is one `data` section holding `body`;
    /// returns its delivery-id. Waits (bounded) for link credit and for room
    /// in the peer's session window. The frames are buffered: they are
    /// written when the buffer passes 64 KiB, on [`Connection::flush`], or
    /// before any wait.
    pub async fn send(&self, conn: &mut Connection, body: &[u8]) -> Result<u32> {
        let handle = self.handle;
        if conn.sender_link(handle)?.credit == 0 || conn.remote_incoming_window == 0 {
            conn.flush().await?;
            conn.poll()?;
            conn.wait("send: waiting for link credit and session window", |c| {
                Ok(c.sender_link(handle)?.credit > 0 && c.remote_incoming_window > 0)
            })
            .await?;
        }
        let channel = conn.channel;
        let delivery_id = conn.next_delivery_id;
        let link = conn.sender_link(handle)?;
        let settled = link.presettled;
        let tag = Bytes::copy_from_slice(&link.next_tag.to_be_bytes());
        link.next_tag += 1;
        link.delivery_count = link.delivery_count.wrapping_add(1);
        link.credit -= 1;
        if !settled {
            link.unsettled += 1;
        }
        let mut transfer = Transfer {
            handle,
            delivery_id: Some(delivery_id),
            delivery_tag: Some(tag),
            message_format: Some(0),
            settled: Some(settled),
            ..Transfer::default()
        };
        conn.next_delivery_id = delivery_id.wrapping_add(1);
        if !settled {
            conn.unsettled.insert(delivery_id, handle);
        }
        let payload_len = self.sections.len() + data_section_overhead(body.len()) + body.len();
        if FRAME_HEADER_BYTES + TRANSFER_OVERHEAD_BOUND + payload_len <= conn.max_frame_out as usize
        {
            frame::encode_amqp_frame(
                &mut conn.wbuf,
                channel,
                &Performative::Transfer(transfer),
                payload_len,
            );
            conn.wbuf.extend_from_slice(&self.sections);
            put_data_section(&mut conn.wbuf, body);
            conn.next_outgoing_id = conn.next_outgoing_id.wrapping_add(1);
            conn.remote_incoming_window -= 1;
        } else {
            let mut payload = BytesMut::with_capacity(payload_len);
            payload.extend_from_slice(&self.sections);
            put_data_section(&mut payload, body);
            let mut rest = payload.freeze();
            while !rest.is_empty() {
                if conn.remote_incoming_window == 0 {
                    conn.wait("send: waiting for session window (multi-frame)", |c| {
                        Ok(c.remote_incoming_window > 0)
                    })
                    .await?;
                }
                transfer.more = true;
                let performative = Performative::Transfer(transfer);
                let room = (conn.max_frame_out as usize)
                    .saturating_sub(frame::amqp_frame_overhead(&performative));
                if room == 0 {
                    bail!(
                        "peer's max-frame-size {} leaves no room for a payload",
                        conn.max_frame_out
                    );
                }
                let chunk = rest.split_to(room.min(rest.len()));
                let Performative::Transfer(mut t) = performative else {
                    unreachable!("built as a transfer above")
                };
                t.more = !rest.is_empty();
                frame::encode_amqp_frame(
                    &mut conn.wbuf,
                    channel,
                    &Performative::Transfer(t),
                    chunk.len(),
                );
                conn.wbuf.extend_from_slice(&chunk);
                conn.next_outgoing_id = conn.next_outgoing_id.wrapping_add(1);
                conn.remote_incoming_window -= 1;
                transfer = Transfer {
                    handle,
                    ..Transfer::default()
                };
                if conn.wbuf.len() >= FLUSH_AT {
                    conn.flush().await?;
                }
            }
        }
        if conn.wbuf.len() >= FLUSH_AT {
            conn.flush().await?;
            conn.poll()?;
        }
        Ok(delivery_id)
    }

    /// Unsettled deliveries of this link (sent, outcome not yet known).
    pub fn unsettled(&self, conn: &mut Connection) -> Result<usize> {
        Ok(conn.sender_link(self.handle)?.unsettled)
    }

    /// Deliveries of this link the peer accepted so far.
    pub fn accepted(&self, conn: &mut Connection) -> Result<u64> {
        Ok(conn.sender_link(self.handle)?.accepted)
    }

    /// Flush, then wait (bounded) until at most `max_unsettled` deliveries
    /// are unsettled. Any outcome other than `accepted` is an error.
    pub async fn wait_settled(&self, conn: &mut Connection, max_unsettled: usize) -> Result<()> {
        let handle = self.handle;
        if conn.sender_link(handle)?.unsettled <= max_unsettled {
            return Ok(());
        }
        conn.wait("waiting for the peer's dispositions", |c| {
            Ok(c.sender_link(handle)?.unsettled <= max_unsettled)
        })
        .await
    }

    /// Detach (closing) and wait for the peer's detach.
    pub async fn detach(self, conn: &mut Connection) -> Result<()> {
        conn.detach(self.handle).await
    }
}
