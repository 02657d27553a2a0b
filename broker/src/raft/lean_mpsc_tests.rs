//! Tests of `lean_mpsc.rs` beyond openraft-rt's conformance suite (which
//! `lean_runtime.rs` runs): what it shares, that a drained queue gives
//! its buffer back, a waiting sender failing when the receiver goes, and
//! senders racing the receiver on two worker threads.

use super::*;

#[test]
fn shares_a_fraction_of_tokios_channel_and_sends_a_pointer() {
    // tokio's `Chan` alone is 384 bytes (three cache-padded parts) before
    // its first block of slots.
    let lean = size_of::<Shared<[u8; 288]>>();
    assert!(lean <= 160, "{lean} bytes");
    // A task waiting in `send` holds the box, not the message.
    let (tx, _rx) = LeanMpsc::channel::<[u8; 288]>(1);
    let sending = tx.send([0; 288]);
    assert!(
        size_of_val(&sending) < 288,
        "{} bytes",
        size_of_val(&sending)
    );
}

#[tokio::test]
async fn a_drained_queue_gives_its_buffer_back() {
    let (tx, mut rx) = LeanMpsc::channel::<[u8; 160]>(64);
    for i in 0..40u8 {
        tx.send([i; 160]).await.map_err(|_| "closed").unwrap();
    }
    assert!(rx.0.lock().items.capacity() >= 40);
    for i in 0..40u8 {
        assert_eq!(rx.recv().await.map(|m| m[0]), Some(i));
    }
    assert_eq!(rx.0.lock().items.capacity(), 0);

    // A small buffer stays: no allocation for it per message.
    tx.send([0; 160]).await.map_err(|_| "closed").unwrap();
    assert!(rx.recv().await.is_some());
    assert!(rx.0.lock().items.capacity() > 0);
}

#[tokio::test]
async fn a_waiting_sender_fails_with_its_message_when_the_receiver_goes() {
    let (tx, rx) = LeanMpsc::channel::<u32>(1);
    tx.send(1).await.map_err(|_| "closed").unwrap();
    let mut waiting = std::pin::pin!(tx.send(2));
    assert!(futures_util::poll!(waiting.as_mut()).is_pending());
    drop(rx);
    let got = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("the waiting sender was not woken");
    assert_eq!(got.map_err(|e| e.0), Err(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_senders_deliver_everything_in_order_then_close() {
    const SENDERS: u32 = 4;
    const EACH: u32 = 20_000;
    let (tx, mut rx) = LeanMpsc::channel::<(u32, u32)>(8);
    let mut tasks = Vec::new();
    for s in 0..SENDERS {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..EACH {
                if tx.send((s, i)).await.is_err() {
                    return;
                }
            }
        }));
    }
    drop(tx);
    let receiving = tokio::spawn(async move {
        let mut next = [0u32; SENDERS as usize];
        while let Some((s, i)) = rx.recv().await {
            // Each sender's messages arrive in the order it sent them.
            assert_eq!(next[s as usize], i, "sender {s}");
            next[s as usize] += 1;
        }
        next
    });
    let next = tokio::time::timeout(std::time::Duration::from_secs(60), receiving)
        .await
        .expect("the receiver never saw the close")
        .expect("the receiver panicked");
    assert_eq!(next, [EACH; SENDERS as usize]);
    for task in tasks {
        task.await.expect("a sender panicked");
    }
}
