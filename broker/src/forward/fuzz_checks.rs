//! The check the `forward_protocol` fuzz target (and the corpus replay
//! test) runs on `protocol::decode`, the decoder of every forwarding
//! envelope's meta and of the answers to forwarding calls. It lives here
//! because the forwarding messages are private to `forward`;
//! `crate::fuzz_checks` is its public face.
//!
//! It must not know how the messages are acted on.

use super::protocol::{decode, Reply, Request, Shipment, ToServer};
use crate::raft::fuzz_checks::postcard_round_trip;

/// The first byte picks what the rest is decoded as: a call
/// (`Request`), its answer (`Reply`), link traffic to the serving node
/// (`ToServer`) or back to the origin (`Shipment`).
pub(crate) fn protocol(data: &[u8]) {
    let Some((&selector, meta)) = data.split_first() else {
        return;
    };
    match selector % 4 {
        0 => postcard_round_trip::<Request, _>(meta, decode),
        1 => postcard_round_trip::<Reply, _>(meta, decode),
        2 => postcard_round_trip::<ToServer, _>(meta, decode),
        _ => postcard_round_trip::<Shipment, _>(meta, decode),
    };
}

/// One valid input per message type, from the real encoder.
pub(crate) fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use super::protocol::{StreamId, ToOrigin, WireOptions};
    use crate::queue::Outcome;
    let stream = StreamId {
        incarnation: 1_700_000_000,
        generation: 2,
    };
    use crate::codec::{Symbol, Value};
    let mut filter = bytes::BytesMut::new();
    Value::Map(vec![(
        Value::Symbol(Symbol::from("f")),
        Value::String("a = 1".to_owned()),
    )])
    .encode(&mut filter);
    let options = WireOptions {
        filter: Some(filter.to_vec()),
        priority: 5,
        registered: Some(3 << 32),
    };
    // (first byte: what the rest is decoded as, see `protocol`; encoding)
    let encoded = [
        (
            0u8,
            postcard::to_allocvec(&Request::Probe {
                address: "/quorum/orders".to_owned(),
                links: vec![1, 2, 300],
            }),
        ),
        (
            1,
            postcard::to_allocvec(&Reply::Probed {
                serves: false,
                leader: Some(2),
                leader_heard_ms: Some(120),
                unknown: vec![300],
                shipped: (stream, 41),
            }),
        ),
        (
            2,
            postcard::to_allocvec(&ToServer::Settle {
                link: 1,
                message: 5 << 16,
                outcome: Outcome::Modified {
                    delivery_failed: true,
                    undeliverable_here: false,
                },
            }),
        ),
        (
            3,
            postcard::to_allocvec(&Shipment {
                stream,
                seq: 42,
                message: ToOrigin::Deliver {
                    link: 1,
                    message: 5 << 16,
                    delivery_count: 1,
                    redelivered: true,
                },
            }),
        ),
        (
            3,
            postcard::to_allocvec(&Shipment {
                stream,
                seq: 43,
                message: ToOrigin::Registered {
                    link: 2,
                    stamp: 3 << 32,
                },
            }),
        ),
        (
            2,
            postcard::to_allocvec(&ToServer::SubscribeWith {
                link: 2,
                address: "/quorum/orders".to_owned(),
                options,
            }),
        ),
    ];
    encoded
        .into_iter()
        .filter_map(|(selector, bytes)| {
            Some(("forward_protocol", [&[selector][..], &bytes.ok()?].concat()))
        })
        .collect()
}
