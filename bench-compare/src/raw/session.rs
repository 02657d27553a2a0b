//! The session: the dispatcher of incoming frames (attach, flow,
//! disposition, detach, end, close; transfers go to `receiver.rs`), link
//! attach and detach, and the frames we append (flows, ranged dispositions).

use anyhow::{bail, Result};
use broker::codec::frame;
use broker::codec::{
    Attach, Close, DeliveryState, Detach, Disposition, End, Flow, Frame, FrameBody, Performative,
    ReceiverSettleMode, Role, SenderSettleMode, Source, Target,
};
use tokio::time::Instant as Deadline;

use super::connection::{describe_error, Connection, Link, LinkKind};

impl Connection {
    pub(crate) fn on_frame(&mut self, frame: Frame) -> Result<()> {
        let (performative, payload) = match frame.body {
            FrameBody::Empty => return Ok(()),
            FrameBody::Sasl(_) => bail!("SASL frame after SASL"),
            FrameBody::Amqp {
                performative,
                payload,
            } => (performative, payload),
        };
        if frame.channel != self.remote_channel && !matches!(performative, Performative::Close(_)) {
            bail!("frame on channel {} that was never begun", frame.channel);
        }
        match performative {
            Performative::Transfer(transfer) => self.on_transfer(transfer, payload),
            Performative::Flow(flow) => self.on_flow(flow),
            Performative::Disposition(disposition) => {
                if disposition.role == Role::Receiver {
                    self.on_disposition(disposition);
                }
                Ok(())
            }
            Performative::Attach(attach) => self.on_attach(attach),
            Performative::Detach(detach) => self.on_detach(detach),
            Performative::End(end) => {
                self.end_received = true;
                if !self.closing {
                    self.put(&Performative::End(End::default()));
                    bail!(
                        "session ended by the peer: {}",
                        describe_error(end.error.as_ref())
                    );
                }
                Ok(())
            }
            Performative::Close(close) => {
                self.close_received = true;
                if !self.closing {
                    self.put_channel0(&Performative::Close(Close::default()));
                    bail!(
                        "connection closed by the peer: {}",
                        describe_error(close.error.as_ref())
                    );
                }
                Ok(())
            }
            other => bail!("unexpected {other:?}"),
        }
    }

    pub(crate) fn on_attach(&mut self, attach: Box<Attach>) -> Result<()> {
        let local = self.links.iter().position(|link| {
            link.as_ref()
                .is_some_and(|l| l.name == attach.name && l.remote_attach.is_none())
        });
        let Some(local) = local else {
            bail!("attach for unknown link {:?}", attach.name);
        };
        self.by_remote.insert(attach.handle, local as u32);
        let link = self.link_mut(local as u32)?;
        if let LinkKind::Receiver(receiver) = &mut link.kind {
            receiver.delivery_count = attach.initial_delivery_count.unwrap_or(0);
            receiver.issued_until = receiver.delivery_count;
        }
        link.remote_attach = Some(attach);
        Ok(())
    }

    fn on_detach(&mut self, detach: Detach) -> Result<()> {
        let Some(local) = self.by_remote.remove(&detach.handle) else {
            bail!("detach of unattached handle {}", detach.handle);
        };
        let closed = detach.closed;
        let link = self.link_mut(local)?;
        link.remote_detach = Some(detach);
        if !link.detach_sent {
            link.detach_sent = true;
            self.put_pending_dispositions();
            self.put(&Performative::Detach(Detach {
                handle: local,
                closed,
                error: None,
            }));
        }
        Ok(())
    }

    fn on_flow(&mut self, flow: Flow) -> Result<()> {
        let next_incoming = flow.next_incoming_id.unwrap_or(0);
        let in_flight = self.next_outgoing_id.wrapping_sub(next_incoming);
        self.remote_incoming_window = flow.incoming_window.saturating_sub(in_flight);
        let Some(remote) = flow.handle else {
            if flow.echo {
                self.put_flow(None);
            }
            return Ok(());
        };
        let Some(&local) = self.by_remote.get(&remote) else {
            bail!("flow for unattached handle {remote}");
        };
        let mut reply = flow.echo;
        match &mut self.link_mut(local)?.kind {
            LinkKind::Sender(sender) => reply |= sender.on_flow(&flow),
            LinkKind::Receiver(receiver) => {
                if let Some(count) = flow.delivery_count {
                    receiver.delivery_count = count;
                }
            }
        }
        if reply {
            self.put_flow(Some(local));
        }
        Ok(())
    }

