//! Data-driven round trips: every performative, SASL frame, delivery state,
//! terminus, error and the message header is encoded, decoded again and
//! compared, both bare and inside a frame. Each case lists the values a
//! field can take that matter to the encoding (absent, default, small,
//! large, empty, multiple).

use bytes::{Bytes, BytesMut};
use ramqpd_broker::codec::frame::{
    amqp_frame_overhead, decode_frame, encode_amqp_frame, encode_sasl_frame,
};
use ramqpd_broker::codec::{
    Attach, Begin, Close, DeliveryState, Descriptor, Detach, Disposition, End, Error, Fields, Flow,
    Frame, FrameBody, Header, Open, Performative, ReceiverSettleMode, Role, SaslCode, SaslFrame,
    SaslInit, SaslMechanisms, SaslOutcome, SenderSettleMode, Source, Symbol, Target, TargetKind,
    Transfer, Value,
};

fn sym(s: &str) -> Symbol {
    Symbol::from(s)
}

fn syms(names: &[&str]) -> Vec<Symbol> {
    names.iter().map(|s| sym(s)).collect()
}

fn fields() -> Fields {
    vec![
        (sym("product"), Value::String("ramqp".into())),
        (sym("version"), Value::Uint(7)),
        (sym("big"), Value::Binary(Bytes::from(vec![0xab; 300]))),
    ]
}

fn error() -> Error {
    Error {
        condition: sym("amqp:not-found"),
        description: Some("no such queue".into()),
        info: Some(vec![(sym("address"), Value::String("q1".into()))]),
    }
}

fn delivery_states() -> Vec<DeliveryState> {
    vec![
        DeliveryState::Received {
            section_number: 0,
            section_offset: 0,
        },
        DeliveryState::Received {
            section_number: 3,
            section_offset: 1 << 40,
        },
        DeliveryState::Accepted,
        DeliveryState::Rejected { error: None },
        DeliveryState::Rejected {
            error: Some(error()),
        },
        DeliveryState::Released,
        DeliveryState::Modified {
            delivery_failed: false,
            undeliverable_here: false,
            message_annotations: None,
        },
        DeliveryState::Modified {
            delivery_failed: true,
            undeliverable_here: false,
            message_annotations: None,
        },
        DeliveryState::Modified {
            delivery_failed: true,
            undeliverable_here: true,
            message_annotations: Some(vec![(sym("x-opt-reason"), Value::Symbol(sym("retry")))]),
        },
        DeliveryState::Declared {
            txn_id: Bytes::from_static(b"txn1"),
        },
        DeliveryState::Transactional {
            txn_id: Bytes::from_static(b"txn1"),
            outcome: None,
        },
        DeliveryState::Transactional {
            txn_id: Bytes::from_static(b"txn2"),
            outcome: Some(Box::new(DeliveryState::Rejected { error: None })),
        },
        // A delivery state this codec does not know: kept raw.
        DeliveryState::Other(Value::Described(Box::new((
            Descriptor::Code(0x99),
            Value::List(vec![Value::Binary(Bytes::from_static(b"txn1"))]),
        )))),
    ]
}

fn sources() -> Vec<Source> {
    vec![
        Source::default(),
        Source {
            address: Some("queue/a".into()),
            ..Source::default()
        },
        Source {
            address: Some("queue/b".into()),
            durable: 2,
            expiry_policy: Some(sym("never")),
            timeout: 60,
            dynamic: true,
            dynamic_node_properties: Some(vec![(sym("lifetime-policy"), Value::Null)]),
            distribution_mode: Some(sym("copy")),
            filter: Some(vec![(
                sym("apache.org:selector-filter:string"),
                Value::Described(Box::new((
                    Descriptor::Code(0x0000_468c_0000_0004),
                    Value::String("color = 'red'".into()),
                ))),
            )]),
            default_outcome: Some(Value::Described(Box::new((
                Descriptor::Code(0x26),
                Value::List(vec![]),
            )))),
            outcomes: syms(&["amqp:accepted:list", "amqp:rejected:list"]),
            capabilities: syms(&["queue"]),
        },
    ]
}

fn targets() -> Vec<Target> {
    vec![
        Target::default(),
        Target {
            address: Some("queue/a".into()),
            ..Target::default()
        },
        Target {
            address: None,
            durable: 1,
            expiry_policy: Some(sym("link-detach")),
            timeout: 1 << 20,
            dynamic: true,
            dynamic_node_properties: Some(fields()),
            capabilities: syms(&["topic", "shared"]),
            kind: TargetKind::Node,
        },
        // The transaction coordinator: only its capabilities travel.
        Target {
            kind: TargetKind::Coordinator,
            capabilities: syms(&["amqp:local-transactions"]),
            ..Target::default()
        },
        Target {
            kind: TargetKind::Coordinator,
            ..Target::default()
        },
    ]
}

