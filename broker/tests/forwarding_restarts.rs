//! Forwarded links through restarts of the serving node and transient
//! failures of the node transport, with the third-party client
//! (fe2o3-amqp): a publisher and a consumer sit on a node that does not
//! lead the queue, and whatever happens to the leader (it restarts with the
//! same id, the link to it fails for a while, its shipments are lost) their
//! links never stall: publishing resumes within a bound and no accepted
//! message is lost.
//!
//! The cluster here runs over [`Faulty`], a wrapper of the in-process
//! transport that can do what the gRPC fabric does: fail traffic from a
//! node that just (re)started to one peer with `Unreachable` until "its
//! link is connected", cut one direction only, or accept sends and lose
//! them.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use common::*;
use ramqpd_broker::net::{
    CallFuture, Envelope, LocalTransport, NodeHandler, NodeId, NodeTransport, TransportError,
};
use ramqpd_broker::queue::QueueAddress;
use ramqpd_broker::{Broker, BrokerConfig};

/// What happens to traffic from one node to another.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Calls and sends fail with `Unreachable`.
    Fail,
    /// Sends are taken and lost; calls work.
    Lose,
}

/// The in-process transport with one-way faults.
#[derive(Default)]
struct Faulty {
    inner: Arc<LocalTransport>,
    /// (from, to) -> fault, until then.
    faults: Mutex<HashMap<(NodeId, NodeId), (Fault, Instant)>>,
    /// Applied when `from` registers: traffic to `to` fails for a while
    /// (the fabric link of a restarted node is not connected yet).
    warmup: Mutex<HashMap<(NodeId, NodeId), Duration>>,
}

impl Faulty {
    fn fault(&self, from: NodeId, to: NodeId) -> Option<Fault> {
        let faults = self.faults.lock().unwrap();
        match faults.get(&(from, to)) {
            Some((fault, until)) if Instant::now() < *until => Some(*fault),
            _ => None,
        }
    }

    fn set(&self, from: NodeId, to: NodeId, fault: Fault, for_: Duration) {
        self.faults
            .lock()
            .unwrap()
            .insert((from, to), (fault, Instant::now() + for_));
    }

    fn clear(&self, from: NodeId, to: NodeId) {
        self.faults.lock().unwrap().remove(&(from, to));
    }
}

impl NodeTransport for Faulty {
    fn call(&self, from: NodeId, target: NodeId, envelope: Envelope) -> CallFuture {
        if self.fault(from, target) == Some(Fault::Fail) {
            return Box::pin(async move { Err(TransportError::Unreachable(target)) });
        }
        self.inner.call(from, target, envelope)
    }

    fn send(&self, from: NodeId, target: NodeId, envelope: Envelope) -> Result<(), TransportError> {
        match self.fault(from, target) {
            Some(Fault::Fail) => Err(TransportError::Unreachable(target)),
            Some(Fault::Lose) => Ok(()),
            None => self.inner.send(from, target, envelope),
        }
    }

    fn register(&self, node: NodeId, handler: Weak<dyn NodeHandler>) {
        let warmups: Vec<_> = self
            .warmup
            .lock()
            .unwrap()
            .iter()
            .filter(|((from, _), _)| *from == node)
            .map(|(k, v)| (*k, *v))
            .collect();
        for ((from, to), duration) in warmups {
            self.set(from, to, Fault::Fail, duration);
        }
        self.inner.register(node, handler);
    }

    fn unregister(&self, node: NodeId) {
        self.inner.unregister(node);
    }
}

