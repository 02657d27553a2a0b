//! The check that makes the comparison mean something: both decoders read
//! the measured frames (and each other's encoder output) to exactly the
//! fixture's values, and every case's `run` decodes or encodes without an
//! error. A failure here is a bug in one codec or in this harness, and the
//! bin refuses to report timings then.

use anyhow::{ensure, Context, Result};
use bytes::BytesMut;
use serde::Serialize;

use super::canonical::{
    pad_properties, DispositionFields, FullTransfer, HeaderFields, MessageFields, ScannedTransfer,
    TransferFields,
};
use super::cases::{CaseId, Inputs, Runner};
use super::fixture::{self as fx, BODY_SIZES};
use super::ours::{self, OurMessage};
use super::theirs::{self, TheirMessage};

/// The fixture transfer as both decoders must read it.
pub fn expected_transfer(body: usize) -> FullTransfer {
    let s = |v: &str| Some(v.to_owned());
    FullTransfer {
        transfer: TransferFields {
            channel: fx::CHANNEL,
            handle: fx::HANDLE,
            delivery_id: Some(fx::DELIVERY_ID),
            delivery_tag: Some(fx::DELIVERY_TAG.to_vec()),
            message_format: Some(0),
            settled: Some(false),
            more: false,
        },
        message: MessageFields {
            header: Some(expected_header()),
            properties: Some(pad_properties(vec![
                s(&format!("string:{}", fx::MESSAGE_ID)),
                None,
                s(&format!("string:{}", fx::TO)),
                s(&format!("string:{}", fx::SUBJECT)),
                s(&format!("string:{}", fx::REPLY_TO)),
                s(&format!("ulong:{}", fx::CORRELATION_ID)),
                s(&format!("symbol:{}", fx::CONTENT_TYPE)),
                None,
                None,
                s(&format!("timestamp:{}", fx::CREATION_TIME_MS)),
            ])),
            application_properties: Some(vec![
                ("tenant".into(), format!("string:{}", fx::APP_TENANT)),
                ("region".into(), format!("string:{}", fx::APP_REGION)),
                ("seq".into(), format!("long:{}", fx::APP_SEQ)),
                ("retry".into(), format!("bool:{}", fx::APP_RETRY)),
            ]),
            body: vec![fx::body(body)],
        },
    }
}

fn expected_header() -> HeaderFields {
    HeaderFields {
        durable: fx::DURABLE,
        priority: fx::PRIORITY,
        ttl: Some(fx::TTL_MS),
        first_acquirer: false,
        delivery_count: 0,
    }
}

/// The fixture disposition as both decoders must read it.
pub fn expected_disposition() -> DispositionFields {
    DispositionFields {
        channel: fx::CHANNEL,
        receiver: true,
        first: fx::DISPOSITION_FIRST,
        last: Some(fx::DISPOSITION_LAST),
        settled: true,
        state: Some("accepted".to_owned()),
        batchable: false,
    }
}

fn buffer(frame: &[u8]) -> BytesMut {
    BytesMut::from(frame)
}

/// Decode `frame` fully and by the hot path with both codecs; all four
/// readings must match `expected` (the hot ones: header, section count
/// and message bytes).
pub fn check_transfer_frame(frame: &[u8], expected: &FullTransfer) -> Result<()> {
    let ours_full = ours::full(&ours::decode_full(&mut buffer(frame))?)?;
    let theirs_full = theirs::full(&theirs::decode_full(&mut buffer(frame))?)?;
    ensure!(
        ours_full == theirs_full,
        "full decodes disagree:\n ours {ours_full:?}\n serde_amqp {theirs_full:?}"
    );
    ensure!(
        &ours_full == expected,
        "full decode is not the fixture:\n got {ours_full:?}\n want {expected:?}"
    );
    let ours_hot: ScannedTransfer = ours::scanned(&ours::decode_hot(&mut buffer(frame))?)?;
    let theirs_hot = theirs::scanned(&theirs::decode_hot(&mut buffer(frame))?)?;
    ensure!(
        ours_hot == theirs_hot,
        "hot-path decodes disagree:\n ours {ours_hot:?}\n serde_amqp {theirs_hot:?}"
    );
    ensure!(
        ours_hot.transfer == expected.transfer
            && ours_hot.header == expected.message.header
            && ours_hot.sections == 4,
        "hot-path decode is not the fixture: {ours_hot:?}"
    );
    Ok(())
}