fn opens() -> Vec<Open> {
    let minimal = Open {
        container_id: "c".into(),
        hostname: None,
        max_frame_size: u32::MAX,
        channel_max: u16::MAX,
        idle_time_out: None,
        outgoing_locales: vec![],
        incoming_locales: vec![],
        offered_capabilities: vec![],
        desired_capabilities: vec![],
        properties: None,
    };
    vec![
        minimal.clone(),
        Open {
            container_id: "container-with-a-long-name-".repeat(20),
            hostname: Some("broker.example".into()),
            max_frame_size: 65536,
            channel_max: 0,
            idle_time_out: Some(30_000),
            outgoing_locales: syms(&["en-US"]),
            incoming_locales: syms(&["en-US", "fr-FR"]),
            offered_capabilities: syms(&["ANONYMOUS-RELAY"]),
            desired_capabilities: syms(&["DELAYED_DELIVERY", "SHARED-SUBS"]),
            properties: Some(fields()),
        },
        Open {
            idle_time_out: Some(0),
            max_frame_size: 512,
            ..minimal
        },
    ]
}

fn begins() -> Vec<Begin> {
    let minimal = Begin {
        remote_channel: None,
        next_outgoing_id: 0,
        incoming_window: 0,
        outgoing_window: 0,
        handle_max: u32::MAX,
        offered_capabilities: vec![],
        desired_capabilities: vec![],
        properties: None,
    };
    vec![
        minimal.clone(),
        Begin {
            remote_channel: Some(3),
            next_outgoing_id: u32::MAX,
            incoming_window: 2048,
            outgoing_window: 100,
            handle_max: 1023,
            offered_capabilities: syms(&["a"]),
            desired_capabilities: syms(&["b", "c"]),
            properties: Some(fields()),
        },
    ]
}

fn attaches() -> Vec<Attach> {
    let minimal = Attach {
        name: "link".into(),
        handle: 0,
        role: Role::Sender,
        snd_settle_mode: SenderSettleMode::Mixed,
        rcv_settle_mode: ReceiverSettleMode::First,
        source: None,
        target: None,
        unsettled: None,
        incomplete_unsettled: false,
        initial_delivery_count: None,
        max_message_size: None,
        offered_capabilities: vec![],
        desired_capabilities: vec![],
        properties: None,
    };
    let mut cases = vec![minimal.clone()];
    for (source, target) in sources().into_iter().zip(targets()) {
        cases.push(Attach {
            role: Role::Receiver,
            source: Some(source),
            target: Some(target),
            ..minimal.clone()
        });
    }
    cases.push(Attach {
        name: "sender-link".into(),
        handle: 70_000,
        role: Role::Receiver,
        snd_settle_mode: SenderSettleMode::Settled,
        rcv_settle_mode: ReceiverSettleMode::Second,
        source: Some(Source::default()),
        target: Some(Target::default()),
        unsettled: Some(vec![(
            Value::Binary(Bytes::from_static(b"tag1")),
            Value::Described(Box::new((Descriptor::Code(0x24), Value::List(vec![])))),
        )]),
        incomplete_unsettled: true,
        initial_delivery_count: Some(0),
        max_message_size: Some(1 << 33),
        offered_capabilities: syms(&["x"]),
        desired_capabilities: syms(&["y"]),
        properties: Some(fields()),
    });
    cases.push(Attach {
        snd_settle_mode: SenderSettleMode::Unsettled,
        max_message_size: Some(0),
        ..minimal
    });
    cases
}

fn flows() -> Vec<Flow> {
    vec![
        Flow::default(),
        Flow {
            next_incoming_id: Some(1),
            incoming_window: 2048,
            next_outgoing_id: 300,
            outgoing_window: u32::MAX,
            handle: Some(0),
            delivery_count: Some(12),
            link_credit: Some(100),
            available: Some(0),
            drain: true,
            echo: true,
            properties: Some(fields()),
        },
        Flow {
            incoming_window: 1,
            next_outgoing_id: 1,
            outgoing_window: 1,
            drain: true,
            ..Flow::default()
        },
    ]
}

