//! Hand-written byte vectors from the spec's encodings (types 1.6, transport
//! 2.7): every primitive format code, the alternative forms peers may send
//! (symbolic descriptors, uint0/smalluint, list0/list32, a single symbol
//! where an array is allowed), and golden encodings of a few performatives
//! so that a change in what we put on the wire is noticed.

use bytes::{Bytes, BytesMut};
use ramqpd_broker::codec::frame::{decode_frame, encode_amqp_frame};
use ramqpd_broker::codec::{
    Array, Attach, Begin, Close, CodecError, DeliveryState, Descriptor, Detach, Disposition, Error,
    Flow, FrameBody, Header, Open, Performative, ReceiverSettleMode, Role, SaslFrame,
    SenderSettleMode, Source, Symbol, Transfer, Value,
};

// The coordinator tests live beside this file and share its helpers.
#[path = "codec_spec_bytes/coordinator.rs"]
mod coordinator;

/// A described list with a one-byte descriptor code, list8 form.
fn list8(code: u8, fields: &[&[u8]]) -> Vec<u8> {
    let body: Vec<u8> = fields.concat();
    let mut out = vec![
        0x00,
        0x53,
        code,
        0xc0,
        body.len() as u8 + 1,
        fields.len() as u8,
    ];
    out.extend(body);
    out
}

fn decode_value(bytes: &[u8]) -> Result<Value, CodecError> {
    let mut input = Bytes::copy_from_slice(bytes);
    let value = Value::decode(&mut input)?;
    assert!(input.is_empty(), "{} bytes left", input.len());
    Ok(value)
}

fn decode_perf(bytes: &[u8]) -> Result<Performative, CodecError> {
    let mut input = Bytes::copy_from_slice(bytes);
    let p = Performative::decode(&mut input)?;
    assert!(input.is_empty(), "{} bytes left", input.len());
    Ok(p)
}

fn encode(value: &Value) -> Vec<u8> {
    let mut out = BytesMut::new();
    value.encode(&mut out);
    out.to_vec()
}

fn sym(s: &str) -> Symbol {
    Symbol::from(s)
}

