//! Hostile inputs: the codec decodes untrusted network bytes, so lying
//! sizes and counts, absurd nesting, bad text and bad frame headers must be
//! clean errors — never a panic, never an allocation sized by the lie.

use bytes::{Bytes, BytesMut};
use ramqpd_broker::codec::frame::{decode_frame, encode_amqp_frame, encode_sasl_frame};
use ramqpd_broker::codec::value::NESTING_DEPTH_MAX;
use ramqpd_broker::codec::{
    CodecError, FrameBody, MessageView, Performative, SaslFrame, SaslMechanisms, Symbol, Transfer,
    Value,
};

fn value(bytes: &[u8]) -> Result<Value, CodecError> {
    Value::decode(&mut Bytes::copy_from_slice(bytes))
}

fn perf(bytes: &[u8]) -> Result<Performative, CodecError> {
    Performative::decode(&mut Bytes::copy_from_slice(bytes))
}

fn scan(bytes: &[u8]) -> Result<MessageView, CodecError> {
    MessageView::scan(&Bytes::copy_from_slice(bytes))
}

fn frame(bytes: &[u8], max: u32) -> Result<Option<ramqpd_broker::codec::Frame>, CodecError> {
    decode_frame(&mut BytesMut::from(bytes), max)
}

#[test]
fn huge_counts_in_tiny_buffers() {
    // list32 whose size is honest but whose count is 2^32-1.
    assert!(matches!(
        value(&[0xd0, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0x40, 0x40]),
        Err(CodecError::InvalidSize(_))
    ));
    // list32 whose size is 2^32-1 in a 10-byte buffer.
    assert_eq!(
        value(&[0xd0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x40]),
        Err(CodecError::Truncated)
    );
    assert!(matches!(
        value(&[0xd1, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe]),
        Err(CodecError::InvalidSize(_))
    ));
    // 2^32-1 zero-width elements (nulls) in a 10-byte array.
    assert!(matches!(
        value(&[0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40]),
        Err(CodecError::InvalidSize(_))
    ));
    // ... while a few zero-width elements are fine.
    assert!(value(&[0xe0, 2, 3, 0x41]).is_ok());
    assert!(value(&[0xe0, 2, 255, 0x40]).is_ok());
    // An array of 2^32-1 uints backed by 4 bytes.
    assert!(matches!(
        value(&[0xf0, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xff, 0x70, 0, 0, 0, 1]),
        Err(CodecError::InvalidSize(_))
    ));
    // A transfer whose list claims 2^32-1 fields.
    assert!(matches!(
        perf(&[0x00, 0x53, 0x14, 0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]),
        Err(CodecError::InvalidSize(_))
    ));
    // Capabilities: an array claiming 2^32-1 symbols.
    let open = [
        0x00, 0x53, 0x10, 0xc0, 20, 9, 0xa1, 1, b'c', 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
        0xf0, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xa3,
    ];
    assert!(perf(&open).is_err());
    // A binary claiming 2^32-1 bytes.
    assert_eq!(
        value(&[0xb0, 0xff, 0xff, 0xff, 0xff, 1]),
        Err(CodecError::Truncated)
    );
}

#[test]
fn sizes_that_disagree_with_contents() {
    // list8 of size 3 (two body bytes) holding one one-byte element.
    assert!(matches!(
        value(&[0xc0, 3, 1, 0x40, 0x40]),
        Err(CodecError::InvalidSize(_))
    ));
    // list8 whose element runs past its size.
    assert!(matches!(
        value(&[0xc0, 2, 1, 0x52, 7]),
        Err(CodecError::InvalidSize(_))
    ));
    assert!(matches!(
        value(&[0xc0, 0, 0]),
        Err(CodecError::InvalidSize(_))
    ));
    assert!(matches!(
        value(&[0xe0, 1, 0]),
        Err(CodecError::InvalidSize(_))
    ));
    // A fixed-width array whose count does not match its size.
    assert!(matches!(
        value(&[0xe0, 4, 3, 0x52, 1, 2]),
        Err(CodecError::InvalidSize(_))
    ));
}

