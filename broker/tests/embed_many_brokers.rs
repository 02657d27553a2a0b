//! Guards the embedding API: several brokers run in one process, each on
//! its own ephemeral port with its own data directory and queues, serving
//! clients independently; shutting one down closes its client connections
//! (amqp:connection:forced, then EOF; a third-party client sees the
//! connection end), frees its port, and leaves the others running.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use ramqpd_broker::codec::definitions::condition;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_serve_independently() {
    let mut brokers = Vec::new();
    for _ in 0..3 {
        brokers.push(start().await);
    }
    let ports: BTreeSet<u16> = brokers.iter().map(|b| b.local_addr().port()).collect();
    assert_eq!(ports.len(), 3, "distinct ephemeral ports");
    assert!(brokers.iter().all(|b| b.local_addr().port() != 0));
    assert!(brokers.iter().all(|b| b.local_addr().ip().is_loopback()));
    let dirs: BTreeSet<_> = brokers.iter().map(|b| b.data_dir().to_path_buf()).collect();
    assert_eq!(dirs.len(), 3, "distinct data directories");
    assert!(dirs.iter().all(|d| d.is_dir()));

    // The same queue name on each broker: three separate queues.
    let mut clients = Vec::new();
    for (i, broker) in brokers.iter().enumerate() {
        assert_eq!(broker.url(), format!("amqp://{}", broker.local_addr()));
        let mut connection = connect(broker, &format!("client-{i}")).await;
        let mut session = begin_session(&mut connection).await;
        let mut tx = attach_sender(&mut session, "tx", "shared").await;
        for n in 0..=i {
            send_text(&mut tx, &format!("broker {i} message {n}")).await;
        }
        clients.push((connection, session, tx));
    }
    for (i, broker) in brokers.iter().enumerate() {
        assert_eq!(depth(broker, "shared"), Some((i + 1, 0, 0)), "broker {i}");
    }
    for (i, (_, session, _)) in clients.iter_mut().enumerate() {
        let mut rx = attach_receiver(session, "rx", "shared", 10).await;
        for n in 0..=i {
            let (delivery, text) = recv_text(&mut rx).await;
            assert_eq!(text, format!("broker {i} message {n}"));
            step("accept", rx.accept(&delivery)).await.unwrap();
        }
        expect_nothing(
            &mut rx,
            Duration::from_millis(100),
            "only this broker's messages",
        )
        .await;
        step("close rx", rx.close()).await.unwrap();
    }

    // Stop them one at a time; the others keep serving.
    let mut remaining: Vec<_> = brokers.into_iter().zip(clients).collect();
    while let Some((broker, (mut connection, mut session, tx))) = remaining.pop() {
        step("close tx", tx.close()).await.unwrap();
        step("end", session.end()).await.unwrap();
        step("close", connection.close()).await.unwrap();
        let addr = broker.local_addr();
        stop(broker).await;
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "a stopped broker no longer accepts"
        );
        for (other, _) in &remaining {
            assert_serves(other, "still-up").await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_clients_and_frees_the_port() {
    let broker = start().await;
    let addr = broker.local_addr();
    let data_dir = broker.data_dir().to_path_buf();

    // A third-party client with a receiver waiting for a message.
    let mut connection = connect(&broker, "victim").await;
    let mut session = begin_session(&mut connection).await;
    let mut rx = attach_receiver(&mut session, "rx", "waiting", 5).await;
    let (parked_tx, parked) = tokio::sync::oneshot::channel();
    let waiting = tokio::spawn(async move {
        let result = {
            let recv = rx.recv::<AnyBody>();
            tokio::pin!(recv);
            // Poll the receive once before telling the test, so the
            // shutdown below wakes a receive that is really pending rather
            // than failing one that starts after the connection is gone.
            tokio::select! {
                biased;
                result = &mut recv => result,
                () = std::future::ready(()) => {
                    let _ = parked_tx.send(());
                    recv.await
                }
            }
        };
        (rx, result)
    });
    // A raw client, to see the exact close.
    let mut raw = Raw::connect(addr).await;
    raw.open().await;
    raw.begin(0).await;
    step("the receive is pending", parked)
        .await
        .expect("the receiver task is parked in recv");
    eventually(
        Duration::from_secs(5),
        "the broker has the consumer",
        || depth(&broker, "waiting").map(|d| d.2) == Some(1),
    )
    .await;

    let observe = async {
        raw.expect_close_with(condition::CONNECTION_FORCED).await;
        raw.expect_eof().await;
        let closed = step("fe2o3 sees the connection end", connection.on_close()).await;
        let (_rx, received) = step("waiting receiver wakes up", waiting).await.unwrap();
        (closed, received)
    };
    let started = std::time::Instant::now();
    let ((), (closed, received)) = tokio::join!(stop(broker), observe);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(
        closed.is_err(),
        "closed by the broker with an error: {closed:?}"
    );
    assert!(received.is_err(), "the pending receive fails: {received:?}");
    drop(session);

    // The port is free: nothing answers, and it can be bound again.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    let rebound = tokio::net::TcpListener::bind(addr).await;
    assert!(
        rebound.is_ok(),
        "port {} can be bound again: {rebound:?}",
        addr.port()
    );
    // The temporary data directory is gone with the broker.
    assert!(!data_dir.exists(), "{} was removed", data_dir.display());
}