#[test]
fn every_primitive_format_code_decodes() {
    let cases: Vec<(Vec<u8>, Value)> = vec![
        (vec![0x40], Value::Null),
        (vec![0x56, 0x01], Value::Bool(true)),
        (vec![0x56, 0x00], Value::Bool(false)),
        (vec![0x41], Value::Bool(true)),
        (vec![0x42], Value::Bool(false)),
        (vec![0x50, 0xff], Value::Ubyte(255)),
        (vec![0x60, 0x01, 0x02], Value::Ushort(0x0102)),
        (vec![0x70, 0, 0, 1, 0], Value::Uint(256)),
        (vec![0x52, 7], Value::Uint(7)),
        (vec![0x43], Value::Uint(0)),
        (
            vec![0x80, 1, 2, 3, 4, 5, 6, 7, 8],
            Value::Ulong(0x0102_0304_0506_0708),
        ),
        (vec![0x53, 9], Value::Ulong(9)),
        (vec![0x44], Value::Ulong(0)),
        (vec![0x51, 0xff], Value::Byte(-1)),
        (vec![0x61, 0xff, 0xfe], Value::Short(-2)),
        (vec![0x71, 0xff, 0xff, 0xff, 0xfd], Value::Int(-3)),
        (vec![0x54, 0xfc], Value::Int(-4)),
        (vec![0x81, 0x80, 0, 0, 0, 0, 0, 0, 0], Value::Long(i64::MIN)),
        (vec![0x55, 0x80], Value::Long(-128)),
        (vec![0x72, 0x3f, 0x80, 0, 0], Value::Float(1.0)),
        (vec![0x82, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0], Value::Double(1.0)),
        (vec![0x74, 1, 2, 3, 4], Value::Decimal32([1, 2, 3, 4])),
        (
            vec![0x84, 1, 2, 3, 4, 5, 6, 7, 8],
            Value::Decimal64([1, 2, 3, 4, 5, 6, 7, 8]),
        ),
        (
            [&[0x94u8][..], &[9; 16]].concat(),
            Value::Decimal128([9; 16]),
        ),
        (vec![0x73, 0, 0, 0, 0x41], Value::Char('A')),
        (vec![0x73, 0, 1, 0xf6, 0], Value::Char('\u{1f600}')),
        (
            vec![0x83, 0, 0, 0x01, 0x8c, 0, 0, 0, 0],
            Value::Timestamp(0x018c_0000_0000),
        ),
        (
            [&[0x98u8][..], &[0xab; 16]].concat(),
            Value::Uuid([0xab; 16]),
        ),
        (
            vec![0xa0, 2, 1, 2],
            Value::Binary(Bytes::from_static(&[1, 2])),
        ),
        (
            vec![0xb0, 0, 0, 0, 1, 9],
            Value::Binary(Bytes::from_static(&[9])),
        ),
        (vec![0xa1, 3, b'h', 0xc3, 0xa9], Value::String("hé".into())),
        (
            vec![0xb1, 0, 0, 0, 2, b'h', b'i'],
            Value::String("hi".into()),
        ),
        (vec![0xa3, 1, b'x'], Value::Symbol(sym("x"))),
        (vec![0xb3, 0, 0, 0, 2, b'x', b'y'], Value::Symbol(sym("xy"))),
        (vec![0x45], Value::List(vec![])),
        (
            vec![0xc0, 3, 2, 0x43, 0x40],
            Value::List(vec![Value::Uint(0), Value::Null]),
        ),
        (
            vec![0xd0, 0, 0, 0, 6, 0, 0, 0, 2, 0x41, 0x42],
            Value::List(vec![Value::Bool(true), Value::Bool(false)]),
        ),
        (
            vec![0xc1, 5, 2, 0xa3, 1, b'k', 0x43],
            Value::Map(vec![(Value::Symbol(sym("k")), Value::Uint(0))]),
        ),
        (vec![0xd1, 0, 0, 0, 4, 0, 0, 0, 0], Value::Map(vec![])),
        (
            vec![0xe0, 4, 2, 0x52, 1, 2],
            Value::Array(Array {
                descriptor: None,
                format_code: 0x52,
                items: vec![Value::Uint(1), Value::Uint(2)],
            }),
        ),
        (
            vec![0xf0, 0, 0, 0, 10, 0, 0, 0, 1, 0xb1, 0, 0, 0, 1, b'a'],
            Value::Array(Array {
                descriptor: None,
                format_code: 0xb1,
                items: vec![Value::String("a".into())],
            }),
        ),
        (
            // An array of two `accepted` outcomes: described list0 elements.
            vec![0xe0, 5, 2, 0x00, 0x53, 0x24, 0x45],
            Value::Array(Array {
                descriptor: Some(Descriptor::Code(0x24)),
                format_code: 0x45,
                items: vec![Value::List(vec![]), Value::List(vec![])],
            }),
        ),
        (
            vec![0x00, 0x53, 0x77, 0xa1, 2, b'h', b'i'],
            Value::Described(Box::new((
                Descriptor::Code(0x77),
                Value::String("hi".into()),
            ))),
        ),
        (
            vec![0x00, 0xa3, 3, b'a', b':', b'b', 0x40],
            Value::Described(Box::new((Descriptor::Symbol(sym("a:b")), Value::Null))),
        ),
    ];
    for (bytes, expected) in cases {
        assert_eq!(decode_value(&bytes).unwrap(), expected, "{bytes:02x?}");
    }
}

#[test]
fn encoders_pick_the_smallest_encoding() {
    assert_eq!(encode(&Value::Uint(0)), [0x43]);
    assert_eq!(encode(&Value::Uint(255)), [0x52, 255]);
    assert_eq!(encode(&Value::Uint(256)), [0x70, 0, 0, 1, 0]);
    assert_eq!(encode(&Value::Ulong(0)), [0x44]);
    assert_eq!(encode(&Value::Ulong(3)), [0x53, 3]);
    assert_eq!(encode(&Value::Int(-128)), [0x54, 0x80]);
    assert_eq!(encode(&Value::Int(128)), [0x71, 0, 0, 0, 128]);
    assert_eq!(encode(&Value::Long(-1)), [0x55, 0xff]);
    assert_eq!(encode(&Value::Bool(true)), [0x41]);
    assert_eq!(encode(&Value::List(vec![])), [0x45]);
    assert_eq!(encode(&Value::List(vec![Value::Null])), [0xc0, 2, 1, 0x40]);
    assert_eq!(encode(&Value::Map(vec![])), [0xc1, 1, 0]);
    let b255 = encode(&Value::Binary(Bytes::from(vec![0; 255])));
    assert_eq!(&b255[..2], &[0xa0, 255]);
    let b256 = encode(&Value::Binary(Bytes::from(vec![0; 256])));
    assert_eq!(&b256[..5], &[0xb0, 0, 0, 1, 0]);
    // 254 body bytes fit list8 (size 255); 255 do not.
    let fits = Value::List(vec![Value::Null; 254]);
    assert_eq!(&encode(&fits)[..3], &[0xc0, 255, 254]);
    let wide = Value::List(vec![Value::Null; 255]);
    assert_eq!(&encode(&wide)[..9], &[0xd0, 0, 0, 1, 3, 0, 0, 0, 255]);
    assert_eq!(decode_value(&encode(&wide)).unwrap(), wide);
    let symbols = Value::Array(Array {
        descriptor: None,
        format_code: 0xb3,
        items: vec![Value::Symbol(sym("a")), Value::Symbol(sym("bc"))],
    });
    assert_eq!(encode(&symbols), [0xe0, 7, 2, 0xa3, 1, b'a', 2, b'b', b'c']);
}