#[test]
fn nesting_1000_deep() {
    let mut lists = vec![0x45];
    for _ in 0..1000 {
        let size = (lists.len() + 4) as u32;
        let mut outer = vec![0xd0];
        outer.extend_from_slice(&size.to_be_bytes());
        outer.extend_from_slice(&1u32.to_be_bytes());
        outer.extend(lists);
        lists = outer;
    }
    assert_eq!(value(&lists), Err(CodecError::TooDeep));

    let mut described = [0x00, 0x53, 0x01].repeat(1000);
    described.push(0x40);
    assert_eq!(value(&described), Err(CodecError::TooDeep));

    // Descriptors that are themselves described: rejected as descriptors,
    // and bounded when skipped inside a message body.
    assert!(value(&[0x00; 1000]).is_err());
    let mut body = vec![0x00, 0x53, 0x77];
    body.extend([0x00; 1000]);
    assert_eq!(scan(&body), Err(CodecError::TooDeep));

    // Arrays of arrays of ... .
    let mut arrays = vec![0xf0, 0, 0, 0, 5, 0, 0, 0, 0, 0x40];
    assert!(value(&arrays).is_ok());
    for _ in 0..1000 {
        let mut outer = vec![0xf0];
        outer.extend_from_slice(&((arrays.len() + 4) as u32).to_be_bytes());
        outer.extend_from_slice(&1u32.to_be_bytes());
        outer.push(0xf0);
        // Elements of an array32 array have no constructor of their own.
        outer.extend_from_slice(&arrays[1..]);
        arrays = outer;
    }
    assert_eq!(value(&arrays), Err(CodecError::TooDeep));

    // Just within the limit is fine.
    let mut ok = vec![0x45];
    for _ in 0..NESTING_DEPTH_MAX - 1 {
        let mut outer = vec![0xc0, ok.len() as u8 + 1, 1];
        outer.extend(ok);
        ok = outer;
    }
    assert!(value(&ok).is_ok());
}

#[test]
fn bad_text_and_bad_scalars() {
    assert_eq!(value(&[0xa1, 2, 0xc3, 0x28]), Err(CodecError::InvalidText));
    assert_eq!(value(&[0xa3, 1, 0x80]), Err(CodecError::InvalidText));
    assert_eq!(
        value(&[0x73, 0, 0x11, 0, 0]),
        Err(CodecError::InvalidValue("char"))
    );
    assert_eq!(
        value(&[0x73, 0, 0, 0xd8, 0]),
        Err(CodecError::InvalidValue("char"))
    );
    assert_eq!(value(&[0x56, 2]), Err(CodecError::InvalidValue("boolean")));
    assert_eq!(value(&[0x01]), Err(CodecError::InvalidFormatCode(0x01)));
    assert_eq!(value(&[0xff]), Err(CodecError::InvalidFormatCode(0xff)));
    assert_eq!(value(&[]), Err(CodecError::Truncated));
    assert_eq!(value(&[0x70, 1, 2]), Err(CodecError::Truncated));
    assert_eq!(
        value(&[0xc1, 2, 1, 0x40]),
        Err(CodecError::InvalidSize("odd map count"))
    );
    // fields maps need symbol keys.
    let flow_with_string_keys = [
        0x00, 0x53, 0x13, 0xc0, 12, 11, 0x40, 0x43, 0x43, 0x43, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
        0xc1, 4, 2, 0xa1, 0, 0x40,
    ];
    assert!(matches!(
        perf(&flow_with_string_keys),
        Err(CodecError::UnexpectedType { .. })
    ));
}

