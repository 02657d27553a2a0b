//! Three fabrics in one process over real TCP: round trips, multiplexing of
//! many concurrent calls, batching, one-way ordering, size limits, the
//! client-only connection and cluster-name checks.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ramqpd_fabric::{CallError, Client, ClientConfig, Envelope, FabricError, LinkState};
use tokio::task::JoinSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_round_trip_both_ways() {
    bounded(30, async {
        let nodes = mesh(3, config).await;
        for a in &nodes {
            for b in &nodes {
                let (from, to) = (a.fabric.node_id(), b.fabric.node_id());
                if from == to {
                    continue;
                }
                let env = Envelope::new(7, ECHO, Bytes::from_static(b"hello"))
                    .with_meta(Bytes::from_static(b"m"));
                let answer = a.fabric.call(to, env.clone()).await.expect("call");
                assert_eq!(answer, echo_answer(to, from, &env));
                let err = a
                    .fabric
                    .call(to, Envelope::new(1, FAIL, Bytes::new()))
                    .await;
                assert_eq!(err, Err(CallError::Remote("boom".into())));
            }
        }
        // Unknown peer: fails at once.
        let before = nodes[0].fabric.stats();
        assert_eq!(
            nodes[0].fabric.call(99, Envelope::default()).await,
            Err(CallError::Unreachable(99))
        );
        let after = nodes[0].fabric.stats();
        assert_eq!(after.calls_failed, before.calls_failed + 1);
        // Node 1 made two calls to each of two peers, one answered "boom"
        // each; every call carried a 5-byte payload and a 1-byte meta.
        assert_eq!(before.calls_failed, 2);
        assert!(before.bytes_sent >= 2 * 6, "{before:?}");
        assert!(before.bytes_received >= 2 * 6, "{before:?}");
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_concurrent_calls_are_multiplexed_and_batched() {
    bounded(60, async {
        let nodes = mesh(3, config).await;
        let before = nodes[0].fabric.stats();
        let mut set = JoinSet::new();
        for i in 0..10_000u64 {
            let target = 2 + (i % 2);
            let env = Envelope::new(i, ECHO, Bytes::from(i.to_le_bytes().to_vec()));
            let expect = echo_answer(target, 1, &env);
            let call = nodes[0].fabric.call(target, env);
            set.spawn(async move { (call.await, expect) });
        }
        let mut ok = 0;
        while let Some(joined) = set.join_next().await {
            let (answer, expect) = joined.expect("task");
            assert_eq!(answer.expect("call"), expect);
            ok += 1;
        }
        assert_eq!(ok, 10_000);
        let after = nodes[0].fabric.stats();
        let frames = after.frames_sent - before.frames_sent;
        let batches = after.batches_sent - before.batches_sent;
        println!("node 1 sent {frames} frames in {batches} batches");
        assert_eq!(frames, 10_000);
        assert!(
            batches < frames,
            "batching: {batches} batches for {frames} frames"
        );
        // All of it went over the one stream per peer opened at start.
        assert_eq!(
            after.connects, 2,
            "one outbound stream per peer, no redials"
        );
        // The answers were batched too.
        let s2 = nodes[1].fabric.stats();
        assert!(s2.batches_sent < s2.frames_sent, "answers batched: {s2:?}");
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_way_messages_arrive_in_order() {
    bounded(60, async {
        let mut nodes = mesh(3, config).await;
        const N: u64 = 50_000;
        let mut backpressure = 0u64;
        // Nodes 1 and 3 both send to node 2, interleaved; each one's order
        // must hold. A full queue answers Backpressure: yield and retry.
        let mut seq = [0u64; 2];
        while seq[0] < N || seq[1] < N {
            for (k, idx) in [(0usize, 0usize), (1, 2)] {
                if seq[k] == N {
                    continue;
                }
                let channel = nodes[idx].fabric.node_id();
                let env = Envelope::new(channel, 9, Bytes::from(seq[k].to_be_bytes().to_vec()));
                match nodes[idx].fabric.send(2, env) {
                    Ok(()) => seq[k] += 1,
                    Err(CallError::Backpressure) => {
                        backpressure += 1;
                        tokio::task::yield_now().await;
                    }
                    Err(e) => panic!("send {}: {e}", seq[k]),
                }
            }
        }
        let mut next: HashMap<u64, u64> = HashMap::new();
        let mut got = 0;
        while got < 2 * N {
            let (from, env) = nodes[1].messages.recv().await.expect("message");
            assert_eq!(env.channel, from, "channel tags the sender");
            let seq = u64::from_be_bytes(env.payload[..8].try_into().unwrap());
            let want = next.entry(from).or_insert(0);
            assert_eq!(seq, *want, "in order from {from}");
            *want += 1;
            got += 1;
        }
        let s1 = nodes[0].fabric.stats();
        println!("backpressure retries: {backpressure}; node 1 stats {s1:?}");
        assert!(s1.batches_sent < s1.frames_sent);
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_limits_are_enforced_on_both_sides() {
    bounded(60, async {
        const MAX: usize = 4 * 1024 * 1024;
        let nodes = mesh(2, |id| {
            let mut c = config(id);
            // Node 1 is misconfigured with a larger limit than node 2.
            c.max_message_bytes = if id == 1 { 4 * MAX } else { MAX };
            c
        })
        .await;
        let (a, b) = (&nodes[0].fabric, &nodes[1].fabric);
        // Near the max: fine (node 2 -> node 1 and node 1 -> node 2).
        let near = Envelope::new(1, ECHO, Bytes::from(vec![7u8; MAX - 100]))
            .with_meta(Bytes::from_static(b"meta"));
        let answer = b.call(1, near.clone()).await.expect("near-max call");
        assert_eq!(answer, echo_answer(1, 2, &near));
        // Over the max: refused locally before sending.
        let over = Envelope::new(1, ECHO, Bytes::from(vec![0u8; MAX + 1]));
        assert_eq!(
            b.call(1, over.clone()).await,
            Err(CallError::TooLarge {
                size: MAX + 1,
                max: MAX
            })
        );
        assert_eq!(
            b.send(1, over.clone()),
            Err(CallError::TooLarge {
                size: MAX + 1,
                max: MAX
            })
        );
        // The misconfigured node 1 sends node 2 slightly too much: node 2's
        // per-frame check refuses it with an error answer.
        match a.call(2, over).await {
            Err(CallError::Remote(text)) => assert!(text.contains("over the limit"), "{text}"),
            other => panic!("expected a remote refusal, got {other:?}"),
        }
        // ... and far too much: node 2's codec refuses the whole batch, the
        // stream breaks, the call fails, and the link recovers.
        let huge = Envelope::new(1, ECHO, Bytes::from(vec![0u8; 2 * MAX]));
        assert_eq!(a.call(2, huge).await, Err(CallError::Unreachable(2)));
        assert!(a.wait_connected(2, Duration::from_secs(5)).await);
        let small = Envelope::new(1, ECHO, Bytes::from_static(b"x"));
        assert_eq!(
            a.call(2, small.clone()).await.expect("after recovery"),
            echo_answer(2, 1, &small)
        );
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_calls_a_node_and_wrong_cluster_is_refused() {
    bounded(30, async {
        let nodes = mesh(2, config).await;
        let addr = nodes[0].fabric.local_addr();
        // A client (node 0) calls node 1.
        let client = Client::connect(addr, CLUSTER)
            .await
            .expect("client connects");
        let env = Envelope::new(5, ECHO, Bytes::from_static(b"admin"));
        assert_eq!(
            client.call(env.clone()).await.expect("client call"),
            echo_answer(1, 0, &env)
        );
        client.close().await;
        // A client with the wrong cluster name is refused.
        match Client::connect(addr, "other-cluster").await {
            Err(FabricError::Refused(reason)) => assert!(reason.contains("cluster"), "{reason}"),
            other => panic!("expected refusal, got {other:?}"),
        }
        // Nobody listening: a connect error, promptly.
        let mut cfg = ClientConfig::new("127.0.0.1:1".parse().unwrap(), CLUSTER);
        cfg.connect_timeout = Duration::from_millis(500);
        assert!(matches!(
            Client::connect_with(cfg).await,
            Err(FabricError::Connect(_))
        ));
        // A node of another cluster is refused too, and can't call.
        let mut c = config(3);
        c.cluster_name = "other-cluster".into();
        let stranger = start(c.with_peer(1, addr)).await;
        let mut state = None;
        for _ in 0..100 {
            state = stranger.fabric.link_state(1);
            if matches!(state, Some(LinkState::Refused(_))) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(matches!(state, Some(LinkState::Refused(_))), "{state:?}");
        assert!(nodes[0].fabric.stats().inbound_refused >= 2);
        assert_eq!(
            stranger.fabric.call(1, Envelope::default()).await,
            Err(CallError::Unreachable(1))
        );
        stranger.fabric.shutdown().await;
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_of_different_wire_versions_refuse_each_other() {
    bounded(30, async {
        let mut c = config(1);
        c.wire_version = 7;
        let old = start(c).await;
        let addr = old.fabric.local_addr();
        // A node of the next version dials it: refused, and the reason
        // names both versions, so the operator sees what is wrong.
        let mut c = config(2);
        c.wire_version = 8;
        let new = start(c.with_peer(1, addr)).await;
        eventually(Duration::from_secs(10), "the stream refused", || {
            matches!(new.fabric.link_state(1), Some(LinkState::Refused(_)))
        })
        .await;
        match &new.fabric.link_state(1) {
            Some(LinkState::Refused(reason)) => {
                assert!(reason.contains("wire version mismatch"), "{reason}");
                assert!(reason.contains("1.8") && reason.contains("1.7"), "{reason}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Nothing it sends is ever handed to the other node's handler.
        assert_eq!(
            new.fabric
                .call(1, Envelope::new(0, ECHO, Bytes::from_static(b"x")))
                .await,
            Err(CallError::Unreachable(1))
        );
        assert!(old.fabric.stats().inbound_refused >= 1);
        // A client of another version is refused at connect; one of the
        // same version is served.
        let mut cfg = ClientConfig::new(addr, CLUSTER);
        cfg.wire_version = 8;
        match Client::connect_with(cfg.clone()).await {
            Err(FabricError::Refused(reason)) => {
                assert!(reason.contains("wire version mismatch"), "{reason}")
            }
            other => panic!("expected refusal, got {other:?}"),
        }
        cfg.wire_version = 7;
        let client = Client::connect_with(cfg)
            .await
            .expect("same version connects");
        let env = Envelope::new(5, ECHO, Bytes::from_static(b"v7"));
        assert_eq!(
            client.call(env.clone()).await.expect("call"),
            echo_answer(1, 0, &env)
        );
        client.close().await;
        new.fabric.shutdown().await;
        old.fabric.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_does_not_break_the_stream() {
    bounded(30, async {
        let mut nodes = mesh(2, config).await;
        let a = &nodes[0].fabric;
        assert_eq!(
            a.call(2, Envelope::new(0, PANIC, Bytes::new())).await,
            Err(CallError::Remote("handler panicked".into()))
        );
        a.send(2, Envelope::new(0, PANIC, Bytes::new()))
            .expect("send");
        a.send(2, Envelope::new(1, 9, Bytes::from_static(b"after")))
            .expect("send");
        let (from, env) = nodes[1]
            .messages
            .recv()
            .await
            .expect("message after the panic");
        assert_eq!((from, env.payload), (1, Bytes::from_static(b"after")));
        let ping = Envelope::new(0, ECHO, Bytes::from_static(b"p"));
        assert_eq!(
            nodes[0]
                .fabric
                .call(2, ping.clone())
                .await
                .expect("still up"),
            echo_answer(2, 1, &ping)
        );
        assert_eq!(nodes[0].fabric.stats().connects, 1);
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_reach_the_handler_in_the_order_they_were_sent() {
    bounded(30, async {
        let nodes = mesh(2, config).await;
        let a = &nodes[0].fabric;
        // Made in order (fewer than the outbound queue holds): the frames
        // leave in that order, and `Handler::call` must be invoked in it too,
        // though the answers may come back in any order. (Queued at first
        // poll instead, tokio's co-operative budget reorders them.)
        let n = 2_000u64;
        let calls: Vec<_> = (0..n)
            .map(|i| a.call(2, Envelope::new(i, ORDERED, Bytes::new())))
            .collect();
        for answer in futures_util::future::join_all(calls).await {
            answer.expect("answered");
        }
        let order = nodes[1].handler.call_order.lock().expect("lock").clone();
        assert_eq!(order, (0..n).collect::<Vec<_>>());
        // A panic before the handler's future is made is caught as well.
        assert_eq!(
            a.call(2, Envelope::new(0, PANIC_EARLY, Bytes::new())).await,
            Err(CallError::Remote("handler panicked".into()))
        );
        let ping = Envelope::new(0, ECHO, Bytes::from_static(b"p"));
        assert_eq!(
            a.call(2, ping.clone()).await.expect("still up"),
            echo_answer(2, 1, &ping)
        );
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}