    /// Attach a link and wait for the peer's attach; a refused link (the
    /// peer's terminus is null, or it detaches) is an error.
    pub(crate) async fn attach(&mut self, attach: Attach, kind: LinkKind) -> Result<u32> {
        let handle = self.links.len() as u32;
        if handle > self.handle_max {
            bail!("no link handle left (handle-max {})", self.handle_max);
        }
        let what = format!("attach {:?}", attach.name);
        self.links.push(Some(Link {
            name: attach.name.clone(),
            remote_attach: None,
            remote_detach: None,
            detach_sent: false,
            kind,
        }));
        let role = attach.role;
        self.put(&Performative::Attach(Box::new(Attach { handle, ..attach })));
        self.wait(&what, |c| {
            let link = c.link_mut(handle)?;
            Ok(link.remote_attach.is_some() || link.remote_detach.is_some())
        })
        .await?;
        let link = self.link_mut(handle)?;
        let refused = link.remote_attach.as_ref().is_none_or(|a| match role {
            Role::Sender => a.target.is_none(),
            Role::Receiver => a.source.is_none(),
        });
        if refused {
            // The detach with the reason follows a refusing attach.
            let _ = self
                .wait_until(Deadline::now() + self.timeout, &what, |c| {
                    Ok(c.link_mut(handle)?.remote_detach.is_some())
                })
                .await;
            let link = self.link_mut(handle)?;
            link.check()?;
            bail!("{what}: refused by the peer (null terminus)");
        }
        Ok(handle)
    }

    /// A new attach for `name` with the settle modes and termini given.
    pub(crate) fn new_attach(
        name: &str,
        role: Role,
        snd_settle_mode: SenderSettleMode,
        source: Option<String>,
        target: Option<String>,
    ) -> Attach {
        Attach {
            name: name.to_string(),
            handle: 0,
            role,
            snd_settle_mode,
            rcv_settle_mode: ReceiverSettleMode::First,
            source: Some(Source {
                address: source,
                ..Source::default()
            }),
            target: Some(Target {
                address: target,
                ..Target::default()
            }),
            unsettled: None,
            incomplete_unsettled: false,
            initial_delivery_count: (role == Role::Sender).then_some(0),
            max_message_size: None,
            offered_capabilities: Vec::new(),
            desired_capabilities: Vec::new(),
            properties: None,
        }
    }

    /// Detach (closing) our link `handle` and wait for the peer's detach.
    pub(crate) async fn detach(&mut self, handle: u32) -> Result<()> {
        let link = self.link_mut(handle)?;
        if !link.detach_sent {
            link.detach_sent = true;
            self.put_pending_dispositions();
            self.put(&Performative::Detach(Detach {
                handle,
                closed: true,
                error: None,
            }));
        }
        let what = format!("detach link {handle}");
        self.wait(&what, |c| Ok(c.link_mut(handle)?.remote_detach.is_some()))
            .await?;
        let error = self
            .link_mut(handle)?
            .remote_detach
            .as_ref()
            .and_then(|d| d.error.clone());
        if let Some(slot) = self.links.get_mut(handle as usize) {
            *slot = None;
        }
        match error {
            Some(e) => bail!(
                "{what}: the peer detached with {}",
                describe_error(Some(&e))
            ),
            None => Ok(()),
        }
    }

    /// Append a frame on our session's channel.
    pub(crate) fn put(&mut self, performative: &Performative) {
        frame::encode_amqp_frame(&mut self.wbuf, self.channel, performative, 0);
    }

    pub(crate) fn put_channel0(&mut self, performative: &Performative) {
        frame::encode_amqp_frame(&mut self.wbuf, 0, performative, 0);
    }

    /// Append a flow: session state, plus link `local`'s state if given.
    pub(crate) fn put_flow(&mut self, local: Option<u32>) {
        let mut flow = Flow {
            next_incoming_id: Some(self.next_incoming_id),
            incoming_window: self.incoming_window,
            next_outgoing_id: self.next_outgoing_id,
            outgoing_window: u32::MAX,
            ..Flow::default()
        };
        if let Some(link) = local.and_then(|h| self.links.get(h as usize)?.as_ref()) {
            flow.handle = local;
            match &link.kind {
                LinkKind::Sender(sender) => sender.fill_flow(&mut flow),
                LinkKind::Receiver(receiver) => receiver.fill_flow(&mut flow),
            }
        }
        self.put(&Performative::Flow(flow));
    }

    /// Turn pending accepts and settlements into ranged dispositions.
    pub(crate) fn put_pending_dispositions(&mut self) {
        for (role, ranges) in [
            (Role::Receiver, std::mem::take(&mut self.pending_accepts)),
            (Role::Sender, std::mem::take(&mut self.pending_settles)),
        ] {
            for (first, last) in ranges {
                let disposition = Disposition {
                    role,
                    first,
                    last: (last != first).then_some(last),
                    settled: true,
                    state: (role == Role::Receiver).then_some(DeliveryState::Accepted),
                    batchable: false,
                };
                self.put(&Performative::Disposition(disposition));
            }
        }
    }
}

/// Add `id` to a list of ranges, extending the last range when consecutive.
pub(crate) fn push_range(ranges: &mut Vec<(u32, u32)>, id: u32) {
    match ranges.last_mut() {
        Some((_, last)) if last.wrapping_add(1) == id => *last = id,
        _ => ranges.push((id, id)),
    }
}
