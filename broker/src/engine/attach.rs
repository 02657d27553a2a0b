//! Attaching and detaching links: resolving the address to a queue,
//! refusing cleanly (attach with a null terminus, then a detach with the
//! error) when it cannot be served, and releasing what a link held.

use std::collections::VecDeque;
use std::sync::Arc;

use super::consumer_priority::consumer_priority;
use super::error::ConnectionError;
use super::link::{ConsumerLink, Destination, Link, PublisherLink};
use super::outbox::Outbox;
use super::relay::Relay;
use super::state::State;
use super::transaction::LOCAL_TRANSACTIONS;
use crate::codec::definitions::condition;
use crate::codec::{
    Attach, Detach, Error, Flow, Performative, Role, Source, Symbol, Target, TargetKind,
};
use crate::queue::filter::MessageFilter;
use crate::queue::{ConsumerOptions, LookupError, QueueAddress, QueueError};

/// The AMQP error for a queue's refusal.
pub(crate) fn queue_error(error: &QueueError) -> Error {
    let condition = match error {
        QueueError::Gone(_) => condition::RESOURCE_DELETED,
        QueueError::Refused(_) => condition::RESOURCE_LIMIT_EXCEEDED,
        // Not a redirect (no address to give yet): the client should
        // attach again at the leader's node.
        QueueError::NotLeader { .. } => condition::NOT_ALLOWED,
    };
    Error::new(condition, error.to_string())
}

/// The source we answer a consumer's attach with: what the peer asked for,
/// minus what we would only pretend to do. The sender's reply states the
/// terminus actually in place (AMQP 1.0 section 3.5.3): a filter echoed but
/// not applied makes a client with a selector believe it is active while
/// it receives every message, and an echoed `copy` makes a browser believe
/// it does not consume. So the filter set is exactly the entries the
/// consumer's `MessageFilter` applies (none if it has none), and since a
/// queue's consumers always take messages (`move`), `copy` is left out; a
/// client that requires what is missing can then detach.
fn source_in_place(requested: Source, address: String, filter: Option<&MessageFilter>) -> Source {
    let distribution_mode = requested
        .distribution_mode
        .filter(|mode| mode.0 == DISTRIBUTION_MODE_MOVE);
    Source {
        address: Some(address),
        filter: filter.map(|f| f.applied().clone()),
        distribution_mode,
        ..requested
    }
}

/// The spec's distribution mode in which a delivered message leaves the
/// node (section 3.5.7), the only one a queue's consumers get.
const DISTRIBUTION_MODE_MOVE: &str = "move";

impl State {
    pub(crate) fn on_attach(
        &mut self,
        channel: u16,
        attach: Attach,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        let Some(session) = self.sessions.get_mut(&channel) else {
            return Ok(());
        };
        if attach.handle > session.handle_max {
            return Err(ConnectionError::protocol(
                condition::RESOURCE_LIMIT_EXCEEDED,
                format!(
                    "handle {} exceeds handle-max {}",
                    attach.handle, session.handle_max
                ),
            ));
        }
        if session.links.contains_key(&attach.handle) || session.detaching.contains(&attach.handle)
        {
            return Err(ConnectionError::protocol(
                condition::HANDLE_IN_USE,
                format!("handle {} is already attached", attach.handle),
            ));
        }
        session.answered.remove(&attach.handle);
        if let Err(error) = self.authorize_attach(&attach) {
            let ours = match attach.role {
                Role::Sender => Role::Receiver,
                Role::Receiver => Role::Sender,
            };
            self.refuse(channel, attach, ours, error, out);
            return Ok(());
        }
        match attach.role {
            // The peer sends: we are the receiver, the target names the queue.
            Role::Sender => self.attach_publisher(channel, attach, out),
            Role::Receiver => self.attach_consumer(channel, attach, out),
        }
        Ok(())
    }

    fn resolve(
        &self,
        address: Option<&str>,
        dynamic: bool,
    ) -> Result<std::sync::Arc<dyn crate::queue::Queue>, Error> {
        if dynamic {
            // Only a receiver's source can be dynamic here.
            return Err(Error::new(
                condition::NOT_IMPLEMENTED,
                "dynamic targets are not supported; use a dynamic source or anonymous relay",
            ));
        }
        let Some(address) = address else {
            return Err(Error::new(
                condition::INVALID_FIELD,
                "the link has no address",
            ));
        };
        self.queue_for(address)
    }

    /// The queue an address names, as a link uses it: the one resolution
    /// that attaches and relayed messages (`relay.rs`) share, so both get
    /// the same rules. The queue was prepared by the connection task
    /// (auto-create, leader found) before this is called.
    pub(crate) fn queue_for(
        &self,
        address: &str,
    ) -> Result<std::sync::Arc<dyn crate::queue::Queue>, Error> {
        let address = QueueAddress::parse(address)
            .map_err(|e| Error::new(condition::NOT_FOUND, e.to_string()))?;
        let queue = self.context.queues.lookup(&address).map_err(|e| match e {
            LookupError::NotFound(_) => Error::new(condition::NOT_FOUND, e.to_string()),
            LookupError::QuorumUnavailable(..) => {
                Error::new(condition::RESOURCE_LIMIT_EXCEEDED, e.to_string())
            }
        })?;
        queue.serves_here().map_err(|e| queue_error(&e))?;
        Ok(queue)
    }

