//! The checks of the AMQP codec's and the segment store's decoders, moved
//! here out of the fuzz target files so that the corpus replay test runs
//! the very same code. Each takes the raw fuzz input.
//!
//! It must not know about anything above the codec and `paging::record`.

use bytes::{Bytes, BytesMut};

use crate::codec::dead_letter::{dead_letter_key, record_death, Death, DeathReason};
use crate::codec::frame::{decode_frame, encode_amqp_frame};
use crate::codec::Descriptor;
use crate::codec::{
    CodecError, DeliveryState, Error, Frame, FrameBody, Header, MessageView, Performative,
    SaslFrame, Source, Target, Value,
};
use crate::paging::record::{self, RecordError};

/// Max-frame-size of the frame check.
const MAX_FRAME_SIZE: u32 = 64 * 1024;

/// Body limit of the segment record check.
const MAX_RECORD_BODY_BYTES: u32 = 64 * 1024;

/// Decode frames from `buf` until it needs more bytes or fails.
fn drain(buf: &mut BytesMut, out: &mut Vec<Result<Frame, CodecError>>) -> bool {
    loop {
        match decode_frame(buf, MAX_FRAME_SIZE) {
            Ok(Some(frame)) => out.push(Ok(frame)),
            Ok(None) => return true,
            Err(e) => {
                out.push(Err(e));
                return false;
            }
        }
    }
}

fn check_frame_reencodes(frame: &Frame) {
    let FrameBody::Amqp {
        performative,
        payload,
    } = &frame.body
    else {
        return;
    };
    let mut out = BytesMut::new();
    encode_amqp_frame(&mut out, frame.channel, performative, payload.len());
    out.extend_from_slice(payload);
    let again = decode_frame(&mut out, u32::MAX)
        .expect("a decoded frame re-encodes into a decodable frame")
        .expect("a whole frame");
    assert_eq!(again.channel, frame.channel);
    assert!(out.is_empty());
}

/// `decode_frame` as the connection's read loop drives it: frames until
/// `None` or an error, also fed split at the point the first byte picks
/// (the outcome must not depend on it); every decoded AMQP frame
/// re-encodes into a frame that decodes again.
pub fn frame_decoder(data: &[u8]) {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let mut whole = Vec::new();
    let mut buf = BytesMut::from(data);
    drain(&mut buf, &mut whole);

    let cut = usize::from(split) * data.len() / 255;
    let mut parts = Vec::new();
    let mut buf = BytesMut::from(&data[..cut]);
    if drain(&mut buf, &mut parts) {
        buf.extend_from_slice(&data[cut..]);
        drain(&mut buf, &mut parts);
    }
    // Compared as text: a decoded NaN float is not equal to itself.
    assert_eq!(
        format!("{whole:?}"),
        format!("{parts:?}"),
        "outcome depends on where the bytes were split"
    );
    for frame in whole.iter().flatten() {
        check_frame_reencodes(frame);
    }
}

/// `Value::decode`: a decoded value re-encodes into bytes that decode again
/// and re-encode identically (encoding is canonical).
pub fn value_decoder(data: &[u8]) {
    let mut input = Bytes::copy_from_slice(data);
    let Ok(value) = Value::decode(&mut input) else {
        return;
    };
    let mut first = BytesMut::new();
    value.encode(&mut first);
    let first = first.freeze();
    match Value::decode(&mut first.clone()) {
        Ok(again) => {
            let mut second = BytesMut::new();
            again.encode(&mut second);
            assert_eq!(first, second.freeze(), "encoding is not canonical");
        }
        // Arrays of zero-width elements (nulls) are bounded by the input's
        // length; the re-encoding can be shorter than the fuzz input.
        Err(CodecError::InvalidSize("array count")) => {}
        Err(e) => panic!("{value:?} re-encodes into undecodable bytes: {e}"),
    }
}

fn check_composite<T: std::fmt::Debug>(
    data: &[u8],
    decode: fn(&mut Bytes) -> Result<T, CodecError>,
    encode: fn(&T, &mut BytesMut),
) {
    let Ok(decoded) = decode(&mut Bytes::copy_from_slice(data)) else {
        return;
    };
    let mut first = BytesMut::new();
    encode(&decoded, &mut first);
    let mut input = first.clone().freeze();
    let again = match decode(&mut input) {
        Ok(again) => again,
        // Arrays of zero-width elements (nulls) are bounded by the input's
        // length (plus an allowance); the re-encoding can be much shorter
        // than the fuzz input.
        Err(CodecError::InvalidSize("array count")) => return,
        Err(e) => panic!("{decoded:?} re-encodes into undecodable bytes: {e}"),
    };
    assert!(input.is_empty(), "re-decoding left bytes over");
    let mut second = BytesMut::new();
    encode(&again, &mut second);
    assert_eq!(first, second, "encoding is not canonical");
}

/// The composite decoders one by one (performatives, SASL frames,
/// delivery states, source, target, error, header): whatever decodes
/// re-encodes into bytes that decode again to the same encoding.
pub fn performative_decoder(data: &[u8]) {
    check_composite(data, Performative::decode, Performative::encode);
    check_composite(data, SaslFrame::decode, SaslFrame::encode);
    check_composite(data, DeliveryState::decode, DeliveryState::encode);
    check_composite(data, Source::decode, Source::encode);
    check_composite(data, Target::decode, Target::encode);
    check_composite(data, Error::decode, Error::encode);
    check_composite(data, Header::decode, Header::encode);
}

