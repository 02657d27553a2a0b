//! Receiving links: a credit window topped up as deliveries are taken,
//! multi-frame (`more`) and aborted transfers, the session's incoming window
//! re-opened at half, and accepts batched into ranged dispositions.

use std::collections::VecDeque;

use anyhow::{bail, Result};
use broker::codec::{Fields, Flow, Role, SenderSettleMode, Transfer};
use bytes::{Bytes, BytesMut};
use tokio::time::Instant as Deadline;

use super::connection::{Connection, LinkKind, INCOMING_WINDOW};
use super::data_body;
use super::session::push_range;

/// One received message.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The delivery-id (session scoped), used to settle it.
    pub delivery_id: u32,
    /// The delivery-tag.
    pub tag: Bytes,
    /// Settled by the sender already (nothing to accept).
    pub settled: bool,
    /// The whole encoded message (all transfer payloads joined).
    pub message: Bytes,
}

impl Delivery {
    /// The message's `data` body (see [`data_body`]).
    pub fn body(&self) -> Result<Bytes> {
        data_body(&self.message)
    }
}

/// A delivery whose transfers are still arriving (`more = true`).
struct Partial {
    delivery_id: u32,
    tag: Bytes,
    settled: bool,
    buf: BytesMut,
}

/// The state of one receiving link.
pub(crate) struct ReceiverLink {
    pub(crate) delivery_count: u32,
    /// delivery-count + link-credit as last granted.
    pub(crate) issued_until: u32,
    /// The credit kept topped up (0: none granted).
    window: u32,
    ready: VecDeque<Delivery>,
    partial: Option<Partial>,
}

impl ReceiverLink {
    fn credit(&self) -> u32 {
        let left = self.issued_until.wrapping_sub(self.delivery_count);
        if left > u32::MAX / 2 {
            0
        } else {
            left
        }
    }

    /// Our link state for a flow frame.
    pub(crate) fn fill_flow(&self, flow: &mut Flow) {
        flow.delivery_count = Some(self.delivery_count);
        flow.link_credit = Some(self.credit());
    }
}

/// A receiving link: a handle into its [`Connection`].
#[derive(Debug)]
pub struct Receiver {
    handle: u32,
}

impl Connection {
    /// Attach a receiver on `address` (settle mode first: one settled
    /// disposition per accept range) and grant it `credit`, kept topped up.
    pub async fn attach_receiver(
        &mut self,
        name: &str,
        address: &str,
        credit: u32,
    ) -> Result<Receiver> {
        self.attach_filtered_receiver(name, address, credit, None)
            .await
    }

    /// [`Connection::attach_receiver`] with a source filter set.
    pub async fn attach_filtered_receiver(
        &mut self,
        name: &str,
        address: &str,
        credit: u32,
        filter: Option<Fields>,
    ) -> Result<Receiver> {
        let mut attach = Connection::new_attach(
            name,
            Role::Receiver,
            SenderSettleMode::Mixed,
            Some(address.to_string()),
            None,
        );
        if let Some(source) = attach.source.as_mut() {
            source.filter = filter;
        }
        let link = ReceiverLink {
            delivery_count: 0,
            issued_until: 0,
            window: 0,
            ready: VecDeque::new(),
            partial: None,
        };
        let handle = self.attach(attach, LinkKind::Receiver(link)).await?;
        let receiver = Receiver { handle };
        receiver.set_credit(self, credit).await?;
        Ok(receiver)
    }

    fn receiver_link(&mut self, handle: u32) -> Result<&mut ReceiverLink> {
        let link = self.link_mut(handle)?;
        if matches!(&link.kind, LinkKind::Receiver(r) if r.ready.is_empty()) {
            link.check()?;
        }
        match &mut link.kind {
            LinkKind::Receiver(receiver) => Ok(receiver),
            LinkKind::Sender(_) => bail!("link {handle} is not a receiver"),
        }
    }