#[test]
fn frame_header_checks() {
    let too_large = frame(&[0, 1, 0, 0, 2, 0, 0, 0], 512);
    assert_eq!(
        too_large,
        Err(CodecError::FrameTooLarge {
            size: 65536,
            max: 512
        })
    );
    assert_eq!(
        too_large.unwrap_err().condition(),
        "amqp:connection:framing-error"
    );
    assert!(matches!(
        frame(&[0, 0, 0, 7, 2, 0, 0, 0], 512),
        Err(CodecError::MalformedFrame(_))
    ));
    assert!(matches!(
        frame(&[0, 0, 0, 0, 2, 0, 0, 0], 512),
        Err(CodecError::MalformedFrame(_))
    ));
    assert!(matches!(
        frame(&[0, 0, 0, 8, 1, 0, 0, 0], 512),
        Err(CodecError::MalformedFrame(_))
    ));
    assert!(matches!(
        frame(&[0, 0, 0, 8, 0, 0, 0, 0], 512),
        Err(CodecError::MalformedFrame(_))
    ));
    assert!(matches!(
        frame(&[0, 0, 0, 12, 4, 0, 0, 0, 0, 0, 0, 0], 512),
        Err(CodecError::MalformedFrame(_))
    ));
    assert_eq!(
        frame(&[0, 0, 0, 8, 2, 2, 0, 0], 512),
        Err(CodecError::UnknownFrameType(2))
    );
    // Fewer than 8 bytes: wait.
    assert_eq!(frame(&[0, 0, 0], 512), Ok(None));
    assert_eq!(frame(&[], 512), Ok(None));
    assert_eq!(
        decode_frame(&mut BytesMut::new(), 512)
            .unwrap()
            .map(|f| f.channel),
        None
    );
}

#[test]
fn partial_frames_consume_nothing() {
    let transfer = Performative::Transfer(Transfer {
        handle: 1,
        delivery_id: Some(1),
        delivery_tag: Some(Bytes::from_static(b"t")),
        ..Transfer::default()
    });
    let mut whole = BytesMut::new();
    encode_amqp_frame(&mut whole, 3, &transfer, 100);
    whole.extend_from_slice(&[7; 100]);
    // A second frame right behind the first.
    encode_amqp_frame(&mut whole, 4, &transfer, 0);
    let whole = whole.freeze();
    for cut in 0..whole.len() {
        let mut buf = BytesMut::from(&whole[..cut]);
        let mut frames = Vec::new();
        while let Some(f) = decode_frame(&mut buf, 4096).unwrap() {
            frames.push(f);
        }
        let first_len = 8 + perf_len(&transfer) + 100;
        let expected = usize::from(cut >= first_len) + usize::from(cut >= whole.len());
        assert_eq!(frames.len(), expected, "cut at {cut}");
        // What is left is exactly the unconsumed tail.
        let consumed: usize = if frames.is_empty() { 0 } else { first_len };
        assert_eq!(&buf[..], &whole[consumed..cut]);
        // Feed the rest.
        buf.extend_from_slice(&whole[cut..]);
        while let Some(f) = decode_frame(&mut buf, 4096).unwrap() {
            frames.push(f);
        }
        assert_eq!(frames.len(), 2);
        assert!(buf.is_empty());
        let FrameBody::Amqp { payload, .. } = &frames[0].body else {
            panic!("not an AMQP frame");
        };
        assert_eq!(&payload[..], &[7; 100]);
    }
}

fn perf_len(p: &Performative) -> usize {
    let mut out = BytesMut::new();
    p.encode(&mut out);
    out.len()
}

#[test]
fn trailing_bytes_after_a_performative_or_sasl_body() {
    let mut close = BytesMut::from(&[0, 0, 0, 13, 2, 0, 0, 0, 0x00, 0x53, 0x18, 0x45, 0x40][..]);
    assert_eq!(
        decode_frame(&mut close, 512),
        Err(CodecError::InvalidSize("trailing bytes"))
    );
    let mut sasl = BytesMut::new();
    let mechanisms = SaslFrame::Mechanisms(SaslMechanisms {
        mechanisms: vec![Symbol::from("PLAIN")],
    });
    encode_sasl_frame(&mut sasl, &mechanisms);
    sasl.extend_from_slice(&[0x40]);
    let size = sasl.len() as u32;
    sasl[..4].copy_from_slice(&size.to_be_bytes());
    assert_eq!(
        decode_frame(&mut sasl, 512),
        Err(CodecError::InvalidSize("trailing bytes"))
    );
    // An empty SASL frame is not a heartbeat.
    assert!(frame(&[0, 0, 0, 8, 2, 1, 0, 0], 512).is_err());
}