#[test]
fn open_with_symbolic_descriptor_and_uint_max_frame_size() {
    let mut bytes = vec![0x00, 0xa3, 14];
    bytes.extend_from_slice(b"amqp:open:list");
    bytes.extend_from_slice(&[
        0xc0, 12, 3, 0xa1, 3, b'a', b'b', b'c', 0x40, 0x70, 0, 1, 0, 0,
    ]);
    let Performative::Open(open) = decode_perf(&bytes).unwrap() else {
        panic!("not an open");
    };
    assert_eq!(
        *open,
        Open {
            container_id: "abc".into(),
            hostname: None,
            max_frame_size: 65536,
            channel_max: 65535,
            idle_time_out: None,
            outgoing_locales: vec![],
            incoming_locales: vec![],
            offered_capabilities: vec![],
            desired_capabilities: vec![],
            properties: None,
        }
    );
}

#[test]
fn capabilities_as_single_symbol_or_array() {
    let bytes = list8(
        0x10,
        &[
            &[0xa1, 1, b'c'],
            &[0x40],
            &[0x40],
            &[0x40],
            &[0x40],
            &[0x40],
            &[0x40],
            &[0xa3, 3, b'f', b'o', b'o'],
            &[0xe0, 9, 2, 0xa3, 3, b'b', b'a', b'r', 2, b'q', b'x'],
        ],
    );
    let Performative::Open(open) = decode_perf(&bytes).unwrap() else {
        panic!("not an open");
    };
    assert_eq!(open.offered_capabilities, vec![sym("foo")]);
    assert_eq!(open.desired_capabilities, vec![sym("bar"), sym("qx")]);
    assert_eq!(open.max_frame_size, u32::MAX, "null is the default");
    assert_eq!(open.channel_max, u16::MAX);
}

#[test]
fn begin_with_list32_uint0_and_smalluint() {
    let bytes = [
        0x00, 0x53, 0x11, 0xd0, 0, 0, 0, 15, 0, 0, 0, 4, 0x60, 0, 5, 0x43, 0x52, 100, 0x70, 0, 0,
        8, 0,
    ];
    let Performative::Begin(begin) = decode_perf(&bytes).unwrap() else {
        panic!("not a begin");
    };
    assert_eq!(
        *begin,
        Begin {
            remote_channel: Some(5),
            next_outgoing_id: 0,
            incoming_window: 100,
            outgoing_window: 2048,
            handle_max: u32::MAX,
            offered_capabilities: vec![],
            desired_capabilities: vec![],
            properties: None,
        }
    );
}

#[test]
fn list0_and_missing_mandatory_fields() {
    assert_eq!(
        decode_perf(&[0x00, 0x53, 0x18, 0x45]).unwrap(),
        Performative::Close(Close { error: None })
    );
    assert_eq!(
        decode_perf(&[0x00, 0x53, 0x13, 0x45]),
        Err(CodecError::MissingField("incoming-window"))
    );
    // Null for a mandatory field is as good as absent.
    assert_eq!(
        decode_perf(&list8(0x14, &[&[0x40]])),
        Err(CodecError::MissingField("handle"))
    );
    assert_eq!(
        decode_perf(&list8(0x15, &[&[0x41]])),
        Err(CodecError::MissingField("first"))
    );
}

#[test]
fn extra_trailing_fields_are_ignored() {
    let bytes = list8(
        0x16,
        &[
            &[0x52, 3],
            &[0x41],
            &[0x40],
            &[0xa1, 2, b'x', b'y'],
            &[0x45],
        ],
    );
    assert_eq!(
        decode_perf(&bytes).unwrap(),
        Performative::Detach(Detach {
            handle: 3,
            closed: true,
            error: None
        })
    );
}