    /// One transfer frame from the peer.
    pub(crate) fn on_transfer(&mut self, t: Transfer, payload: Bytes) -> Result<()> {
        if self.incoming_window == 0 {
            bail!("amqp:session:window-violation: transfer beyond our incoming window");
        }
        self.next_incoming_id = self.next_incoming_id.wrapping_add(1);
        self.incoming_window -= 1;
        if self.incoming_window < INCOMING_WINDOW / 2 {
            self.incoming_window = INCOMING_WINDOW;
            self.put_flow(None);
        }
        let Some(&local) = self.by_remote.get(&t.handle) else {
            bail!("transfer on unattached handle {}", t.handle);
        };
        let link = self.link_mut(local)?;
        if link.detach_sent {
            return Ok(()); // in flight when we detached: released by the peer
        }
        let LinkKind::Receiver(receiver) = &mut link.kind else {
            bail!("transfer on our sending link {local}");
        };
        let settled = t.settled.unwrap_or(false);
        if let Some(partial) = receiver.partial.as_mut() {
            if t.delivery_id.is_some_and(|id| id != partial.delivery_id) {
                bail!(
                    "transfer for a new delivery before delivery {} was complete",
                    partial.delivery_id
                );
            }
            partial.settled |= settled;
            partial.buf.extend_from_slice(&payload);
        } else if !t.aborted {
            let Some(delivery_id) = t.delivery_id else {
                bail!("first transfer of a delivery without a delivery-id");
            };
            let tag = t.delivery_tag.clone().unwrap_or_default();
            if !t.more {
                receiver.delivery_count = receiver.delivery_count.wrapping_add(1);
                receiver.ready.push_back(Delivery {
                    delivery_id,
                    tag,
                    settled,
                    message: payload,
                });
                return Ok(());
            }
            receiver.partial = Some(Partial {
                delivery_id,
                tag,
                settled,
                buf: BytesMut::from(&payload[..]),
            });
        }
        if t.aborted {
            if receiver.partial.take().is_some() || t.delivery_id.is_some() {
                receiver.delivery_count = receiver.delivery_count.wrapping_add(1);
            }
        } else if !t.more {
            if let Some(partial) = receiver.partial.take() {
                receiver.delivery_count = receiver.delivery_count.wrapping_add(1);
                receiver.ready.push_back(Delivery {
                    delivery_id: partial.delivery_id,
                    tag: partial.tag,
                    settled: partial.settled,
                    message: partial.buf.freeze(),
                });
            }
        }
        Ok(())
    }
}

impl Receiver {
    /// The next delivery, waiting up to the connection's timeout.
    pub async fn recv(&self, conn: &mut Connection) -> Result<Delivery> {
        let timeout = conn.timeout;
        match self.recv_within(conn, timeout).await? {
            Some(delivery) => Ok(delivery),
            None => bail!("receive: no delivery within {timeout:?}"),
        }
    }

    /// The next delivery, or `None` if none came within `wait`.
    pub async fn recv_within(
        &self,
        conn: &mut Connection,
        wait: std::time::Duration,
    ) -> Result<Option<Delivery>> {
        let handle = self.handle;
        let ready = conn.receiver_link(handle)?.ready.is_empty();
        if ready
            && !conn
                .wait_until(Deadline::now() + wait, "receive", |c| {
                    Ok(!c.receiver_link(handle)?.ready.is_empty())
                })
                .await?
        {
            return Ok(None);
        }
        let link = conn.receiver_link(handle)?;
        let Some(delivery) = link.ready.pop_front() else {
            return Ok(None);
        };
        // Top the credit up once half of the window is used.
        let credit = link.credit();
        if link.window > 0 && credit.saturating_mul(2) <= link.window {
            let grant = link.window.saturating_sub(link.ready.len() as u32);
            if grant > credit {
                link.issued_until = link.delivery_count.wrapping_add(grant);
                conn.put_flow(Some(handle));
            }
        }
        Ok(Some(delivery))
    }

    /// Accept `delivery` (settled, mode first). Buffered: consecutive
    /// accepts become one ranged disposition, written with the next flush.
    pub fn accept(&self, conn: &mut Connection, delivery: &Delivery) {
        if !delivery.settled {
            push_range(&mut conn.pending_accepts, delivery.delivery_id);
        }
    }

    /// Take and accept whatever the queue holds until nothing came for
    /// `idle` (messages left by an earlier run on an external broker);
    /// returns how many.
    pub async fn purge(&self, conn: &mut Connection, idle: std::time::Duration) -> Result<u64> {
        let mut purged = 0u64;
        while let Some(delivery) = self.recv_within(conn, idle).await? {
            self.accept(conn, &delivery);
            purged += 1;
        }
        conn.flush().await?;
        Ok(purged)
    }

    /// Keep `credit` granted from now on (0 withdraws it); sent at once.
    pub async fn set_credit(&self, conn: &mut Connection, credit: u32) -> Result<()> {
        let link = conn.receiver_link(self.handle)?;
        link.window = credit;
        let grant = credit.saturating_sub(link.ready.len() as u32);
        link.issued_until = link.delivery_count.wrapping_add(grant);
        conn.put_flow(Some(self.handle));
        conn.flush().await
    }

    /// Detach (closing) and wait for the peer's detach; deliveries not
    /// accepted are released by the peer.
    pub async fn detach(self, conn: &mut Connection) -> Result<()> {
        conn.detach(self.handle).await
    }
}