#[test]
fn message_scan_rejects_malformed_messages() {
    let data = [0x00, 0x53, 0x75, 0xa0, 1, b'x'];
    let value = [0x00, 0x53, 0x77, 0x40];
    let sequence = [0x00, 0x53, 0x76, 0x45];
    let properties = [0x00, 0x53, 0x73, 0x45];
    let app_properties = [0x00, 0x53, 0x74, 0xc1, 1, 0];
    let footer = [0x00, 0x53, 0x78, 0xc1, 1, 0];
    let header = [0x00, 0x53, 0x70, 0x45];
    let order = CodecError::InvalidValue("message section order");
    assert_eq!(scan(&[]), Err(CodecError::InvalidSize("empty message")));
    assert_eq!(
        scan(&[&app_properties[..], &properties].concat()),
        Err(order.clone())
    );
    assert_eq!(scan(&[&value[..], &value].concat()), Err(order.clone()));
    assert_eq!(scan(&[&data[..], &sequence].concat()), Err(order.clone()));
    assert_eq!(scan(&[&footer[..], &data].concat()), Err(order.clone()));
    assert_eq!(scan(&[&data[..], &header].concat()), Err(order.clone()));
    assert_eq!(scan(&[&header[..], &header].concat()), Err(order));
    assert!(matches!(
        scan(&[0x00, 0x53, 0x79, 0x40]),
        Err(CodecError::UnknownDescriptor(_))
    ));
    assert!(matches!(
        scan(&[0x40]),
        Err(CodecError::UnexpectedType { .. })
    ));
    assert_eq!(
        scan(&[0x00, 0x53, 0x75, 0xb0, 0xff, 0xff, 0xff, 0xff]),
        Err(CodecError::Truncated)
    );
    assert_eq!(scan(&[0x00, 0x53, 0x75]), Err(CodecError::Truncated));

    // Valid: several data sections, a footer, no header, symbolic names.
    let view = scan(&[&data[..], &data, &footer].concat()).unwrap();
    assert_eq!(
        (view.header, view.header_len, view.n_sections),
        (None, 0, 3)
    );
    let mut symbolic = vec![0x00, 0xa3, 16];
    symbolic.extend_from_slice(b"amqp:data:binary");
    symbolic.extend_from_slice(&[0xa0, 0]);
    assert_eq!(
        scan(&[&properties[..], &symbolic].concat())
            .unwrap()
            .n_sections,
        2
    );
    // No body at all is accepted.
    assert_eq!(
        scan(&[&header[..], &properties].concat())
            .unwrap()
            .n_sections,
        2
    );
    let all = [
        &header[..],
        &[0x00, 0x53, 0x71, 0xc1, 1, 0],
        &[0x00, 0x53, 0x72, 0xc1, 1, 0],
        &properties,
        &app_properties,
        &sequence,
        &sequence,
        &footer,
    ]
    .concat();
    let view = scan(&all).unwrap();
    assert_eq!((view.header_len, view.n_sections), (4, 8));
}

/// Regression (fuzz, performative_decoder): a delivery state holding an
/// array of 14 nulls decoded from a 14-byte input, but its 10-byte
/// re-encoding was refused, because zero-width array elements were limited
/// to one per input byte. They now have a fixed allowance on top.
#[test]
fn short_encoding_of_many_nulls_still_decodes() {
    let input = [
        0x00, 0x44, 0x00, 0x44, 0x00, 0x44, 0xe0, 0x02, 0x0e, 0x40, 0x10, 0x00, 0x00, 0xff,
    ];
    let state =
        ramqpd_broker::codec::DeliveryState::decode(&mut Bytes::copy_from_slice(&input)).unwrap();
    let mut out = BytesMut::new();
    state.encode(&mut out);
    assert_eq!(&out[..], &input[..10]);
    let mut again = out.freeze();
    assert_eq!(
        ramqpd_broker::codec::DeliveryState::decode(&mut again).unwrap(),
        state
    );
}
