//! What the `many_queues` bin asks of the queues, over the raw client:
//! creating them by attaches, and checking that each serves (a message
//! published, confirmed, received and accepted). Both run over several
//! connections per node at once, each taking its share of the queues.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ramqp_bench_compare::raw::Connection;

/// The address of queue `i`.
pub fn address(prefix: &str, i: usize) -> String {
    format!("/quorum/{prefix}{i}")
}

/// Queues `0..n` split over `connections` connections of each node in
/// `ports` (queue `i` goes through node `i % nodes`): each connection's
/// list of queue indices and its node's AMQP port.
fn shares(n: usize, ports: &[u16], connections: usize) -> Vec<(u16, Vec<usize>)> {
    let mut out: Vec<(u16, Vec<usize>)> = Vec::new();
    for (k, port) in ports.iter().enumerate() {
        for c in 0..connections {
            let mine: Vec<usize> = (0..n)
                .filter(|i| i % ports.len() == k && (i / ports.len()) % connections == c)
                .collect();
            out.push((*port, mine));
        }
    }
    out
}

/// Create queues `0..n` by attaching a sender to each (then detaching it).
/// Returns the seconds it took.
pub async fn create(prefix: &str, n: usize, ports: &[u16], connections: usize) -> Result<f64> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (port, mine) in shares(n, ports, connections) {
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let url = format!("amqp://127.0.0.1:{port}");
            let mut conn =
                Connection::connect(&url, "many-create", Duration::from_secs(60)).await?;
            for i in mine {
                let address = address(&prefix, i);
                let sender = conn
                    .attach_sender(&format!("c{i}"), &address, false)
                    .await
                    .with_context(|| format!("attach {address}"))?;
                sender.detach(&mut conn).await?;
            }
            conn.close().await
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Check that each of the queues `0..n` serves through the given nodes:
/// publish one message (confirmed), receive it, accept it. A queue that
/// fails is tried again (new connection) until `deadline`. Returns the
/// seconds until every queue served.
pub async fn serve_all(
    prefix: &str,
    n: usize,
    ports: &[u16],
    connections: usize,
    within: Duration,
) -> Result<f64> {
    let started = Instant::now();
    let deadline = started + within;
    let mut tasks = Vec::new();
    for (port, mine) in shares(n, ports, connections) {
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let url = format!("amqp://127.0.0.1:{port}");
            let mut pending = mine;
            let mut last_error = String::new();
            while !pending.is_empty() {
                if Instant::now() > deadline {
                    bail!(
                        "{} queues via port {port} not served in time; last error: {last_error}",
                        pending.len()
                    );
                }
                let mut conn =
                    match Connection::connect(&url, "many-serve", Duration::from_secs(10)).await {
                        Ok(conn) => conn,
                        Err(e) => {
                            last_error = e.to_string();
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                while let Some(&i) = pending.last() {
                    match serve_one(&mut conn, &address(&prefix, i), i).await {
                        Ok(()) => {
                            pending.pop();
                        }
                        Err(e) => {
                            last_error = format!("queue {i}: {e:#}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            break; // a fresh connection for the retry
                        }
                    }
                }
                let _ = conn.close().await;
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

async fn serve_one(conn: &mut Connection, address: &str, i: usize) -> Result<()> {
    let receiver = conn.attach_receiver(&format!("r{i}"), address, 1).await?;
    let sender = conn.attach_sender(&format!("s{i}"), address, false).await?;
    let body = format!("many-{i}");
    sender.send(conn, body.as_bytes()).await?;
    sender.wait_settled(conn, 0).await?;
    let delivery = receiver.recv(conn).await?;
    let got = delivery.body()?;
    if got.as_ref() != body.as_bytes() {
        bail!("{address}: got {:?}, expected {body:?}", got);
    }
    receiver.accept(conn, &delivery);
    conn.flush().await?;
    sender.detach(conn).await?;
    receiver.detach(conn).await?;
    Ok(())
}