    /// Refuse a link: attach back with a null terminus on our side, then
    /// detach it closed with the error (transport 2.6.3).
    fn refuse(&mut self, channel: u16, attach: Attach, role: Role, error: Error, out: &mut Outbox) {
        let handle = attach.handle;
        let reply = Attach {
            role,
            source: if role == Role::Sender {
                None
            } else {
                attach.source
            },
            target: if role == Role::Receiver {
                None
            } else {
                attach.target
            },
            initial_delivery_count: (role == Role::Sender).then_some(0),
            unsettled: None,
            incomplete_unsettled: false,
            max_message_size: None,
            offered_capabilities: Vec::new(),
            desired_capabilities: Vec::new(),
            properties: None,
            ..attach
        };
        out.frame(channel, &Performative::Attach(Box::new(reply)));
        self.detach_link(channel, handle, error, out);
    }

    /// Detach a link from our side, closing it with `error`: release what
    /// it held and ignore the peer's frames on it until it answers.
    pub(crate) fn detach_link(
        &mut self,
        channel: u16,
        handle: u32,
        error: Error,
        out: &mut Outbox,
    ) {
        let Some(session) = self.sessions.get_mut(&channel) else {
            return;
        };
        let link = session.links.remove(&handle);
        session.unsettled.retain(|u| u.handle != handle);
        session.pending.retain(|t| t.handle != handle);
        session.detaching.insert(handle);
        if let Some(link) = link {
            self.release_link(link);
        }
        out.frame(
            channel,
            &Performative::Detach(Detach {
                handle,
                closed: true,
                error: Some(error),
            }),
        );
    }

    fn attach_publisher(&mut self, channel: u16, attach: Attach, out: &mut Outbox) {
        let target = attach.target.as_ref();
        let coordinator = target.is_some_and(|t| t.kind == TargetKind::Coordinator);
        let anonymous = !target.is_some_and(|t| t.dynamic || t.address.is_some());
        let destination = if coordinator {
            // A transaction controller (transactions 4.2).
            Destination::Coordinator
        } else if anonymous {
            // Anonymous relay: each message names its queue in `to`.
            Destination::Relay(Relay::default())
        } else {
            match self.resolve(
                target.and_then(|t| t.address.as_deref()),
                target.is_some_and(|t| t.dynamic),
            ) {
                Ok(queue) => Destination::Queue(queue),
                Err(error) => {
                    tracing::debug!(link = %attach.name, error = ?error.description, "publisher link refused");
                    return self.refuse(channel, attach, Role::Receiver, error, out);
                }
            }
        };
        let context = self.context.clone();
        let limits = &context.limits;
        let max_message_size = match attach.max_message_size {
            Some(size) if size > 0 => size.min(limits.max_message_size_bytes),
            _ => limits.max_message_size_bytes,
        };
        let tag = self.allocate_tag(channel, attach.handle);
        let delivery_count = attach.initial_delivery_count.unwrap_or(0);
        let reply = Attach {
            name: attach.name.clone(),
            handle: attach.handle,
            role: Role::Receiver,
            snd_settle_mode: attach.snd_settle_mode,
            rcv_settle_mode: attach.rcv_settle_mode,
            source: attach.source.clone(),
            target: Some(match &destination {
                Destination::Coordinator => Target {
                    kind: TargetKind::Coordinator,
                    capabilities: vec![Symbol::from(LOCAL_TRANSACTIONS)],
                    ..Target::default()
                },
                Destination::Queue(queue) => Target {
                    address: Some(queue.address().to_string()),
                    ..attach.target.clone().unwrap_or_default()
                },
                Destination::Relay(_) => Target {
                    address: None,
                    ..attach.target.clone().unwrap_or_default()
                },
            }),
            unsettled: None,
            incomplete_unsettled: false,
            initial_delivery_count: None,
            max_message_size: Some(limits.max_message_size_bytes),
            offered_capabilities: Vec::new(),
            desired_capabilities: Vec::new(),
            properties: None,
        };
        out.frame(channel, &Performative::Attach(Box::new(reply)));
        let mut link = PublisherLink {
            destination,
            tag,
            rcv_settle_mode: attach.rcv_settle_mode,
            delivery_count,
            credit: 0,
            credit_window: limits.link_credit,
            waiting_capacity: false,
            max_message_size,
            partial: None,
        };
        let Some(session) = self.sessions.get_mut(&channel) else {
            return;
        };
        if link.has_capacity(&self.sink) {
            link.credit = link.credit_window;
            let flow = Flow {
                handle: Some(attach.handle),
                delivery_count: Some(link.delivery_count),
                link_credit: Some(link.credit),
                ..session.flow()
            };
            out.frame(channel, &Performative::Flow(flow));
        } else {
            link.waiting_capacity = true;
        }
        session.links.insert(attach.handle, Link::Publisher(link));
    }

