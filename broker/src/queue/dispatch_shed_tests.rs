//! A queue used once and left idle keeps no dispatcher tables: after its
//! consumer took a message, settled it and left (`shed.rs`).

use bytes::Bytes;

use super::*;
use crate::queue::{ConsumerOptions, Message, Outcome, Sink};

fn entry(id: MessageId) -> Entry {
    let message = Message {
        bytes: Bytes::from_static(b"x"),
        header: None,
        header_len: 0,
    };
    Entry::new(id, message)
}

#[test]
fn the_last_consumer_leaving_frees_the_tables_it_used() {
    let mut d = Dispatcher::default();
    let (sink, mut rx) = Sink::channel();
    let a = d.subscribe(sink, 1, ConsumerOptions::default());
    d.flow(a, 10, false);
    d.push(entry(1));
    assert!(rx.try_recv().is_ok(), "delivered");
    assert!(matches!(
        d.settle(a, 1, Outcome::Accepted),
        Settled::Removed(_)
    ));
    assert!(d.consumers.capacity() > 0 && d.out.capacity() > 0);
    d.unsubscribe(a);
    let held = (
        d.consumers.capacity(),
        d.out.capacity(),
        d.waiting.capacity(),
        d.ready.capacity(),
    );
    assert_eq!(held, (0, 0, 0, 0));
    // And it serves the next consumer as before.
    let (sink, mut rx) = Sink::channel();
    let b = d.subscribe(sink, 2, ConsumerOptions::default());
    d.flow(b, 10, false);
    d.push(entry(2));
    assert!(rx.try_recv().is_ok(), "delivered after the shed");
}

#[test]
fn a_consumer_leaving_keeps_what_the_others_still_use() {
    let mut d = Dispatcher::default();
    let (sink, _rx) = Sink::channel();
    let a = d.subscribe(sink.clone(), 1, ConsumerOptions::default());
    let b = d.subscribe(sink, 2, ConsumerOptions::default());
    d.flow(b, 10, false);
    d.push(entry(1));
    d.unsubscribe(a);
    assert_eq!(d.out.len(), 1, "b's delivery still out");
    assert_eq!(d.consumers.len(), 1);
    assert!(matches!(
        d.settle(b, 1, Outcome::Accepted),
        Settled::Removed(_)
    ));
}