#[test]
fn restricted_types_are_checked() {
    let attach = |snd: u8, rcv: u8| {
        list8(
            0x12,
            &[
                &[0xa1, 1, b'l'],
                &[0x43],
                &[0x42],
                &[0x50, snd],
                &[0x50, rcv],
            ],
        )
    };
    let Performative::Attach(a) = decode_perf(&attach(1, 1)).unwrap() else {
        panic!("not an attach");
    };
    assert_eq!(a.role, Role::Sender);
    assert_eq!(a.snd_settle_mode, SenderSettleMode::Settled);
    assert_eq!(a.rcv_settle_mode, ReceiverSettleMode::Second);
    assert_eq!(
        decode_perf(&attach(3, 0)),
        Err(CodecError::InvalidValue("sender-settle-mode"))
    );
    assert_eq!(
        decode_perf(&attach(0, 2)),
        Err(CodecError::InvalidValue("receiver-settle-mode"))
    );
    // handle is a uint: a ulong is the wrong type.
    assert!(matches!(
        decode_perf(&list8(0x14, &[&[0x53, 1]])),
        Err(CodecError::UnexpectedType { found: 0x53, .. })
    ));
    let outcome = list8(0x44, &[&[0x50, 5]]);
    assert_eq!(
        SaslFrame::decode(&mut Bytes::from(outcome)),
        Err(CodecError::InvalidValue("sasl-code"))
    );
}

#[test]
fn source_with_filter_and_symbolic_outcome() {
    let mut selector = vec![0x00, 0x80, 0, 0, 0x46, 0x8c, 0, 0, 0, 4, 0xa1, 3];
    selector.extend_from_slice(b"a=1");
    let filter = [
        &[0xc1, (selector.len() + 1 + 4) as u8, 2, 0xa3, 2, b's', b'f'][..],
        &selector,
    ]
    .concat();
    let mut released = vec![0x00, 0xa3, 18];
    released.extend_from_slice(b"amqp:released:list");
    released.push(0x45);
    let bytes = list8(
        0x28,
        &[
            &[0xa1, 1, b'q'],
            &[0x40],
            &[0x40],
            &[0x40],
            &[0x40],
            &[0x40],
            &[0x40],
            &filter,
            &released,
            &[0xa3, 4, b'x', b'y', b'z', b'w'],
        ],
    );
    let source = Source::decode(&mut Bytes::from(bytes)).unwrap();
    assert_eq!(source.address.as_deref(), Some("q"));
    let filter = source.filter.unwrap();
    assert_eq!(filter[0].0, sym("sf"));
    assert_eq!(
        filter[0].1,
        Value::Described(Box::new((
            Descriptor::Code(0x0000_468c_0000_0004),
            Value::String("a=1".into())
        )))
    );
    assert!(matches!(source.default_outcome, Some(Value::Described(_))));
    assert_eq!(source.outcomes, vec![sym("xyzw")]);
}

#[test]
fn delivery_states_by_symbolic_descriptor_and_unknown_ones() {
    let mut bytes = vec![0x00, 0xa3, 18];
    bytes.extend_from_slice(b"amqp:accepted:list");
    bytes.push(0x45);
    assert_eq!(
        DeliveryState::decode(&mut Bytes::from(bytes)).unwrap(),
        DeliveryState::Accepted
    );
    // modified with only delivery-failed: undeliverable-here defaults to false.
    let modified = list8(0x27, &[&[0x41]]);
    assert_eq!(
        DeliveryState::decode(&mut Bytes::from(modified)).unwrap(),
        DeliveryState::Modified {
            delivery_failed: true,
            undeliverable_here: false,
            message_annotations: None
        }
    );
    let declared = [0x00, 0x53, 0x33, 0xc0, 4, 1, 0xa0, 1, 7];
    assert_eq!(
        DeliveryState::decode(&mut Bytes::copy_from_slice(&declared)).unwrap(),
        DeliveryState::Declared {
            txn_id: Bytes::from_static(&[7])
        }
    );
    let rejected = list8(0x25, &[&list8(0x1d, &[&[0xa3, 1, b'c']])]);
    assert_eq!(
        DeliveryState::decode(&mut Bytes::from(rejected)).unwrap(),
        DeliveryState::Rejected {
            error: Some(Error {
                condition: sym("c"),
                description: None,
                info: None
            })
        }
    );
}