    fn attach_consumer(&mut self, channel: u16, attach: Attach, out: &mut Outbox) {
        let priority = match consumer_priority(attach.properties.as_ref()) {
            Ok(priority) => priority,
            Err(error) => return self.refuse(channel, attach, Role::Sender, error, out),
        };
        let source = attach.source.as_ref();
        // A filter of a known type that is bad (a selector that does not
        // parse) refuses the link; unknown types are ignored (and not
        // echoed).
        let filter = match source
            .and_then(|s| s.filter.as_ref())
            .map(MessageFilter::from_filter_set)
            .transpose()
        {
            Ok(filter) => filter.flatten().map(Arc::new),
            Err(e) => {
                let error = Error::new(condition::INVALID_FIELD, e.to_string());
                tracing::debug!(link = %attach.name, error = %e, "consumer link refused");
                return self.refuse(channel, attach, Role::Sender, error, out);
            }
        };
        let dynamic = source.is_some_and(|s| s.dynamic);
        let resolved = if dynamic {
            // A temporary queue of its own, deleted when the link goes.
            self.context
                .queues
                .create_dynamic()
                .map_err(|e| Error::new(condition::RESOURCE_LIMIT_EXCEEDED, e.to_string()))
        } else {
            self.resolve(source.and_then(|s| s.address.as_deref()), false)
        };
        let queue = match resolved {
            Ok(queue) => queue,
            Err(error) => {
                tracing::debug!(link = %attach.name, error = ?error.description, "consumer link refused");
                return self.refuse(channel, attach, Role::Sender, error, out);
            }
        };
        let tag = self.allocate_tag(channel, attach.handle);
        let options = ConsumerOptions {
            filter: filter.clone(),
            priority,
            ..ConsumerOptions::default()
        };
        let consumer = match queue.subscribe(self.sink.clone(), tag, options) {
            Ok(consumer) => consumer,
            Err(e) => {
                self.tags.remove(&tag);
                if dynamic {
                    self.context.queues.delete_dynamic(queue.address());
                }
                return self.refuse(channel, attach, Role::Sender, queue_error(&e), out);
            }
        };
        let reply = Attach {
            name: attach.name.clone(),
            handle: attach.handle,
            role: Role::Sender,
            snd_settle_mode: attach.snd_settle_mode,
            rcv_settle_mode: attach.rcv_settle_mode,
            source: Some(source_in_place(
                attach.source.clone().unwrap_or_default(),
                queue.address().to_string(),
                filter.as_deref(),
            )),
            target: attach.target.clone(),
            unsettled: None,
            incomplete_unsettled: false,
            initial_delivery_count: Some(0),
            max_message_size: None,
            offered_capabilities: Vec::new(),
            desired_capabilities: Vec::new(),
            properties: None,
        };
        out.frame(channel, &Performative::Attach(Box::new(reply)));
        let link = ConsumerLink {
            queue,
            consumer,
            tag,
            snd_settle_mode: attach.snd_settle_mode,
            delivery_count: 0,
            credit_limit: 0,
            drain: false,
            held: VecDeque::new(),
            dynamic,
        };
        if let Some(session) = self.sessions.get_mut(&channel) {
            session.links.insert(attach.handle, Link::Consumer(link));
        }
    }

    pub(crate) fn on_detach(
        &mut self,
        channel: u16,
        detach: Detach,
        out: &mut Outbox,
    ) -> Result<(), ConnectionError> {
        let Some(session) = self.sessions.get_mut(&channel) else {
            return Ok(());
        };
        if session.detaching.remove(&detach.handle) {
            // The answer to our own detach.
            session.answered.insert(detach.handle);
            return Ok(());
        }
        let Some(link) = session.links.remove(&detach.handle) else {
            if session.answered.remove(&detach.handle) {
                // A second answer to our detach (fe2o3-amqp after a
                // refused attach): nothing is attached there to end.
                return Ok(());
            }
            return Err(ConnectionError::protocol(
                condition::UNATTACHED_HANDLE,
                format!("detach of handle {}, which is not attached", detach.handle),
            ));
        };
        let handle = detach.handle;
        session.unsettled.retain(|u| u.handle != handle);
        session.pending.retain(|t| t.handle != handle);
        self.release_link(link);
        out.frame(
            channel,
            &Performative::Detach(Detach {
                handle,
                closed: detach.closed,
                error: None,
            }),
        );
        Ok(())
    }

    /// Forget a link; a consumer leaves its queue, which returns its
    /// unsettled messages in order.
    pub(crate) fn release_link(&mut self, link: Link) {
        self.tags.remove(&link.tag());
        if let Link::Publisher(publisher) = &link {
            if matches!(publisher.destination, Destination::Coordinator) {
                // Transactions die with the link that declared them.
                self.transactions.roll_back_all(Some(publisher.tag));
            }
        }
        if let Link::Consumer(consumer) = link {
            consumer.queue.unsubscribe(consumer.consumer);
            if consumer.dynamic {
                // Its node lives as long as the link (delete-on-close).
                self.context.queues.delete_dynamic(consumer.queue.address());
            }
        }
    }
}
