//! The serving side of forwarding: links opened by other nodes (origins)
//! run against this node's own queue (the local quorum queue while this
//! node leads it, or a transient queue it owns). Never forwarded again:
//! a node that does not serve the queue answers `Closed`, and the origin
//! looks for the leader.
//!
//! Every event for an origin goes through one [`Sink`] per origin, drained
//! by one pump task that ships them with ordered `send`s; so a queue never
//! calls the transport itself and `message` never blocks. The pump also
//! audits the origin's links (closes those the origin no longer has).
//! Events are bounded by the links' credit and the origins' publish
//! windows.
//!
//! A pump numbers its shipments: one stream per (incarnation of this
//! server, origin, generation), see [`StreamId`]. An origin that cannot be
//! reached is retried for a while (a node that just started has no fabric
//! link to it for up to ~1 s); when that runs out, or the audit fails for
//! several seconds, the stream ends and ALL the origin's links are dropped
//! (their unsettled messages return to the queue). The origin finds out:
//! its probes list those links as unknown, show a new stream, or show
//! shipments it never got; and the next stream's first shipment is a new
//! stream too. It then re-opens its links (`follow.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;

use super::protocol::{self, Reply, Request, Shipment, StreamId, ToOrigin, ToServer};
use super::Forwarder;
use crate::codec::MessageView;
use crate::net::{kind, NodeId, NodeTransport, TransportError};
use crate::queue::{
    ConsumerId, ConsumerOptions, Message, Outcome, PublishConfirm, PublishStatus, Queue,
    QueueAddress, QueueError, QueueEvent, QueueEventKind, Sink,
};

/// How often an origin's links are audited.
const AUDIT_INTERVAL: Duration = Duration::from_secs(1);
/// Failed audits in a row after which an origin's links are dropped (the
/// fabric link to it may take a second or two after a start).
const AUDIT_FAILURES_MAX: u32 = 5;
/// How long one shipment may retry through backpressure or an unreachable
/// origin before the origin's links are dropped.
const SHIP_RETRY: Duration = Duration::from_secs(5);
/// Pause between attempts to reach an unreachable origin.
const UNREACHABLE_PAUSE: Duration = Duration::from_millis(50);

/// One forwarded link.
struct ServerLink {
    queue: Arc<dyn Queue>,
    consumer: Option<ConsumerId>,
}

/// This node's stream of shipments to one origin.
struct Origin {
    /// The pump's sink; `None` between streams.
    sink: Option<Sink>,
    /// Of the current stream, or of the next one.
    generation: u64,
    /// The last sequence number the pump handed to the transport.
    shipped: Arc<AtomicU64>,
}

/// The forwarded links of this node.
pub(super) struct Server {
    node_id: NodeId,
    /// Tells this run of the node from earlier ones (see [`StreamId`]).
    incarnation: u64,
    transport: Arc<dyn NodeTransport>,
    fwd: Weak<Forwarder>,
    links: Mutex<HashMap<(NodeId, u64), ServerLink>>,
    /// One per node that ever opened a link here: bounded by the cluster.
    origins: Mutex<HashMap<NodeId, Origin>>,
    weak: Weak<Server>,
}

impl Server {
    pub(super) fn new(
        node_id: NodeId,
        transport: Arc<dyn NodeTransport>,
        fwd: Weak<Forwarder>,
    ) -> Arc<Server> {
        let incarnation = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Arc::new_cyclic(|weak| Server {
            node_id,
            incarnation,
            transport,
            fwd,
            links: Mutex::new(HashMap::new()),
            origins: Mutex::new(HashMap::new()),
            weak: weak.clone(),
        })
    }

    /// The sink whose events go to `origin`, with its pump started (a new
    /// stream if there is none).
    fn sink_for(&self, origin: NodeId) -> Sink {
        let mut origins = self.origins.lock().unwrap_or_else(|p| p.into_inner());
        let entry = origins.entry(origin).or_insert_with(|| Origin {
            sink: None,
            generation: 0,
            shipped: Arc::default(),
        });
        if let Some(sink) = &entry.sink {
            if !sink.is_closed() {
                return sink.clone();
            }
            // Its pump ended without ending the stream (cannot happen
            // while the server lives); never reuse a stream.
            entry.generation += 1;
            entry.shipped = Arc::default();
        }
        let (sink, events) = Sink::channel();
        entry.sink = Some(sink.clone());
        let stream = StreamId {
            incarnation: self.incarnation,
            generation: entry.generation,
        };
        let shipped = entry.shipped.clone();
        tokio::spawn(pump(self.weak.clone(), origin, stream, shipped, events));
        sink
    }

