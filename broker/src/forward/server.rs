//! The serving side of forwarding: links opened by other nodes (origins)
//! run against this node's own queue (the local quorum queue while this
//! node leads it, or a transient queue it owns). Never forwarded again:
//! a node that does not serve the queue answers `Closed`, and the origin
//! looks for the leader.
//!
//! Every event for an origin goes through one [`Sink`] per origin, drained
//! by one pump task that ships them with ordered `send`s; so a queue never
//! calls the transport itself and `message` never blocks. The pump also
//! audits the origin's links (closes those the origin no longer has) and
//! drops all of them when the origin is unreachable, so their unsettled
//! messages return to the queue. Events are bounded by the links' credit
//! and the origins' publish windows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;

use super::protocol::{self, Reply, Request, ToOrigin, ToServer};
use super::Forwarder;
use crate::codec::MessageView;
use crate::net::{kind, NodeId, NodeTransport, TransportError};
use crate::queue::{
    ConsumerId, Message, Outcome, PublishConfirm, PublishStatus, Queue, QueueAddress, QueueEvent,
    QueueEventKind, Sink,
};

/// How often an origin's links are audited.
const AUDIT_INTERVAL: Duration = Duration::from_secs(1);
/// Failed audits in a row after which an origin's links are dropped.
const AUDIT_FAILURES_MAX: u32 = 3;
/// How long a shipment may retry through backpressure.
const BACKPRESSURE_WAIT: Duration = Duration::from_secs(5);

/// One forwarded link.
struct ServerLink {
    queue: Arc<dyn Queue>,
    consumer: Option<ConsumerId>,
}

/// The forwarded links of this node.
pub(super) struct Server {
    node_id: NodeId,
    transport: Arc<dyn NodeTransport>,
    fwd: Weak<Forwarder>,
    links: Mutex<HashMap<(NodeId, u64), ServerLink>>,
    origins: Mutex<HashMap<NodeId, Sink>>,
    weak: Weak<Server>,
}

impl Server {
    pub(super) fn new(
        node_id: NodeId,
        transport: Arc<dyn NodeTransport>,
        fwd: Weak<Forwarder>,
    ) -> Arc<Server> {
        Arc::new_cyclic(|weak| Server {
            node_id,
            transport,
            fwd,
            links: Mutex::new(HashMap::new()),
            origins: Mutex::new(HashMap::new()),
            weak: weak.clone(),
        })
    }