/// Three nodes in this process over a [`Faulty`] transport; restartable on
/// their data directories and ports.
struct Nodes {
    transport: Arc<Faulty>,
    configs: BTreeMap<NodeId, BrokerConfig>,
    running: BTreeMap<NodeId, Broker>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Nodes {
    async fn start(base: BrokerConfig) -> Nodes {
        let ids: Vec<NodeId> = vec![1, 2, 3];
        let mut nodes = Nodes {
            transport: Arc::new(Faulty::default()),
            configs: BTreeMap::new(),
            running: BTreeMap::new(),
            _dirs: Vec::new(),
        };
        for id in &ids {
            let dir = tempfile::tempdir().unwrap();
            let mut config = base.clone();
            config.data_dir = Some(dir.path().to_path_buf());
            config.quorum.node_id = *id;
            config.quorum.members = ids.clone();
            nodes._dirs.push(dir);
            nodes.configs.insert(*id, config);
        }
        for id in ids {
            nodes.restart(id).await;
        }
        nodes
    }

    fn addr(&self, id: NodeId) -> SocketAddr {
        self.running[&id].local_addr()
    }

    async fn stop(&mut self, id: NodeId) {
        if let Some(broker) = self.running.remove(&id) {
            within(Duration::from_secs(20), "node stops", broker.shutdown()).await;
        }
    }

    async fn restart(&mut self, id: NodeId) {
        self.stop(id).await;
        let config = self.configs.get_mut(&id).unwrap();
        let transport: Arc<dyn NodeTransport> = self.transport.clone();
        let broker = step(
            "node starts",
            Broker::start_with_transport(config.clone(), Some(transport)),
        )
        .await
        .expect("node starts");
        config.listen = broker.local_addr();
        self.running.insert(id, broker);
    }

    fn leader_of(&self, name: &str) -> Option<NodeId> {
        let address = QueueAddress::parse(&format!("/quorum/{name}")).ok()?;
        self.running
            .values()
            .filter_map(|b| b.quorum().get(&address))
            .filter_map(|q| q.leader())
            .find(|leader| self.running.contains_key(leader))
    }

    async fn leader(&self, name: &str) -> NodeId {
        let mut leader = None;
        eventually(Duration::from_secs(20), "a leader", || {
            leader = self.leader_of(name);
            leader.is_some()
        })
        .await;
        leader.unwrap()
    }

    /// The leader of `name` once it is not node `client`: the graceful
    /// stop of a leader hands its leadership to a caught-up follower, which
    /// may be the clients' node; then it is moved on to another node first
    /// (restarting the clients' own node would end their connections,
    /// which is not what these tests are about).
    async fn leader_off(&self, name: &str, client: NodeId) -> NodeId {
        let leader = self.leader(name).await;
        if leader != client {
            return leader;
        }
        let to = *self.running.keys().find(|id| **id != client).unwrap();
        // A leader grants a hand-off target's vote only once its own vote
        // is older than a lease (`election_timeout_max`; see
        // `quorum/handoff.rs`). The clients' node has just been elected by
        // the graceful stop's hand-off: asked at once, the target's
        // campaign duels with the old leader's own re-election for many
        // seconds (seen: 12 s without a leader, the consumer closed).
        let lease = Duration::from_millis(self.configs[&client].quorum.election_timeout_max_ms);
        tokio::time::sleep(lease).await;
        let moved = step(
            "leadership moves off the clients' node",
            self.running[&client]
                .quorum()
                .move_leadership(Some(name), Some(to)),
        )
        .await
        .expect("leadership moves off the clients' node");
        eprintln!("{moved}");
        let mut leader = None;
        eventually(
            Duration::from_secs(20),
            "a leader other than the clients' node",
            || {
                leader = self.leader_of(name).filter(|l| *l != client);
                leader.is_some()
            },
        )
        .await;
        leader.unwrap()
    }

    async fn shutdown(mut self) {
        for id in [1, 2, 3] {
            self.stop(id).await;
        }
    }
}

fn config() -> BrokerConfig {
    let mut base = BrokerConfig::default();
    fast_raft(&mut base);
    // Slower elections than `fast_raft`: a leader that restarts at once
    // without handing off is back before the others elect, so it leads
    // again (the case seen with processes).
    base.quorum.election_timeout_min_ms = 2000;
    base.quorum.election_timeout_max_ms = 3000;
    base.quorum.leader_wait_ms = 10_000;
    base
}

const QUEUE: &str = "restarts";

/// A publisher and a consumer on the same follower of the queue.
struct Clients {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    publisher: tokio::task::JoinHandle<Result<Vec<String>, String>>,
    consumer: tokio::task::JoinHandle<Result<Vec<String>, String>>,
}

impl Clients {
    async fn start(addr: SocketAddr) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let publisher = tokio::spawn(keep_publishing(addr, QUEUE, stop.clone(), counts.clone()));
        let consumer = tokio::spawn(keep_consuming(addr, QUEUE, stop.clone(), counts.clone()));
        let clients = Clients {
            stop,
            counts,
            publisher,
            consumer,
        };
        clients.flowing(50, "publishing starts").await;
        clients
    }

    /// Both links move on: `more` publishes accepted and `more` messages
    /// received from now on, within 15 s. Returns how long the publisher
    /// waited for its next accept.
    async fn flowing(&self, more: usize, what: &str) -> Duration {
        let start = Instant::now();
        let (a0, r0) = (self.counts.accepted(), self.counts.received());
        let mut resumed = None;
        eventually(Duration::from_secs(15), what, || {
            let a = self.counts.accepted();
            if a > a0 && resumed.is_none() {
                resumed = Some(start.elapsed());
            }
            a >= a0 + more && self.counts.received() >= r0 + more
        })
        .await;
        resumed.unwrap_or_default()
    }