    /// `origin`'s stream cannot go on: the next one gets a new generation,
    /// and every link of the origin is dropped (it finds out, see the
    /// module documentation).
    fn end_stream(&self, origin: NodeId, stream: StreamId, why: &str) {
        {
            let mut origins = self.origins.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(entry) = origins.get_mut(&origin) {
                if entry.generation == stream.generation {
                    entry.sink = None;
                    entry.generation += 1;
                    entry.shipped = Arc::default();
                }
            }
        }
        self.drop_origin(origin, why);
    }

    /// This node's stream to `origin` now (or the next one) and the last
    /// sequence number shipped on it.
    fn stream_to(&self, origin: NodeId) -> (StreamId, u64) {
        let origins = self.origins.lock().unwrap_or_else(|p| p.into_inner());
        let (generation, shipped) = origins.get(&origin).map_or((0, 0), |o| {
            let shipped = match &o.sink {
                Some(_) => o.shipped.load(Ordering::Acquire),
                None => 0,
            };
            (o.generation, shipped)
        });
        let stream = StreamId {
            incarnation: self.incarnation,
            generation,
        };
        (stream, shipped)
    }

    /// This node's own queue at `address`, if it serves it now.
    fn resolve(&self, address: &str) -> Result<Arc<dyn Queue>, String> {
        let address = QueueAddress::parse(address).map_err(|e| e.to_string())?;
        let queues = self
            .fwd
            .upgrade()
            .and_then(|f| f.local_queues())
            .ok_or_else(|| "node is shutting down".to_string())?;
        queues.local_queue(&address)
    }