/// Decode a disposition frame with both codecs; both must read `expected`.
pub fn check_disposition_frame(frame: &[u8], expected: &DispositionFields) -> Result<()> {
    let ours = ours::disposition_fields(&ours::decode_disposition(&mut buffer(frame))?)?;
    let theirs = theirs::disposition_fields(&theirs::decode_disposition(&mut buffer(frame))?)?;
    ensure!(
        ours == theirs,
        "disposition decodes disagree:\n ours {ours:?}\n serde_amqp {theirs:?}"
    );
    ensure!(
        &ours == expected,
        "disposition is not the fixture: {ours:?}"
    );
    Ok(())
}

/// What the check found besides agreement: frame sizes per encoder, and
/// whether the two encoders wrote the same bytes.
#[derive(Debug, Clone, Serialize)]
pub struct EncodingReport {
    /// Body bytes (0: the disposition).
    pub body: usize,
    /// Frame bytes our encoder wrote.
    pub ours_bytes: usize,
    /// Frame bytes serde_amqp wrote.
    pub serde_amqp_bytes: usize,
    /// Whether the two frames are byte for byte the same.
    pub identical: bool,
}

/// Check every frame of every case both ways (each encoder's output read
/// by both decoders), then run every case for `ops` operations.
pub fn check_all(ops: usize) -> Result<Vec<EncodingReport>> {
    let mut report = Vec::new();
    for body in BODY_SIZES {
        let expected = expected_transfer(body);
        let inputs = Inputs::new(body)?;
        check_transfer_frame(&inputs.transfer_frame, &expected)
            .with_context(|| format!("the publisher's frame, {body} B body"))?;
        let (ours_msg, theirs_msg) = (OurMessage::new(body), TheirMessage::new(body));
        let mut ours_frame = BytesMut::new();
        ours_msg.encode_full(&mut ours_frame);
        check_transfer_frame(&ours_frame, &expected)
            .with_context(|| format!("our encoder's frame, {body} B body"))?;
        let mut hot = (BytesMut::new(), BytesMut::new());
        ours_msg.encode_hot(&mut hot.0, &inputs.message);
        theirs_msg.encode_hot(&mut hot.1, &inputs.message)?;
        for (frame, who) in [(&hot.0, "ours"), (&hot.1, "serde_amqp")] {
            check_transfer_frame(frame, &expected)
                .with_context(|| format!("{who} delivery frame, {body} B body"))?;
        }
        report.push(EncodingReport {
            body,
            ours_bytes: ours_frame.len(),
            serde_amqp_bytes: inputs.transfer_frame.len(),
            identical: ours_frame[..] == inputs.transfer_frame[..],
        });
    }
    let disposition = expected_disposition();
    let mut ours_frame = BytesMut::new();
    ours::encode_disposition(&mut ours_frame);
    let mut theirs_frame = BytesMut::new();
    theirs::encode_disposition(&mut theirs_frame)?;
    for (frame, who) in [(&ours_frame, "ours"), (&theirs_frame, "serde_amqp")] {
        check_disposition_frame(frame, &disposition)
            .with_context(|| format!("{who} disposition frame"))?;
    }
    report.push(EncodingReport {
        body: 0,
        ours_bytes: ours_frame.len(),
        serde_amqp_bytes: theirs_frame.len(),
        identical: ours_frame == theirs_frame,
    });
    for id in CaseId::all() {
        run_case(id, ops).with_context(|| format!("case {}", id.name()))?;
    }
    Ok(report)
}

/// Run one case for `ops` operations; an encode case's output is decoded
/// again by both codecs and must still be the fixture.
pub fn run_case(id: CaseId, ops: usize) -> Result<()> {
    let mut runner = Runner::new(id)?;
    runner.prepare(ops);
    runner.run(ops)?;
    if runner.decodes() {
        ensure!(
            runner.buffer().is_empty(),
            "{} bytes left undecoded",
            runner.buffer().len()
        );
        return Ok(());
    }
    let mut rest = BytesMut::from(runner.buffer());
    for _ in 0..ops {
        let size = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let frame = rest.split_to(size);
        if id.body == 0 {
            check_disposition_frame(&frame, &expected_disposition())?;
        } else {
            check_transfer_frame(&frame, &expected_transfer(id.body))?;
        }
    }
    ensure!(
        rest.is_empty(),
        "{} bytes left after {ops} frames",
        rest.len()
    );
    Ok(())
}
