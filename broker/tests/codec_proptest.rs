//! Property tests: arbitrary values and hot-path performatives survive an
//! encode/decode round trip, and no decoder panics on arbitrary bytes or on
//! valid encodings with bytes flipped, cut or inserted.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use ramqpd_broker::codec::frame::{decode_frame, encode_amqp_frame};
use ramqpd_broker::codec::{
    Array, DeliveryState, Descriptor, Disposition, Error, Flow, MessageView, Performative,
    ReceiverSettleMode, Role, SaslFrame, Symbol, Transfer, Value,
};

fn symbol() -> impl Strategy<Value = Symbol> {
    prop_oneof![
        "[ -~]{0,20}".prop_map(Symbol),
        "[a-z]{256,300}".prop_map(Symbol),
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![".{0,20}", "[a-z]{250,300}"]
}

fn binary() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::from)
}

fn descriptor() -> impl Strategy<Value = Descriptor> {
    prop_oneof![
        any::<u64>().prop_map(Descriptor::Code),
        symbol().prop_map(Descriptor::Symbol)
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u8>().prop_map(Value::Ubyte),
        any::<u16>().prop_map(Value::Ushort),
        any::<u32>().prop_map(Value::Uint),
        (0u32..300).prop_map(Value::Uint),
        any::<u64>().prop_map(Value::Ulong),
        any::<i8>().prop_map(Value::Byte),
        any::<i16>().prop_map(Value::Short),
        any::<i32>().prop_map(Value::Int),
        any::<i64>().prop_map(Value::Long),
        any::<f32>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(Value::Float),
        any::<f64>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(Value::Double),
        any::<[u8; 4]>().prop_map(Value::Decimal32),
        any::<[u8; 8]>().prop_map(Value::Decimal64),
        any::<[u8; 16]>().prop_map(Value::Decimal128),
        any::<char>().prop_map(Value::Char),
        any::<i64>().prop_map(Value::Timestamp),
        any::<[u8; 16]>().prop_map(Value::Uuid),
        binary().prop_map(Value::Binary),
        string().prop_map(Value::String),
        symbol().prop_map(Value::Symbol),
    ]
}

/// An array with the element constructor the encoder picks (the smallest
/// that fits all elements), so that a round trip compares equal.
fn array(inner: impl Strategy<Value = Value> + Clone) -> impl Strategy<Value = Array> {
    let n = 0..20usize;
    let items = prop_oneof![
        prop::collection::vec(any::<u32>(), n.clone()).prop_map(|v| {
            let code = if v.iter().all(|&x| x <= 255) {
                0x52
            } else {
                0x70
            };
            (code, v.into_iter().map(Value::Uint).collect::<Vec<_>>())
        }),
        prop::collection::vec(any::<i64>(), n.clone()).prop_map(|v| {
            let code = if v.iter().all(|&x| i8::try_from(x).is_ok()) {
                0x55
            } else {
                0x81
            };
            (code, v.into_iter().map(Value::Long).collect())
        }),
        prop::collection::vec(any::<bool>(), n.clone())
            .prop_map(|v| (0x56, v.into_iter().map(Value::Bool).collect())),
        prop::collection::vec(any::<[u8; 16]>(), n.clone())
            .prop_map(|v| (0x98, v.into_iter().map(Value::Uuid).collect())),
        prop::collection::vec(symbol(), n.clone()).prop_map(|v| {
            let code = if v.iter().all(|s| s.0.len() <= 255) {
                0xa3
            } else {
                0xb3
            };
            (code, v.into_iter().map(Value::Symbol).collect())
        }),
        prop::collection::vec(string(), n.clone()).prop_map(|v| {
            let code = if v.iter().all(|s| s.len() <= 255) {
                0xa1
            } else {
                0xb1
            };
            (code, v.into_iter().map(Value::String).collect())
        }),
        prop::collection::vec(prop::collection::vec(inner, 0..4), 0..4)
            .prop_map(|v| (0xd0, v.into_iter().map(Value::List).collect())),
    ];
    (prop::option::of(descriptor()), items).prop_map(|(descriptor, (format_code, items))| Array {
        descriptor,
        format_code,
        items,
    })
}

fn value() -> impl Strategy<Value = Value> {
    // Large lists (more than 255 elements: the list32 form) of scalars only,
    // to keep the generated trees small.
    let leaf = prop_oneof![
        8 => scalar(),
        1 => prop::collection::vec(scalar(), 255..260).prop_map(Value::List),
    ];
    leaf.prop_recursive(3, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
            prop::collection::vec((inner.clone(), inner.clone()), 0..6).prop_map(Value::Map),
            array(inner.clone()).prop_map(Value::Array),
            (descriptor(), inner).prop_map(|(d, v)| Value::Described(Box::new((d, v)))),
        ]
    })
}

fn delivery_state() -> impl Strategy<Value = DeliveryState> {
    prop_oneof![
        (any::<u32>(), any::<u64>()).prop_map(|(section_number, section_offset)| {
            DeliveryState::Received {
                section_number,
                section_offset,
            }
        }),
        Just(DeliveryState::Accepted),
        prop::option::of((symbol(), prop::option::of(string()))).prop_map(|error| {
            DeliveryState::Rejected {
                error: error.map(|(condition, description)| Error {
                    condition,
                    description,
                    info: None,
                }),
            }
        }),
        Just(DeliveryState::Released),
        (
            any::<bool>(),
            any::<bool>(),
            prop::option::of(prop::collection::vec((symbol(), scalar()), 0..3))
        )
            .prop_map(
                |(delivery_failed, undeliverable_here, message_annotations)| {
                    DeliveryState::Modified {
                        delivery_failed,
                        undeliverable_here,
                        message_annotations,
                    }
                }
            ),
    ]
}