    /// The sink whose events go to `origin`, with its pump started.
    fn sink_for(&self, origin: NodeId) -> Sink {
        let mut origins = self.origins.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sink) = origins.get(&origin) {
            if !sink.is_closed() {
                return sink.clone();
            }
        }
        let (sink, events) = Sink::channel();
        origins.insert(origin, sink.clone());
        tokio::spawn(pump(self.weak.clone(), origin, events));
        sink
    }

    /// This node's own queue at `address`, if it serves it now.
    fn resolve(&self, address: &str) -> Result<Arc<dyn Queue>, String> {
        let address = QueueAddress::parse(address).map_err(|e| e.to_string())?;
        let registry = self
            .fwd
            .upgrade()
            .and_then(|f| f.registry())
            .ok_or_else(|| "node is shutting down".to_string())?;
        registry.local_queue(&address)
    }

    fn link_queue(
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

    fn closed(sink: &Sink, link: u64, reason: String) {
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
            ToServer::Publisher { link, address } => match self.resolve(&address) {
                Ok(queue) => {
                    self.links.lock().unwrap_or_else(|p| p.into_inner()).insert(
                        (origin, link),
                        ServerLink {
                            queue,
                            consumer: None,
                        },
                    );
                }
                Err(reason) => Self::closed(&sink, link, reason),
            },
            ToServer::Publish { link, token } => {
                let released = |reason: String| {
                    sink.send(
                        link,
                        QueueEventKind::Published {
                            token,
                            outcome: Outcome::Released,
                        },
                    );
                    Self::closed(&sink, link, reason);
                };
                let Some((queue, _)) = self.link_queue(origin, link) else {
                    return released(format!("unknown link {link}"));
                };
                let Ok(view) = MessageView::scan(&payload) else {
                    sink.send(
                        link,
                        QueueEventKind::Published {
                            token,
                            outcome: Outcome::Rejected,
                        },
                    );
                    return;
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
                match queue.publish(message, Some(confirm)) {
                    Ok(PublishStatus::Accepted) => {
                        sink.send(
                            link,
                            QueueEventKind::Published {
                                token,
                                outcome: Outcome::Accepted,
                            },
                        );
                    }
                    Ok(PublishStatus::Pending) => {}
                    Err(error) => released(error.to_string()),
                }
            }
            ToServer::Subscribe { link, address } => {
                let subscribed = self.resolve(&address).and_then(|q| {
                    Ok((
                        q.subscribe(sink.clone(), link).map_err(|e| e.to_string())?,
                        q,
                    ))
                });
                match subscribed {
                    Ok((consumer, queue)) => {
                        self.links.lock().unwrap_or_else(|p| p.into_inner()).insert(
                            (origin, link),
                            ServerLink {
                                queue,
                                consumer: Some(consumer),
                            },
                        );
                    }
                    Err(reason) => Self::closed(&sink, link, reason),
                }
            }
            ToServer::Flow {
                link,
                credit_limit,
                drain,
            } => match self.link_queue(origin, link) {
                Some((queue, Some(consumer))) => queue.flow(consumer, credit_limit, drain),
                _ => Self::closed(&sink, link, format!("unknown link {link}")),
            },
            ToServer::Settle {
                link,
                message,
                outcome,
            } => {
                if let Some((queue, Some(consumer))) = self.link_queue(origin, link) {
                    queue.settle(consumer, message, outcome);
                }
            }
            ToServer::Undeliver { link, message } => {
                if let Some((queue, Some(consumer))) = self.link_queue(origin, link) {
                    queue.undeliver(consumer, message);
                }
            }
            ToServer::Close { link } => self.close(origin, link),
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
    fn drop_origin(&self, origin: NodeId) {
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
        let leader = QueueAddress::parse(address).ok().and_then(|a| {
            self.fwd
                .upgrade()
                .and_then(|f| f.quorum.get(&a))
                .and_then(|q| q.leader())
        });
        let known = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let unknown = links
            .into_iter()
            .filter(|l| !known.contains_key(&(origin, *l)))
            .collect();
        Reply::Probed {
            serves,
            leader,
            unknown,
        }
    }

    /// Ship one event to `origin`, retrying through backpressure (bounded).
    async fn ship(&self, origin: NodeId, event: QueueEvent) -> Result<(), TransportError> {
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
            QueueEventKind::Capacity => return Ok(()),
            QueueEventKind::Closed { description, .. } => {
                self.close(origin, link);
                (
                    ToOrigin::Closed {
                        link,
                        reason: description,
                    },
                    Bytes::new(),
                )
            }
        };
        let envelope = protocol::envelope(kind::FORWARD_TO_ORIGIN, link, &message, payload);
        let deadline = tokio::time::Instant::now() + BACKPRESSURE_WAIT;
        loop {
            match self.transport.send(self.node_id, origin, envelope.clone()) {
                Err(TransportError::Backpressure(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                other => return other,
            }
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

/// Ship `origin`'s events in order and audit its links; ends when the
/// server is gone or the origin is unreachable (its links are dropped).
async fn pump(
    server: Weak<Server>,
    origin: NodeId,
    mut events: tokio::sync::mpsc::UnboundedReceiver<QueueEvent>,
) {
    let mut audit = tokio::time::interval(AUDIT_INTERVAL);
    audit.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failures = 0;
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { return };
                let Some(server) = server.upgrade() else { return };
                if let Err(error) = server.ship(origin, event).await {
                    tracing::debug!(origin, %error, "forwarding to origin failed");
                    server.origins.lock().unwrap_or_else(|p| p.into_inner()).remove(&origin);
                    server.drop_origin(origin);
                    return;
                }
            }
            _ = audit.tick() => {
                let Some(server) = server.upgrade() else { return };
                if server.audit(origin).await.is_ok() {
                    failures = 0;
                } else {
                    failures += 1;
                    if failures >= AUDIT_FAILURES_MAX {
                        server.origins.lock().unwrap_or_else(|p| p.into_inner()).remove(&origin);
                        server.drop_origin(origin);
                        return;
                    }
                }
            }
        }
    }
}