    /// Stop both, check that neither link failed and nothing accepted was
    /// lost.
    async fn finish(self, label: &str) {
        self.stop.store(true, Ordering::Relaxed);
        let accepted = within(Duration::from_secs(30), "publisher ends", self.publisher)
            .await
            .unwrap()
            .expect("the publisher's link is never detached");
        let released = self.counts.released();
        let received = within(Duration::from_secs(60), "consumer ends", self.consumer)
            .await
            .unwrap()
            .expect("the consumer's link is never detached");
        let (lost, duplicates) = check_delivered(&accepted, &received);
        eprintln!(
            "{label}: accepted {}, released {released}, received {}, duplicates {duplicates}, \
             lost {}",
            accepted.len(),
            received.len(),
            lost.len()
        );
        assert!(lost.is_empty(), "accepted but never delivered: {lost:?}");
    }
}

/// The leader and a follower of the queue (where the clients go).
async fn setup(nodes: &Nodes) -> (NodeId, NodeId) {
    publish(nodes.addr(1), QUEUE, &[]).await;
    let leader = nodes.leader(QUEUE).await;
    let client = if leader == 3 { 2 } else { 3 };
    (leader, client)
}

/// The reported bug: the leader restarts at once with the same id; its
/// link to the clients' node is not up for the first 2.5 s, so its first
/// shipments there fail. Its graceful stop hands the leadership to a
/// caught-up follower, possibly the clients' node (their links switch to
/// the local fast path); the next round then moves it off that node
/// before restarting the leader (see [`Nodes::leader_off`]).
// This test used to fail about 1 run in 5: a publish batch that passed the
// hand-off's hold just before it was set landed after the catch-up check,
// so the target campaigned with a log one entry short and no voter granted
// it (12 s without a leader). `quorum/hold.rs` closes that gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_restarts_with_the_same_id_and_cannot_reach_the_clients_at_first() {
    trace_from_env();
    let mut nodes = Nodes::start(config()).await;
    let (leader, client) = setup(&nodes).await;
    let clients = Clients::start(nodes.addr(client)).await;
    for round in 0..2 {
        let leader = nodes.leader_off(QUEUE, client).await;
        nodes
            .transport
            .warmup
            .lock()
            .unwrap()
            .insert((leader, client), Duration::from_millis(2500));
        nodes.restart(leader).await;
        let pause = clients
            .flowing(50, "publishing resumes after the leader restarted")
            .await;
        eprintln!(
            "round {round}: leader {leader} restarted; now led by {:?}; publishing paused {pause:?}",
            nodes.leader_of(QUEUE)
        );
        assert!(pause < Duration::from_secs(10), "paused {pause:?}");
    }
    let _ = leader;
    clients.finish("restart with the same id").await;
    nodes.shutdown().await;
}

/// The link between the leader and the clients' node is cut both ways for
/// 2 s and heals; the leader stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_to_the_leader_heals_without_a_leader_change() {
    let nodes = Nodes::start(config()).await;
    let (leader, client) = setup(&nodes).await;
    let clients = Clients::start(nodes.addr(client)).await;
    let cut = Duration::from_secs(2);
    nodes.transport.set(leader, client, Fault::Fail, cut);
    nodes.transport.set(client, leader, Fault::Fail, cut);
    tokio::time::sleep(cut).await;
    let pause = clients
        .flowing(50, "publishing resumes after the heal")
        .await;
    eprintln!(
        "cut healed; led by {:?} (was {leader}); publishing resumed {pause:?} after the heal",
        nodes.leader_of(QUEUE)
    );
    assert!(pause < Duration::from_secs(5), "paused {pause:?}");
    clients.finish("cut and heal").await;
    nodes.shutdown().await;
}

/// Only the leader's shipments to the clients' node fail (its link there
/// is down, the other direction works) for 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leaders_shipments_fail_for_a_while() {
    let nodes = Nodes::start(config()).await;
    let (leader, client) = setup(&nodes).await;
    let clients = Clients::start(nodes.addr(client)).await;
    let cut = Duration::from_secs(3);
    nodes.transport.set(leader, client, Fault::Fail, cut);
    tokio::time::sleep(cut).await;
    let pause = clients.flowing(50, "publishing resumes").await;
    eprintln!("one-way failure over; publishing resumed {pause:?} after it");
    assert!(pause < Duration::from_secs(5), "paused {pause:?}");
    clients.finish("one-way failure").await;
    nodes.shutdown().await;
}

/// The leader's shipments to the clients' node are taken by the transport
/// and lost for 1 s (a stream that broke with frames in it): the origin
/// must notice without any error to tell it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_shipments_are_noticed() {
    let nodes = Nodes::start(config()).await;
    let (leader, client) = setup(&nodes).await;
    let clients = Clients::start(nodes.addr(client)).await;
    let cut = Duration::from_secs(1);
    nodes.transport.set(leader, client, Fault::Lose, cut);
    tokio::time::sleep(cut).await;
    nodes.transport.clear(leader, client);
    let pause = clients.flowing(50, "publishing resumes").await;
    eprintln!("lost shipments; publishing resumed {pause:?} after the loss ended");
    assert!(pause < Duration::from_secs(5), "paused {pause:?}");
    clients.finish("lost shipments").await;
    nodes.shutdown().await;
}
