//! 1,000 quorum queues on a 3-node in-process cluster come up, spread their
//! leaders over the nodes, and each serves a publish through a real AMQP
//! client (fe2o3-amqp) on a sample and through the queue interface on all.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use fe2o3_amqp::{Connection, Receiver, Sender};
use ramqpd_broker::queue::{Message, Outcome, PublishConfirm, Queue, QueueEventKind, Sink};
use ramqpd_broker::{BrokerConfig, Cluster};

const N_QUEUES: usize = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_quorum_queues_come_up_and_serve() {
    let cluster = Cluster::start(3, BrokerConfig::default()).await.unwrap();
    let mut queues = Vec::with_capacity(N_QUEUES);
    for i in 0..N_QUEUES {
        let node = cluster.node((i % 3) as u64 + 1).unwrap();
        let queue = within(
            Duration::from_secs(30),
            "queue up",
            node.quorum().ensure(&format!("q{i}")),
        )
        .await
        .unwrap();
        queues.push(queue);
    }

    // Leaders are spread, not all on one node.
    let mut leaders = [0usize; 4];
    for queue in &queues {
        leaders[queue.leader().unwrap() as usize] += 1;
    }
    for (node, led) in leaders.iter().enumerate().skip(1) {
        assert!(
            *led > N_QUEUES / 10,
            "node {node} leads {led} of {N_QUEUES}"
        );
    }

    // Every queue commits a publish at its leader. A publish the leader
    // released (it went an election time-out without its quorum's
    // acknowledgements, which an overloaded 2-core machine running 1,000
    // groups in one process can cause: check-quorum in
    // quorum/leadership_watch.rs) is published again at the queue's
    // leader then, as a client would; any other outcome fails the test.
    let (sink, mut events) = Sink::channel();
    let body = Bytes::from_static(&[0x00, 0x53, 0x77, 0xa1, 4, b'p', b'i', b'n', b'g']);
    let publish = |token: usize| {
        let queue = &queues[token];
        let leader = cluster.node(queue.leader()?)?;
        let at_leader = leader.quorum().get(queue.address())?;
        let message = Message {
            bytes: body.clone(),
            header: None,
            header_len: 0,
        };
        let confirm = PublishConfirm {
            sink: sink.clone(),
            tag: 0,
            token: token as u64,
        };
        at_leader.publish(message, Some(confirm)).ok()
    };
    // A leader takes publishes once it has applied an entry of its own
    // term (quorum/leadership_watch.rs), moments after its election.
    for token in 0..N_QUEUES {
        if publish(token).is_none() {
            eventually(
                Duration::from_secs(30),
                "every queue has a leader that takes a publish",
                || publish(token).is_some(),
            )
            .await;
        }
    }
    let mut accepted = vec![false; N_QUEUES];
    let mut released = 0;
    while accepted.iter().any(|a| !a) {
        let event = within(Duration::from_secs(30), "publish outcomes", events.recv())
            .await
            .unwrap();
        if let QueueEventKind::Published { token, outcome } = event.kind {
            let token = token as usize;
            if outcome == Outcome::Released {
                released += 1;
                assert!(released <= N_QUEUES, "publishes released over and over");
                eventually(
                    Duration::from_secs(30),
                    "a leader takes the publish again",
                    || publish(token).is_some(),
                )
                .await;
                continue;
            }
            assert_eq!(outcome, Outcome::Accepted, "queue q{token}");
            accepted[token] = true;
        }
    }
    eprintln!("{N_QUEUES} publishes accepted; {released} released first and published again");

    // A sample through a real client at each queue's leader: the message
    // published above comes out.
    for i in (0..N_QUEUES).step_by(97) {
        let leader = queues[i].leader().unwrap();
        let url = format!("amqp://{}", cluster.addr(leader).unwrap());
        let mut connection = within(
            Duration::from_secs(5),
            "connect",
            Connection::open("c", url.as_str()),
        )
        .await
        .unwrap();
        let mut session = begin_session(&mut connection).await;
        let mut receiver = step(
            "attach",
            Receiver::attach(&mut session, "rx", format!("/quorum/q{i}")),
        )
        .await
        .unwrap();
        let delivery = step("receive", receiver.recv::<String>()).await.unwrap();
        assert_eq!(delivery.body(), "ping");
        step("accept", receiver.accept(&delivery)).await.unwrap();
        let mut sender = step(
            "attach",
            Sender::attach(&mut session, "tx", format!("/quorum/q{i}")),
        )
        .await
        .unwrap();
        send_text(&mut sender, "pong").await;
        let (delivery, text) = recv_text(&mut receiver).await;
        assert_eq!(text, "pong");
        step("accept", receiver.accept(&delivery)).await.unwrap();
        let _ = sender.close().await;
        let _ = receiver.close().await;
        let _ = session.end().await;
        let _ = connection.close().await;
    }
    cluster.shutdown().await;
}