fn transfer() -> impl Strategy<Value = Transfer> {
    (
        (
            any::<u32>(),
            prop::option::of(any::<u32>()),
            prop::option::of(binary()),
        ),
        (
            prop::option::of(any::<u32>()),
            prop::option::of(any::<bool>()),
            any::<bool>(),
        ),
        (
            prop::option::of(any::<bool>()),
            prop::option::of(delivery_state()),
        ),
        (any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(|(a, b, c, d)| Transfer {
            handle: a.0,
            delivery_id: a.1,
            delivery_tag: a.2,
            message_format: b.0,
            settled: b.1,
            more: b.2,
            rcv_settle_mode: c.0.map(|second| {
                if second {
                    ReceiverSettleMode::Second
                } else {
                    ReceiverSettleMode::First
                }
            }),
            state: c.1.map(Box::new),
            resume: d.0,
            aborted: d.1,
            batchable: d.2,
        })
}

fn flow() -> impl Strategy<Value = Flow> {
    let opt = || prop::option::of(any::<u32>());
    (
        (opt(), any::<u32>(), any::<u32>(), any::<u32>()),
        (opt(), opt(), opt(), opt()),
        (any::<bool>(), any::<bool>()),
        prop::option::of(prop::collection::vec((symbol(), scalar()), 0..3)),
    )
        .prop_map(|(a, b, c, properties)| Flow {
            next_incoming_id: a.0,
            incoming_window: a.1,
            next_outgoing_id: a.2,
            outgoing_window: a.3,
            handle: b.0,
            delivery_count: b.1,
            link_credit: b.2,
            available: b.3,
            drain: c.0,
            echo: c.1,
            properties,
        })
}

fn disposition() -> impl Strategy<Value = Disposition> {
    (
        any::<bool>(),
        any::<u32>(),
        prop::option::of(any::<u32>()),
        any::<bool>(),
        prop::option::of(delivery_state()),
        any::<bool>(),
    )
        .prop_map(
            |(receiver, first, last, settled, state, batchable)| Disposition {
                role: if receiver {
                    Role::Receiver
                } else {
                    Role::Sender
                },
                first,
                last,
                settled,
                state,
                batchable,
            },
        )
}

fn performative() -> impl Strategy<Value = Performative> {
    prop_oneof![
        transfer().prop_map(Performative::Transfer),
        flow().prop_map(Performative::Flow),
        disposition().prop_map(Performative::Disposition),
    ]
}

/// Run every decoder over `bytes`; only panics matter.
fn decode_everything(bytes: &[u8]) {
    let input = Bytes::copy_from_slice(bytes);
    let _ = Value::decode(&mut input.clone());
    let _ = Performative::decode(&mut input.clone());
    let _ = SaslFrame::decode(&mut input.clone());
    let _ = DeliveryState::decode(&mut input.clone());
    let _ = MessageView::scan(&input);
    for max in [512, 64 * 1024] {
        let mut buf = BytesMut::from(bytes);
        while let Ok(Some(_)) = decode_frame(&mut buf, max) {}
    }
}

proptest! {
    #[test]
    fn value_roundtrip(v in value()) {
        let mut out = BytesMut::new();
        v.encode(&mut out);
        let mut bytes = out.freeze();
        let decoded = Value::decode(&mut bytes).unwrap();
        prop_assert_eq!(decoded, v);
        prop_assert!(bytes.is_empty());
    }

    #[test]
    fn hot_path_performatives_roundtrip(p in performative(), channel in any::<u16>()) {
        let mut out = BytesMut::new();
        p.encode(&mut out);
        let mut bytes = out.clone().freeze();
        prop_assert_eq!(Performative::decode(&mut bytes).unwrap(), p.clone());
        prop_assert!(bytes.is_empty());

        let mut framed = BytesMut::new();
        encode_amqp_frame(&mut framed, channel, &p, 0);
        let frame = decode_frame(&mut framed, u32::MAX).unwrap().unwrap();
        prop_assert_eq!(frame.channel, channel);
        prop_assert!(framed.is_empty());
    }

    #[test]
    fn mutated_encodings_never_panic(
        p in performative(),
        v in value(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut framed = BytesMut::new();
        encode_amqp_frame(&mut framed, 0, &p, 0);
        let mut value = BytesMut::new();
        v.encode(&mut value);
        for encoded in [framed, value] {
            let mut bytes = encoded.to_vec();
            for (at, byte) in &flips {
                let i = at.index(bytes.len());
                bytes[i] = *byte;
            }
            decode_everything(&bytes);
            decode_everything(&bytes[..cut.index(bytes.len() + 1)]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        decode_everything(&bytes);
    }

    #[test]
    fn decoders_never_panic_on_plausible_prefixes(
        prefix in prop::sample::select(vec![
            vec![0x00, 0x53, 0x14],
            vec![0x00, 0x53, 0x13, 0xc0],
            vec![0x00, 0x53, 0x12, 0xd0],
            vec![0x00, 0x53, 0x75],
            vec![0x00, 0x53, 0x70, 0xc0],
            vec![0x00, 0x53, 0x40],
            vec![0, 0, 0, 0x20, 2, 0, 0, 0, 0x00, 0x53, 0x10],
            vec![0, 0, 0, 0x20, 2, 1, 0, 0, 0x00, 0x53, 0x41],
            vec![0xe0],
            vec![0xf0],
            vec![0xd1],
        ]),
        rest in prop::collection::vec(any::<u8>(), 0..100),
    ) {
        decode_everything(&[prefix, rest].concat());
    }
}
