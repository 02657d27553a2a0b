//! The listening side: accepts `Exchange` streams, checks who dialled,
//! delivers one-way messages in order, starts each call in arrival order
//! (its handler's synchronous part runs on the reader task) and finishes it
//! in its own task, sending answers back (batched) on the stream's response
//! side.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{FutureExt, Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::config::LinkSettings;
use crate::proto::fabric_server::Fabric as FabricService;
use crate::proto::{
    wire_version_mismatch, Batch, Frame, Op, CLUSTER_KEY, NODE_ID_KEY, WIRE_VERSION_KEY,
};
use crate::stats::Counters;
use crate::{lock, Handler, NodeId, CLIENT_NODE_ID};

/// State shared by the server and the fabric handle.
pub(crate) struct Shared {
    pub(crate) settings: Arc<LinkSettings>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) handler: Arc<dyn Handler>,
    /// Fires on shutdown; every stream's token is a child of it.
    pub(crate) shutdown: CancellationToken,
    /// Partition flags by peer, shared with the outbound links.
    blocked: Mutex<HashMap<NodeId, Arc<AtomicBool>>>,
    /// Open inbound streams by dialling node, to close them on `set_blocked`.
    inbound: Mutex<HashMap<NodeId, HashMap<u64, CancellationToken>>>,
    next_inbound: AtomicU64,
}

impl Shared {
    /// New shared state.
    pub(crate) fn new(settings: Arc<LinkSettings>, handler: Arc<dyn Handler>) -> Arc<Shared> {
        Arc::new(Shared {
            settings,
            counters: Arc::new(Counters::default()),
            handler,
            shutdown: CancellationToken::new(),
            blocked: Mutex::new(HashMap::new()),
            inbound: Mutex::new(HashMap::new()),
            next_inbound: AtomicU64::new(0),
        })
    }

    /// The partition flag of `peer` (created clear on first use).
    pub(crate) fn blocked_flag(&self, peer: NodeId) -> Arc<AtomicBool> {
        let mut map = lock(&self.blocked);
        map.entry(peer).or_default().clone()
    }

    /// Closes every inbound stream from `peer`.
    pub(crate) fn close_inbound(&self, peer: NodeId) {
        let map = lock(&self.inbound);
        if let Some(streams) = map.get(&peer) {
            for token in streams.values() {
                token.cancel();
            }
        }
    }

    fn register_inbound(&self, peer: NodeId, token: CancellationToken) -> u64 {
        let key = self.next_inbound.fetch_add(1, Ordering::Relaxed);
        let mut map = lock(&self.inbound);
        map.entry(peer).or_default().insert(key, token);
        key
    }

    fn unregister_inbound(&self, peer: NodeId, key: u64) {
        let mut map = lock(&self.inbound);
        if let Some(streams) = map.get_mut(&peer) {
            streams.remove(&key);
            if streams.is_empty() {
                map.remove(&peer);
            }
        }
    }
}

/// The tonic service.
pub(crate) struct Service {
    pub(crate) shared: Arc<Shared>,
}

type BatchStream = Pin<Box<dyn Stream<Item = Result<Batch, Status>> + Send + 'static>>;

impl Service {
    /// Checks the dialling node's identity; returns its id.
    fn identify<T>(&self, request: &Request<T>) -> Result<NodeId, Status> {
        let meta = request.metadata();
        let cluster = meta
            .get(CLUSTER_KEY)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| Status::permission_denied("no cluster name"))?;
        if cluster != self.shared.settings.cluster_name {
            return Err(Status::permission_denied(format!(
                "cluster name {cluster:?} does not match {:?}",
                self.shared.settings.cluster_name
            )));
        }
        let sent = meta.get(WIRE_VERSION_KEY).and_then(|v| v.to_str().ok());
        if let Some(why) = wire_version_mismatch(sent, self.shared.settings.wire_version) {
            return Err(Status::permission_denied(why));
        }
        let from = meta
            .get(NODE_ID_KEY)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<NodeId>().ok())
            .ok_or_else(|| Status::permission_denied("no or bad node id"))?;
        if from == self.shared.settings.node_id && from != CLIENT_NODE_ID {
            return Err(Status::permission_denied("a node cannot dial itself"));
        }
        if self.shared.shutdown.is_cancelled() {
            return Err(Status::unavailable("shutting down"));
        }
        if self.shared.blocked_flag(from).load(Ordering::Acquire) {
            return Err(Status::unavailable("blocked"));
        }
        Ok(from)
    }
}

#[tonic::async_trait]
impl FabricService for Service {
    type ExchangeStream = BatchStream;