    pub(super) fn link_queue(
        &self,
        origin: NodeId,
        link: u64,
    ) -> Option<(Arc<dyn Queue>, Option<ConsumerId>)> {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(origin, link))
            .map(|l| (l.queue.clone(), l.consumer))
    }

    pub(super) fn closed(sink: &Sink, link: u64, reason: String) {
        sink.send(
            link,
            QueueEventKind::Closed {
                condition: crate::codec::definitions::condition::DETACH_FORCED,
                description: reason,
            },
        );
    }

    /// Take one message of a forwarded link.
    pub(super) fn on_message(&self, origin: NodeId, message: ToServer, payload: Bytes) {
        let sink = self.sink_for(origin);
        match message {
            ToServer::Publisher { link, address } => {
                self.on_publisher(origin, &sink, link, &address)
            }
            ToServer::Publish { link, token } => {
                self.on_publish(origin, &sink, link, token, payload)
            }
            ToServer::Subscribe { link, address } => self.on_subscribe(
                origin,
                &sink,
                link,
                &address,
                Ok(ConsumerOptions::default()),
            ),
            ToServer::SubscribeWith {
                link,
                address,
                options,
            } => self.on_subscribe(origin, &sink, link, &address, options.read()),
            ToServer::Flow {
                link,
                credit_limit,
                drain,
            } => self.with_consumer(origin, &sink, link, |queue, consumer| {
                queue.flow(consumer, credit_limit, drain)
            }),
            ToServer::Settle {
                link,
                message,
                outcome,
            } => self.with_consumer(origin, &sink, link, |queue, consumer| {
                queue.settle(consumer, message, outcome)
            }),
            // Sent only by nodes of an older version; the message stays out
            // with the consumer until it is settled or the link goes.
            ToServer::Undeliver { .. } => {}
            ToServer::Close { link } => self.close(origin, link),
            ToServer::Commit {
                link,
                token,
                lens,
                settles,
            } => self.on_commit(origin, &sink, link, token, &lens, settles, payload),
        }
    }

    /// A publishing link from `origin` attaches to the queue at `address`.
    fn on_publisher(&self, origin: NodeId, sink: &Sink, link: u64, address: &str) {
        match self.resolve(address) {
            Ok(queue) => self.add_link(origin, link, queue, None),
            Err(reason) => Self::closed(sink, link, reason),
        }
    }

    /// One forwarded publish: scan the header again, publish to the local
    /// queue with a confirm that reports to the origin's sink.
    fn on_publish(&self, origin: NodeId, sink: &Sink, link: u64, token: u64, payload: Bytes) {
        let report = |outcome: Outcome| {
            sink.send(link, QueueEventKind::Published { token, outcome });
        };
        let Some((queue, _)) = self.link_queue(origin, link) else {
            report(Outcome::Released);
            return Self::closed(sink, link, format!("unknown link {link}"));
        };
        let Ok(view) = MessageView::scan(&payload) else {
            return report(Outcome::Rejected);
        };
        let message = Message {
            header: view.header,
            header_len: view.header_len as u32,
            bytes: payload,
        };
        let confirm = PublishConfirm {
            sink: sink.clone(),
            tag: link,
            token,
        };
        let retry = (message.clone(), confirm.clone());
        let result = match queue.publish(message, Some(confirm)) {
            Err(QueueError::Gone(_)) => {
                // The queue was deleted after this (shared, internal)
                // publishing link opened: the message goes to the queue
                // of that name now, as a fresh attach's would.
                match self.resolve(&queue.address().to_string()) {
                    Ok(fresh) => {
                        self.add_link(origin, link, fresh.clone(), None);
                        fresh.publish(retry.0, Some(retry.1))
                    }
                    Err(reason) => Err(QueueError::Gone(reason)),
                }
            }
            other => other,
        };
        match result {
            Ok(PublishStatus::Accepted) => report(Outcome::Accepted),
            Ok(PublishStatus::Pending) => {}
            Err(error) => {
                report(Outcome::Released);
                Self::closed(sink, link, error.to_string());
            }
        }
    }

    /// A consuming link from `origin` subscribes to the queue at `address`
    /// with `options` (unreadable options close the link: never serve a
    /// consumer without the filter it asked for).
    fn on_subscribe(
        &self,
        origin: NodeId,
        sink: &Sink,
        link: u64,
        address: &str,
        options: Result<ConsumerOptions, String>,
    ) {
        let subscribed = options.and_then(|options| {
            let q = self.resolve(address)?;
            let consumer = q.subscribe(sink.clone(), link, options);
            Ok((consumer.map_err(|e| e.to_string())?, q))
        });
        match subscribed {
            Ok((consumer, queue)) => self.add_link(origin, link, queue, Some(consumer)),
            Err(reason) => Self::closed(sink, link, reason),
        }
    }

    fn add_link(
        &self,
        origin: NodeId,
        link: u64,
        queue: Arc<dyn Queue>,
        consumer: Option<ConsumerId>,
    ) {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((origin, link), ServerLink { queue, consumer });
    }

    /// Run `step` on a consumer link. On an unknown link the origin thinks
    /// it is attached here, but the link was dropped: `Closed` makes it
    /// re-attach.
    fn with_consumer(
        &self,
        origin: NodeId,
        sink: &Sink,
        link: u64,
        step: impl FnOnce(&dyn Queue, ConsumerId),
    ) {
        match self.link_queue(origin, link) {
            Some((queue, Some(consumer))) => step(queue.as_ref(), consumer),
            _ => Self::closed(sink, link, format!("unknown link {link}")),
        }
    }

    /// Drop a link; a consumer's unsettled messages return to the queue.
    fn close(&self, origin: NodeId, link: u64) {
        let removed = self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(origin, link));
        if let Some(ServerLink {
            queue,
            consumer: Some(consumer),
        }) = removed
        {
            queue.unsubscribe(consumer);
        }
    }

    /// Drop every link of `origin` (it is gone or unreachable).
    fn drop_origin(&self, origin: NodeId, why: &str) {
        let links: Vec<u64> = self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .filter(|(o, _)| *o == origin)
            .map(|(_, l)| *l)
            .collect();
        if !links.is_empty() {
            tracing::info!(
                origin,
                n = links.len(),
                why,
                "dropping the links of an unreachable node"
            );
        }
        for link in links {
            self.close(origin, link);
        }
    }

    fn links_of(&self, origin: NodeId) -> Vec<u64> {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .filter(|(o, _)| *o == origin)
            .map(|(_, l)| *l)
            .collect()
    }

    /// Answer an origin's probe.
    pub(super) fn probe(&self, origin: NodeId, address: &str, links: Vec<u64>) -> Reply {
        let serves = self.resolve(address).is_ok();
        let replica = QueueAddress::parse(address)
            .ok()
            .and_then(|a| self.fwd.upgrade().and_then(|f| f.quorum.get(&a)));
        let leader = replica.as_ref().and_then(|q| q.leader());
        let leader_heard_ms = replica
            .as_ref()
            .and_then(|q| q.leader_contact())
            .filter(|(heard, _)| Some(*heard) == leader)
            .map(|(_, age)| age.as_millis() as u64);
        let known = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let unknown = links
            .into_iter()
            .filter(|l| !known.contains_key(&(origin, *l)))
            .collect();
        drop(known);
        Reply::Probed {
            serves,
            leader,
            leader_heard_ms,
            unknown,
            shipped: self.stream_to(origin),
        }
    }

    /// What to ship for one event (nothing for some).
    fn to_origin(&self, origin: NodeId, event: QueueEvent) -> Option<(ToOrigin, Bytes)> {
        let link = event.tag;
        let (message, payload) = match event.kind {
            QueueEventKind::Deliver(delivery) => (
                ToOrigin::Deliver {
                    link,
                    message: delivery.id,
                    delivery_count: delivery.delivery_count,
                    redelivered: delivery.redelivered,
                },
                delivery.message.bytes,
            ),
            QueueEventKind::Drained { credit_limit } => {
                (ToOrigin::Drained { link, credit_limit }, Bytes::new())
            }
            QueueEventKind::Published { token, outcome } => (
                ToOrigin::Published {
                    link,
                    token,
                    outcome,
                },
                Bytes::new(),
            ),
            QueueEventKind::Capacity => return None,
            QueueEventKind::Registered { stamp } => {
                (ToOrigin::Registered { link, stamp }, Bytes::new())
            }
            QueueEventKind::Closed {
                condition,
                description,
            } => {
                self.close(origin, link);
                (
                    ToOrigin::Closed {
                        link,
                        reason: description,
                        deleted: condition
                            == crate::codec::definitions::condition::RESOURCE_DELETED,
                    },
                    Bytes::new(),
                )
            }
        };
        Some((message, payload))
    }

    /// Ship one numbered message to `origin`, retrying (bounded) through
    /// backpressure and while the origin is unreachable.
    async fn ship(
        &self,
        origin: NodeId,
        shipment: Shipment,
        payload: Bytes,
    ) -> Result<(), TransportError> {
        let link = shipment.message.link();
        let envelope = protocol::envelope(kind::FORWARD_TO_ORIGIN, link, &shipment, payload);
        let deadline = tokio::time::Instant::now() + SHIP_RETRY;
        loop {
            let error = match self.transport.send(self.node_id, origin, envelope.clone()) {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            // A stopped node stops trying.
            if tokio::time::Instant::now() >= deadline || self.fwd.strong_count() == 0 {
                return Err(error);
            }
            let pause = match error {
                TransportError::Backpressure(_) => Duration::from_millis(1),
                _ => UNREACHABLE_PAUSE,
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// Ask `origin` which of its links are gone; close those.
    async fn audit(&self, origin: NodeId) -> Result<(), ()> {
        let links = self.links_of(origin);
        if links.is_empty() {
            return Ok(());
        }
        let Some(fwd) = self.fwd.upgrade() else {
            return Ok(());
        };
        let reply =
            tokio::time::timeout(AUDIT_INTERVAL, fwd.call(origin, &Request::Alive { links })).await;
        match reply {
            Ok(Ok(Reply::Dead { links })) => {
                for link in links {
                    self.close(origin, link);
                }
                Ok(())
            }
            _ => Err(()),
        }
    }
}

/// Ship `origin`'s events in order, numbered on `stream`, and audit its
/// links; ends when the server is gone or the origin stays unreachable
/// (the stream ends: its links are dropped).
async fn pump(
    server: Weak<Server>,
    origin: NodeId,
    stream: StreamId,
    shipped: Arc<AtomicU64>,
    mut events: tokio::sync::mpsc::UnboundedReceiver<QueueEvent>,
) {
    let mut audit = tokio::time::interval(AUDIT_INTERVAL);
    audit.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failures = 0;
    let mut seq = 0;
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { return };
                let Some(server) = server.upgrade() else { return };
                let Some((message, payload)) = server.to_origin(origin, event) else {
                    continue;
                };
                seq += 1;
                let shipment = Shipment { stream, seq, message };
                if let Err(error) = server.ship(origin, shipment, payload).await {
                    tracing::debug!(origin, %error, "forwarding to origin failed");
                    server.end_stream(origin, stream, "shipments failed");
                    return;
                }
                shipped.store(seq, Ordering::Release);
            }
            _ = audit.tick() => {
                let Some(server) = server.upgrade() else { return };
                if server.audit(origin).await.is_ok() {
                    failures = 0;
                } else {
                    failures += 1;
                    if failures >= AUDIT_FAILURES_MAX {
                        server.end_stream(origin, stream, "audits failed");
                        return;
                    }
                }
            }
        }
    }
}