fn transfers() -> Vec<Transfer> {
    let mut cases = vec![
        Transfer::default(),
        Transfer {
            handle: 1,
            delivery_id: Some(0),
            delivery_tag: Some(Bytes::from_static(&[0, 0, 0, 1])),
            message_format: Some(0),
            settled: Some(false),
            ..Transfer::default()
        },
        Transfer {
            handle: u32::MAX,
            delivery_id: Some(u32::MAX),
            delivery_tag: Some(Bytes::new()),
            message_format: Some(0x0102_0304),
            settled: Some(true),
            more: true,
            rcv_settle_mode: Some(ReceiverSettleMode::Second),
            state: None,
            resume: true,
            aborted: true,
            batchable: true,
        },
        Transfer {
            rcv_settle_mode: Some(ReceiverSettleMode::First),
            more: true,
            ..Transfer::default()
        },
    ];
    for state in delivery_states() {
        cases.push(Transfer {
            handle: 2,
            state: Some(Box::new(state)),
            resume: true,
            ..Transfer::default()
        });
    }
    cases
}

fn dispositions() -> Vec<Disposition> {
    let minimal = Disposition {
        role: Role::Receiver,
        first: 0,
        last: None,
        settled: false,
        state: None,
        batchable: false,
    };
    let mut cases = vec![
        minimal.clone(),
        Disposition {
            role: Role::Sender,
            first: 10,
            last: Some(20),
            settled: true,
            state: None,
            batchable: true,
        },
    ];
    for state in delivery_states() {
        cases.push(Disposition {
            settled: true,
            state: Some(state),
            ..minimal.clone()
        });
    }
    cases
}

fn performatives() -> Vec<Performative> {
    let mut all = Vec::new();
    all.extend(opens().into_iter().map(|o| Performative::Open(Box::new(o))));
    all.extend(
        begins()
            .into_iter()
            .map(|b| Performative::Begin(Box::new(b))),
    );
    all.extend(
        attaches()
            .into_iter()
            .map(|a| Performative::Attach(Box::new(a))),
    );
    all.extend(flows().into_iter().map(Performative::Flow));
    all.extend(transfers().into_iter().map(Performative::Transfer));
    all.extend(dispositions().into_iter().map(Performative::Disposition));
    for error in [
        None,
        Some(error()),
        Some(Error::new("amqp:internal-error", "x")),
    ] {
        all.push(Performative::Detach(Detach {
            handle: 5,
            closed: error.is_some(),
            error: error.clone(),
        }));
        all.push(Performative::End(End {
            error: error.clone(),
        }));
        all.push(Performative::Close(Close { error }));
    }
    all.push(Performative::Detach(Detach::default()));
    all
}

fn sasl_frames() -> Vec<SaslFrame> {
    vec![
        SaslFrame::Mechanisms(SaslMechanisms {
            mechanisms: syms(&["PLAIN"]),
        }),
        SaslFrame::Mechanisms(SaslMechanisms {
            mechanisms: syms(&["ANONYMOUS", "PLAIN", "EXTERNAL"]),
        }),
        SaslFrame::Mechanisms(SaslMechanisms { mechanisms: vec![] }),
        SaslFrame::Init(SaslInit {
            mechanism: sym("ANONYMOUS"),
            initial_response: None,
            hostname: None,
        }),
        SaslFrame::Init(SaslInit {
            mechanism: sym("PLAIN"),
            initial_response: Some(Bytes::from_static(b"\0user\0secret")),
            hostname: Some("broker.example".into()),
        }),
        SaslFrame::Challenge(Bytes::from_static(b"nonce")),
        SaslFrame::Challenge(Bytes::new()),
        SaslFrame::Response(Bytes::from(vec![7u8; 1000])),
        SaslFrame::Outcome(SaslOutcome {
            code: SaslCode::Ok,
            additional_data: None,
        }),
        SaslFrame::Outcome(SaslOutcome {
            code: SaslCode::Auth,
            additional_data: Some(Bytes::from_static(b"denied")),
        }),
        SaslFrame::Outcome(SaslOutcome {
            code: SaslCode::Sys,
            additional_data: None,
        }),
        SaslFrame::Outcome(SaslOutcome {
            code: SaslCode::SysPerm,
            additional_data: None,
        }),
        SaslFrame::Outcome(SaslOutcome {
            code: SaslCode::SysTemp,
            additional_data: None,
        }),
    ]
}

