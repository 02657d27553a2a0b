//! Failure handling over real TCP: a peer that is down fails fast (and its
//! address is seen refusing connections), a peer restarted on the same
//! address is reached again without intervention,
//! outstanding calls on a broken stream fail, call timeouts, and
//! `set_blocked` partitions and heals.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use ramqpd_fabric::{CallError, Envelope};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_peer_fails_fast_and_restarted_peer_is_reached_again() {
    bounded(60, async {
        let mut nodes = mesh(2, config).await;
        let b = nodes.pop().unwrap();
        let a = nodes.pop().unwrap();
        let b_addr = b.fabric.local_addr();
        let call_timeout = Duration::from_secs(10);

        // An outstanding call when the peer goes away fails with Unreachable.
        let received_before = b.fabric.stats().frames_received;
        let slow = a.fabric.call(2, Envelope::new(5_000, SLOW, Bytes::new()));
        let slow = tokio::spawn(slow);
        // Nothing else travels between the two, so one more frame read on b
        // is the call: it is outstanding, its handler asleep for 5 s.
        eventually(Duration::from_secs(5), "b receives the slow call", || {
            b.fabric.stats().frames_received > received_before
        })
        .await;
        assert!(!a.fabric.not_listening(2), "b listens while it runs");
        b.fabric.shutdown().await;
        drop(b.messages);
        let started = Instant::now();
        assert_eq!(slow.await.unwrap(), Err(CallError::Unreachable(2)));
        // a's redials find nothing at b's address: the OS refuses them.
        eventually(
            Duration::from_secs(5),
            "a finds nothing listening at b's address",
            || a.fabric.not_listening(2),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "outstanding call failed late: {:?}",
            started.elapsed()
        );

        // New calls fail fast while it is down (well before the call timeout).
        for _ in 0..5 {
            let started = Instant::now();
            assert_eq!(
                a.fabric.call(2, Envelope::new(1, ECHO, Bytes::new())).await,
                Err(CallError::Unreachable(2))
            );
            assert!(
                started.elapsed() < call_timeout / 20,
                "took {:?}",
                started.elapsed()
            );
            assert_eq!(
                a.fabric.send(2, Envelope::new(1, 9, Bytes::new())),
                Err(CallError::Unreachable(2))
            );
            // Pacing, not synchronisation: the next call lands later in
            // a's redial backoff (20 ms doubling to 200 ms), so the five
            // calls sample fail-fast both between and around redials.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }

        // A new process on the same address: traffic resumes by itself.
        let b2 = start(
            config(2)
                .with_peer(1, a.fabric.local_addr())
                .tap_listen(b_addr),
        )
        .await;
        assert_eq!(b2.fabric.local_addr(), b_addr);
        assert!(
            a.fabric.wait_connected(2, Duration::from_secs(5)).await,
            "a reconnects to the restarted b"
        );
        assert!(!a.fabric.not_listening(2), "b listens again");
        let env = Envelope::new(3, ECHO, Bytes::from_static(b"again"));
        assert_eq!(
            a.fabric
                .call(2, env.clone())
                .await
                .expect("call after restart"),
            echo_answer(2, 1, &env)
        );
        assert!(b2.fabric.wait_connected(1, Duration::from_secs(5)).await);
        assert_eq!(
            b2.fabric.call(1, env.clone()).await.expect("call back"),
            echo_answer(1, 2, &env)
        );
        assert!(a.fabric.stats().connects >= 2);

        b2.fabric.shutdown().await;
        a.fabric.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_started_peer_is_unreachable_at_once() {
    bounded(30, async {
        // Reserve a port, then free it so nothing listens there.
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let a = start(config(1).with_peer(2, free)).await;
        let started = Instant::now();
        assert_eq!(
            a.fabric.call(2, Envelope::default()).await,
            Err(CallError::Unreachable(2))
        );
        assert!(started.elapsed() < Duration::from_millis(500));
        a.fabric.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_time_out() {
    bounded(30, async {
        let nodes = mesh(2, |id| {
            let mut c = config(id);
            c.call_timeout = Duration::from_millis(200);
            c
        })
        .await;
        let started = Instant::now();
        assert_eq!(
            nodes[0]
                .fabric
                .call(2, Envelope::new(2_000, SLOW, Bytes::new()))
                .await,
            Err(CallError::Timeout)
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(190) && took < Duration::from_secs(1),
            "{took:?}"
        );
        // The link is still fine.
        assert!(nodes[0]
            .fabric
            .call(2, Envelope::new(0, ECHO, Bytes::new()))
            .await
            .is_ok());
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_blocked_partitions_and_heals() {
    bounded(60, async {
        let nodes = mesh(3, config).await;
        let (a, b, c) = (&nodes[0].fabric, &nodes[1].fabric, &nodes[2].fabric);
        let ping = Envelope::new(0, ECHO, Bytes::from_static(b"ping"));

        // Node 1 cuts node 2 off.
        let refused_before = a.stats().inbound_refused;
        a.set_blocked(2, true);
        assert!(a.is_blocked(2));
        let started = Instant::now();
        assert_eq!(
            a.call(2, ping.clone()).await,
            Err(CallError::Unreachable(2))
        );
        assert_eq!(a.send(2, ping.clone()), Err(CallError::Unreachable(2)));
        // From node 2's side the stream to node 1 was closed: calls fail too.
        assert_eq!(
            b.call(1, ping.clone()).await,
            Err(CallError::Unreachable(1))
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "partition failed slowly: {:?}",
            started.elapsed()
        );
        // While blocked, node 2 stays unable to reach node 1: it redials
        // (backoff 20 ms doubling) and node 1 refuses twice running.
        eventually(
            Duration::from_secs(5),
            "node 1 refuses node 2's redials",
            || a.stats().inbound_refused >= refused_before + 2,
        )
        .await;
        assert!(!b.is_connected(1));
        assert_eq!(
            b.call(1, ping.clone()).await,
            Err(CallError::Unreachable(1))
        );
        // A partition is not a process that is gone: node 1 listens and
        // refuses the stream, node 1 does not dial node 2 at all.
        assert!(!b.not_listening(1));
        assert!(!a.not_listening(2));
        // Other links are untouched.
        assert!(a.call(3, ping.clone()).await.is_ok());
        assert!(c.call(2, ping.clone()).await.is_ok());
        assert!(b.call(3, ping.clone()).await.is_ok());

        // Heal.
        a.set_blocked(2, false);
        assert!(a.wait_connected(2, Duration::from_secs(5)).await);
        assert!(b.wait_connected(1, Duration::from_secs(5)).await);
        assert_eq!(
            a.call(2, ping.clone()).await.expect("healed a->b"),
            echo_answer(2, 1, &ping)
        );
        assert_eq!(
            b.call(1, ping.clone()).await.expect("healed b->a"),
            echo_answer(1, 2, &ping)
        );
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_can_be_removed_and_added_back() {
    bounded(30, async {
        let nodes = mesh(3, config).await;
        let a = &nodes[0].fabric;
        let ping = Envelope::new(0, ECHO, Bytes::from_static(b"p"));
        let addr2 = nodes[1].fabric.local_addr();
        assert_eq!(
            a.peers().into_iter().collect::<Vec<_>>(),
            vec![(2, addr2), (3, nodes[2].fabric.local_addr())]
        );
        a.remove_peer(2);
        assert_eq!(a.peers().keys().copied().collect::<Vec<_>>(), vec![3]);
        assert_eq!(
            a.call(2, ping.clone()).await,
            Err(CallError::Unreachable(2))
        );
        assert!(a.link_state(2).is_none());
        a.add_peer(2, addr2);
        assert!(a.wait_connected(2, Duration::from_secs(5)).await);
        assert_eq!(
            a.call(2, ping.clone()).await.expect("re-added"),
            echo_answer(2, 1, &ping)
        );
        // close() through a shared reference: everything fails Closed after.
        let shared = std::sync::Arc::new(nodes.into_iter().next().unwrap().fabric);
        shared.close().await;
        assert_eq!(shared.call(3, ping.clone()).await, Err(CallError::Closed));
        assert_eq!(shared.send(3, ping), Err(CallError::Closed));
        shared.close().await;
    })
    .await;
}

/// Listening address override for a restart on the same port.
trait TapListen {
    fn tap_listen(self, addr: std::net::SocketAddr) -> Self;
}

impl TapListen for ramqpd_fabric::FabricConfig {
    fn tap_listen(mut self, addr: std::net::SocketAddr) -> Self {
        self.listen = addr;
        self
    }
}