#[test]
fn golden_transfer() {
    let transfer = Transfer {
        handle: 0,
        delivery_id: Some(1),
        delivery_tag: Some(Bytes::from_static(&[1, 2])),
        message_format: Some(0),
        settled: Some(true),
        ..Transfer::default()
    };
    let mut out = BytesMut::new();
    Performative::Transfer(transfer).encode(&mut out);
    assert_eq!(
        &out[..],
        &[
            0x00, 0x53, 0x14, 0xc0, 0x0a, 0x05, 0x43, 0x52, 0x01, 0xa0, 0x02, 0x01, 0x02, 0x43,
            0x41
        ]
    );
}

#[test]
fn golden_flow() {
    let flow = Flow {
        next_incoming_id: Some(1),
        incoming_window: 2048,
        next_outgoing_id: 1,
        outgoing_window: 2048,
        handle: Some(0),
        delivery_count: Some(0),
        link_credit: Some(100),
        ..Flow::default()
    };
    let mut out = BytesMut::new();
    Performative::Flow(flow).encode(&mut out);
    assert_eq!(
        &out[..],
        &[
            0x00, 0x53, 0x13, 0xc0, 19, 7, 0x52, 1, 0x70, 0, 0, 8, 0, 0x52, 1, 0x70, 0, 0, 8, 0,
            0x43, 0x43, 0x52, 100
        ]
    );
}

#[test]
fn golden_disposition_attach_and_frame() {
    let disposition = Disposition {
        role: Role::Receiver,
        first: 5,
        last: None,
        settled: true,
        state: Some(DeliveryState::Accepted),
        batchable: false,
    };
    let mut out = BytesMut::new();
    Performative::Disposition(disposition).encode(&mut out);
    assert_eq!(
        &out[..],
        &[0x00, 0x53, 0x15, 0xc0, 10, 5, 0x41, 0x52, 5, 0x40, 0x41, 0x00, 0x53, 0x24, 0x45]
    );

    let attach = Attach {
        name: "l".into(),
        handle: 0,
        role: Role::Sender,
        snd_settle_mode: SenderSettleMode::Mixed,
        rcv_settle_mode: ReceiverSettleMode::First,
        source: None,
        target: None,
        unsettled: None,
        incomplete_unsettled: false,
        initial_delivery_count: Some(0),
        max_message_size: None,
        offered_capabilities: vec![sym("a")],
        desired_capabilities: vec![],
        properties: None,
    };
    let mut out = BytesMut::new();
    Performative::Attach(Box::new(attach)).encode(&mut out);
    assert_eq!(
        &out[..],
        &[
            0x00, 0x53, 0x12, 0xc0, 20, 12, 0xa1, 1, b'l', 0x43, 0x42, 0x40, 0x40, 0x40, 0x40,
            0x40, 0x40, 0x43, 0x40, 0xe0, 4, 1, 0xa3, 1, b'a'
        ]
    );

    let mut out = BytesMut::new();
    encode_amqp_frame(&mut out, 1, &Performative::Close(Close::default()), 0);
    assert_eq!(&out[..], &[0, 0, 0, 12, 2, 0, 0, 1, 0x00, 0x53, 0x18, 0x45]);
}

#[test]
fn golden_header() {
    let encode_header = |h: Header| {
        let mut out = BytesMut::new();
        h.encode(&mut out);
        out.to_vec()
    };
    assert_eq!(encode_header(Header::default()), [0x00, 0x53, 0x70, 0x45]);
    let durable = Header {
        durable: true,
        ..Header::default()
    };
    assert_eq!(encode_header(durable), [0x00, 0x53, 0x70, 0xc0, 2, 1, 0x41]);
    let urgent = Header {
        priority: 9,
        ..Header::default()
    };
    assert_eq!(
        encode_header(urgent),
        [0x00, 0x53, 0x70, 0xc0, 4, 2, 0x40, 0x50, 9]
    );
}

#[test]
fn frame_with_extended_header_and_heartbeat() {
    // doff 3: four bytes of extended header to skip.
    let mut buf =
        BytesMut::from(&[0, 0, 0, 16, 3, 0, 0, 2, 9, 9, 9, 9, 0x00, 0x53, 0x17, 0x45][..]);
    let frame = decode_frame(&mut buf, 512).unwrap().unwrap();
    assert_eq!(frame.channel, 2);
    assert!(matches!(
        frame.body,
        FrameBody::Amqp {
            performative: Performative::End(_),
            ..
        }
    ));
    let mut buf = BytesMut::from(&[0, 0, 0, 8, 2, 0, 0, 0][..]);
    assert_eq!(
        decode_frame(&mut buf, 512).unwrap().unwrap().body,
        FrameBody::Empty
    );
}