/// Encode with `encode`, decode with `decode`, and check the value and that
/// the decoder consumed exactly the encoding.
fn roundtrip<T: PartialEq + std::fmt::Debug>(
    value: &T,
    encode: impl Fn(&T, &mut BytesMut),
    decode: impl Fn(&mut Bytes) -> Result<T, ramqpd_broker::codec::CodecError>,
) {
    let mut out = BytesMut::new();
    encode(value, &mut out);
    let mut bytes = out.freeze();
    let encoded = bytes.clone();
    let decoded = decode(&mut bytes).unwrap_or_else(|e| panic!("{value:?}: {e} in {encoded:02x?}"));
    assert_eq!(&decoded, value, "bytes {encoded:02x?}");
    assert!(bytes.is_empty(), "{} bytes left over", bytes.len());
}

#[test]
fn every_performative_roundtrips() {
    let all = performatives();
    assert!(all.len() >= 50);
    for p in &all {
        roundtrip(p, Performative::encode, Performative::decode);
    }
}

#[test]
fn every_performative_roundtrips_in_a_frame() {
    for (i, p) in performatives().into_iter().enumerate() {
        let channel = i as u16;
        let mut out = BytesMut::new();
        encode_amqp_frame(&mut out, channel, &p, 0);
        assert_eq!(out.len(), amqp_frame_overhead(&p), "{p:?}");
        let frame = decode_frame(&mut out, u32::MAX).unwrap().unwrap();
        assert!(out.is_empty());
        assert_eq!(
            frame,
            Frame {
                channel,
                body: FrameBody::Amqp {
                    performative: p,
                    payload: Bytes::new()
                }
            }
        );
    }
}

#[test]
fn transfer_payload_follows_the_performative() {
    for t in transfers() {
        let payload = Bytes::from(vec![0x5a; 700]);
        let p = Performative::Transfer(t);
        let mut out = BytesMut::new();
        encode_amqp_frame(&mut out, 9, &p, payload.len());
        out.extend_from_slice(&payload);
        assert_eq!(out.len(), amqp_frame_overhead(&p) + payload.len());
        let frame = decode_frame(&mut out, 64 * 1024).unwrap().unwrap();
        assert_eq!(frame.channel, 9);
        assert_eq!(
            frame.body,
            FrameBody::Amqp {
                performative: p,
                payload: payload.clone()
            }
        );
    }
}

#[test]
fn every_sasl_frame_roundtrips() {
    for f in sasl_frames() {
        roundtrip(&f, SaslFrame::encode, SaslFrame::decode);
        let mut out = BytesMut::new();
        encode_sasl_frame(&mut out, &f);
        assert_eq!(&out[4..8], &[2, 1, 0, 0], "doff 2, type SASL, channel 0");
        let frame = decode_frame(&mut out, 4096).unwrap().unwrap();
        assert_eq!(frame.channel, 0);
        assert_eq!(frame.body, FrameBody::Sasl(f));
    }
}

#[test]
fn every_delivery_state_roundtrips() {
    for s in delivery_states() {
        roundtrip(&s, DeliveryState::encode, DeliveryState::decode);
    }
}

#[test]
fn sources_targets_errors_roundtrip() {
    for s in sources() {
        roundtrip(&s, Source::encode, Source::decode);
    }
    for t in targets() {
        roundtrip(&t, Target::encode, Target::decode);
    }
    for e in [
        error(),
        Error::new("amqp:decode-error", ""),
        Error::default(),
    ] {
        roundtrip(&e, Error::encode, Error::decode);
    }
}

#[test]
fn headers_roundtrip() {
    let headers = [
        Header::default(),
        Header {
            durable: true,
            priority: 4,
            ttl: Some(0),
            first_acquirer: true,
            delivery_count: 3,
        },
        Header {
            priority: 0,
            ..Header::default()
        },
        Header {
            priority: 9,
            ttl: Some(u32::MAX),
            delivery_count: u32::MAX,
            ..Header::default()
        },
    ];
    for h in &headers {
        roundtrip(h, Header::encode, Header::decode);
        let mut out = BytesMut::new();
        h.encode(&mut out);
        let len = out.len();
        out.extend_from_slice(&[0x00, 0x53, 0x75, 0xa0, 0x02, b'h', b'i']);
        let view = ramqpd_broker::codec::MessageView::scan(&out.freeze()).unwrap();
        assert_eq!(view.header.as_ref(), Some(h));
        assert_eq!(view.header_len, len);
        assert_eq!(view.n_sections, 2);
    }
}

#[test]
fn default_header_has_priority_4() {
    assert_eq!(Header::default().priority, 4);
}