/// `MessageView::scan`: the view is consistent with the input; the header
/// section decodes alone and can be replaced by our own encoding. Also
/// `Control::from_message` (a transaction coordinator's decoder).
pub fn message_scan(data: &[u8]) {
    let message = Bytes::copy_from_slice(data);
    let Ok(view) = MessageView::scan(&message) else {
        return;
    };
    assert!(view.n_sections >= 1);
    assert!(view.header_len <= message.len());
    assert_eq!(view.header.is_some(), view.header_len > 0);
    if let Some(header) = &view.header {
        // The header section alone decodes to the same header.
        let mut section = message.slice(..view.header_len);
        assert_eq!(Header::decode(&mut section).as_ref(), Ok(header));
        assert!(section.is_empty());
        // Replacing it with our own encoding keeps the message valid.
        let mut rewritten = BytesMut::new();
        header.encode(&mut rewritten);
        rewritten.extend_from_slice(&message[view.header_len..]);
        let again = MessageView::scan(&rewritten.freeze()).expect("rewritten header scans");
        assert_eq!(again.header.as_ref(), Some(header));
        assert_eq!(again.n_sections, view.n_sections);
    }
    // A coordinator reads a declare or discharge out of the same bytes:
    // it must answer with a value or an error, never panic.
    let _ = crate::codec::Control::from_message(&message);
}

/// `paging::record::decode` record after record, as a segment scan walks
/// a file: every decoded record re-encodes to exactly its bytes, and a
/// length refused as too large is over the limit.
pub fn segment_record(data: &[u8]) {
    let mut rest = data;
    let mut again = Vec::new();
    loop {
        match record::decode(rest, MAX_RECORD_BODY_BYTES) {
            Ok((found, used)) => {
                again.clear();
                record::encode(&mut again, found.id, found.body);
                assert_eq!(&again[..], &rest[..used], "re-encoding differs");
                rest = &rest[used..];
            }
            Err(RecordError::TooLarge { body_bytes, .. }) => {
                assert!(body_bytes > u64::from(MAX_RECORD_BODY_BYTES));
                return;
            }
            Err(_) => return,
        }
    }
}

/// A received message dead-lettered (`codec/dead_letter.rs`): the first
/// byte picks the reason and whether a key is carried, the rest is the
/// message as a client sent it. Reading the key never panics; a message
/// that scans gets a copy that scans too, carries the key asked for (and
/// only that), keeps the bare message's bytes at its end, and can die again.
pub fn dead_letter(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let message = Bytes::copy_from_slice(rest);
    let _ = dead_letter_key(&message);
    let reason = [
        DeathReason::Rejected,
        DeathReason::Expired,
        DeathReason::Maxlen,
        DeathReason::DeliveryLimit,
    ][usize::from(pick & 3)];
    let key = (pick & 4 != 0).then_some(u128::from(pick) << 64 | 7);
    let death = Death {
        queue: "/quorum/source",
        reason,
        time_ms: 1_700_000_000_000,
        target: "/quorum/dlq",
        key,
    };
    let Ok(copy) = record_death(&message, &death) else {
        return;
    };
    let scanned = MessageView::scan(&copy.bytes).expect("a dead-lettered copy scans");
    assert!(scanned.n_sections >= 1);
    assert_eq!(
        dead_letter_key(&copy.bytes),
        key,
        "the copy carries the key asked for"
    );
    let again = record_death(&copy.bytes, &death).expect("a dead-lettered copy can die again");
    MessageView::scan(&again.bytes).expect("dying twice still scans");
}

/// Seeds of [`dead_letter`]: a message with header, message-annotations,
/// properties and a body, and its copy after one death, under each pick.
pub(super) fn dead_letter_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let section = |out: &mut BytesMut, code: u64, value: Value| {
        Value::Described(Box::new((Descriptor::Code(code), value))).encode(out);
    };
    let mut out = BytesMut::new();
    Header {
        durable: true,
        priority: 4,
        ttl: Some(60_000),
        first_acquirer: false,
        delivery_count: 2,
    }
    .encode(&mut out);
    section(
        &mut out,
        0x72,
        Value::Map(vec![(
            Value::Symbol("x-app".into()),
            Value::String("kept".into()),
        )]),
    );
    section(
        &mut out,
        0x73,
        Value::List(vec![Value::String("id-1".into())]),
    );
    section(&mut out, 0x75, Value::Binary(Bytes::from_static(b"body")));
    let message = out.freeze();
    let death = Death {
        queue: "/queues/source",
        reason: DeathReason::Rejected,
        time_ms: 1_700_000_000_000,
        target: "/quorum/dlq",
        key: Some(42),
    };
    let mut seeds = Vec::new();
    if let Ok(once) = record_death(&message, &death) {
        seeds.push(("dead_letter", [&[6u8][..], &once.bytes].concat()));
    }
    for pick in [0u8, 1, 2, 7] {
        seeds.push(("dead_letter", [&[pick][..], &message].concat()));
    }
    seeds
}
