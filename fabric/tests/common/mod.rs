//! Shared test rig: a recording handler and helpers to start fabrics on
//! ephemeral 127.0.0.1 ports and wire them into a mesh.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use ramqpd_fabric::{BoxFuture, Envelope, Fabric, FabricConfig, Handler, NodeId};
use tokio::sync::mpsc;

/// Kind of call that is echoed back as `me ++ from ++ channel ++ payload`.
pub const ECHO: u32 = 0;
/// Kind of call that fails with "boom".
pub const FAIL: u32 = 1;
/// Kind of call that sleeps `channel` milliseconds, then echoes.
pub const SLOW: u32 = 2;

/// Kind of call or message whose handler panics.
pub const PANIC: u32 = 3;
/// Kind of call whose `channel` the handler records in `Handler::call`
/// itself (before the future), then echoes.
pub const ORDERED: u32 = 4;
/// Kind of call whose handler panics in `Handler::call` itself, before
/// making its future.
pub const PANIC_EARLY: u32 = 5;

pub const CLUSTER: &str = "test-cluster";

/// A handler that echoes calls and records one-way messages.
pub struct TestHandler {
    pub me: NodeId,
    messages: mpsc::UnboundedSender<(NodeId, Envelope)>,
    /// The channels of ORDERED calls, in the order `call` was invoked.
    pub call_order: std::sync::Mutex<Vec<u64>>,
}

impl TestHandler {
    pub fn new(
        me: NodeId,
    ) -> (
        Arc<TestHandler>,
        mpsc::UnboundedReceiver<(NodeId, Envelope)>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(TestHandler {
                me,
                messages: tx,
                call_order: std::sync::Mutex::default(),
            }),
            rx,
        )
    }
}

/// The answer an ECHO call to `me` from `from` gets.
pub fn echo_answer(me: NodeId, from: NodeId, envelope: &Envelope) -> Bytes {
    let mut b = BytesMut::with_capacity(24 + envelope.payload.len());
    b.put_u64(me);
    b.put_u64(from);
    b.put_u64(envelope.channel);
    b.put_slice(&envelope.payload);
    b.freeze()
}

impl Handler for TestHandler {
    fn call(
        self: Arc<Self>,
        from: NodeId,
        envelope: Envelope,
    ) -> BoxFuture<'static, Result<Bytes, String>> {
        match envelope.kind {
            ORDERED => self
                .call_order
                .lock()
                .expect("not poisoned")
                .push(envelope.channel),
            PANIC_EARLY => panic!("test handler panics on purpose, before its future"),
            _ => {}
        }
        Box::pin(async move {
            match envelope.kind {
                FAIL => Err("boom".to_string()),
                PANIC => panic!("test handler panics on purpose"),
                SLOW => {
                    tokio::time::sleep(Duration::from_millis(envelope.channel)).await;
                    Ok(echo_answer(self.me, from, &envelope))
                }
                _ => Ok(echo_answer(self.me, from, &envelope)),
            }
        })
    }

    fn message(&self, from: NodeId, envelope: Envelope) {
        assert_ne!(envelope.kind, PANIC, "test handler panics on purpose");
        let _ = self.messages.send((from, envelope));
    }
}

/// A node under test.
pub struct Node {
    pub fabric: Fabric,
    pub handler: Arc<TestHandler>,
    pub messages: mpsc::UnboundedReceiver<(NodeId, Envelope)>,
}

/// A test config on an ephemeral port.
pub fn config(id: NodeId) -> FabricConfig {
    let mut c = FabricConfig::new(id, CLUSTER, "127.0.0.1:0".parse().unwrap());
    c.call_timeout = Duration::from_secs(10);
    c.connect_timeout = Duration::from_secs(2);
    c.reconnect_max = Duration::from_millis(200);
    c
}

pub async fn start(config: FabricConfig) -> Node {
    let (handler, messages) = TestHandler::new(config.node_id);
    let fabric = Fabric::start(config, handler.clone()).await.expect("start");
    Node {
        fabric,
        handler,
        messages,
    }
}

/// Starts nodes `1..=n` (each from `make(id)`) and connects each to all others.
pub async fn mesh(n: u64, make: impl Fn(NodeId) -> FabricConfig) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=n {
        nodes.push(start(make(id)).await);
    }
    let addrs: Vec<(NodeId, SocketAddr)> = nodes
        .iter()
        .map(|n| (n.fabric.node_id(), n.fabric.local_addr()))
        .collect();
    for node in &nodes {
        for (id, addr) in &addrs {
            if *id != node.fabric.node_id() {
                node.fabric.add_peer(*id, *addr);
            }
        }
    }
    for node in &nodes {
        for (id, _) in &addrs {
            if *id != node.fabric.node_id() {
                assert!(
                    node.fabric
                        .wait_connected(*id, Duration::from_secs(5))
                        .await,
                    "{} -> {id} connects",
                    node.fabric.node_id()
                );
            }
        }
    }
    nodes
}

/// Runs `f` with a deadline so a hang fails the test instead of stalling CI.
pub async fn bounded<T>(secs: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("test step timed out")
}

/// Polls `check` every 10 ms until it holds; panics after `limit`.
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within {limit:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
