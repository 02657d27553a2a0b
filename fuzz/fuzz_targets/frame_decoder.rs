//! Fuzzes `decode_frame` with a 64 KiB max-frame-size, as the connection's
//! read loop drives it: decode frames until `None` or an error. The same
//! bytes are also fed split at an arbitrary point (a partial buffer, then
//! the rest), and the outcome must not depend on the split. Every decoded
//! AMQP frame must re-encode into a frame that decodes again.
#![no_main]

use broker::codec::frame::{decode_frame, encode_amqp_frame};
use broker::codec::{CodecError, Frame, FrameBody};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

const MAX_FRAME_SIZE: u32 = 64 * 1024;

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

fn check_reencodes(frame: &Frame) {
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

fuzz_target!(|data: &[u8]| {
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
        check_reencodes(frame);
    }
});