    async fn exchange(
        &self,
        request: Request<Streaming<Batch>>,
    ) -> Result<Response<BatchStream>, Status> {
        let from = match self.identify(&request) {
            Ok(from) => from,
            Err(status) => {
                Counters::add(&self.shared.counters.inbound_refused, 1);
                tracing::warn!(msg = status.message(), "fabric stream refused");
                return Err(status);
            }
        };
        let shared = self.shared.clone();
        let cancel = shared.shutdown.child_token();
        let key = shared.register_inbound(from, cancel.clone());
        let (answers, rx) = mpsc::channel(shared.settings.send_queue);
        let end: Arc<Mutex<Option<Status>>> = Arc::default();
        let reader = Reader {
            shared: shared.clone(),
            from,
            blocked: shared.blocked_flag(from),
            answers,
            cancel: cancel.clone(),
            end: end.clone(),
        };
        let stream = request.into_inner();
        tokio::spawn(async move {
            reader.run(stream).await;
            shared.unregister_inbound(from, key);
        });
        let settings = &self.shared.settings;
        let out = crate::batch::batches(
            rx,
            settings.codec_limit(),
            self.shared.counters.clone(),
            cancel,
        )
        .map(Ok)
        .chain(futures_util::stream::iter(std::iter::from_fn(move || {
            lock(&end).take().map(Err)
        })));
        Ok(Response::new(Box::pin(out)))
    }
}

/// Reads one inbound stream.
struct Reader {
    shared: Arc<Shared>,
    from: NodeId,
    blocked: Arc<AtomicBool>,
    answers: mpsc::Sender<Frame>,
    cancel: CancellationToken,
    /// The status to end the response side with, if the request side failed.
    end: Arc<Mutex<Option<Status>>>,
}

impl Reader {
    async fn run(self, mut stream: Streaming<Batch>) {
        tracing::debug!(peer = self.from, "fabric inbound stream open");
        loop {
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => break,
                message = stream.message() => match message {
                    Ok(Some(batch)) => self.batch(batch),
                    Ok(None) => break,
                    Err(status) => {
                        // A client (ramqp-ctl) hanging up after its answer
                        // is the normal end of its stream, not news.
                        if self.from == crate::CLIENT_NODE_ID {
                            tracing::debug!(code = ?status.code(), msg = status.message(), "fabric client stream ended");
                        } else {
                            tracing::warn!(peer = self.from, code = ?status.code(), msg = status.message(), "fabric inbound stream failed");
                        }
                        *lock(&self.end) = Some(status);
                        break;
                    }
                },
            }
        }
        tracing::debug!(peer = self.from, "fabric inbound stream closed");
        self.cancel.cancel();
    }

    fn batch(&self, batch: Batch) {
        let counters = &self.shared.counters;
        counters.received(&batch.frames);
        if self.blocked.load(Ordering::Acquire) {
            Counters::add(&counters.frames_dropped, batch.frames.len() as u64);
            return;
        }
        let max = self.shared.settings.max_message_bytes;
        for frame in batch.frames {
            let op = Op::try_from(frame.op).unwrap_or(Op::Unspecified);
            if frame.body_size() > max {
                Counters::add(&counters.frames_dropped, 1);
                if op == Op::Call {
                    let text = format!(
                        "frame of {} bytes is over the limit of {max} bytes",
                        frame.body_size()
                    );
                    self.answer(Frame::answer(frame.id, Err(text)));
                }
                continue;
            }
            match op {
                Op::Message => {
                    let handler = &self.shared.handler;
                    let delivered = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        handler.message(self.from, frame.into_envelope());
                    }));
                    if delivered.is_err() {
                        tracing::error!(peer = self.from, "fabric: Handler::message panicked");
                    }
                }
                Op::Call => {
                    let id = frame.id;
                    let from = self.from;
                    let answers = self.answers.clone();
                    // The handler's future is made here, in arrival order,
                    // so its synchronous part (before its first await) runs
                    // in the order the peer sent its calls (see
                    // `Handler::call`); only the rest runs in its own task.
                    let handler = self.shared.handler.clone();
                    let made = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        handler.call(from, frame.into_envelope())
                    }));
                    tokio::spawn(async move {
                        let mut result = match made {
                            Ok(call) => AssertUnwindSafe(call).catch_unwind().await,
                            Err(panic) => Err(panic),
                        }
                        .unwrap_or_else(|_| {
                            tracing::error!(peer = from, "fabric: Handler::call panicked");
                            Err("handler panicked".to_string())
                        });
                        if let Ok(body) = &result {
                            if body.len() > max {
                                result = Err(format!(
                                    "answer of {} bytes is over the limit of {max} bytes",
                                    body.len()
                                ));
                            }
                        }
                        let _ = answers.send(Frame::answer(id, result)).await;
                    });
                }
                Op::Reply | Op::Error | Op::Unspecified => {
                    Counters::add(&counters.frames_dropped, 1)
                }
            }
        }
    }

    /// Queues an answer without waiting (dropped if the queue is full; the
    /// caller then times out).
    fn answer(&self, frame: Frame) {
        if self.answers.try_send(frame).is_err() {
            Counters::add(&self.shared.counters.frames_dropped, 1);
        }
    }
}
