//! The check the `fabric_batch` fuzz target (and the corpus replay test)
//! runs on the one decoder of bytes from the network in this crate: the
//! prost decoding of a `Batch` off the `Exchange` stream (tonic's codec
//! calls the same `Message::decode`). Pub for the fuzz targets. A failed
//! check panics: that is what libFuzzer reports.
//!
//! It must not know what the layer above puts in envelopes.

use prost::Message;

use crate::proto::{Batch, Frame, Op};

/// Decode `data` as a `Batch`. What decodes must re-encode into bytes that
/// decode to the same batch; the batcher's size accounting
/// (`Frame::batch_size`) must add up to the re-encoding's length; and
/// every frame must survive the trip to an [`crate::Envelope`] and back
/// (what the reader hands the layer above is what was on the wire).
pub fn batch(data: &[u8]) {
    let Ok(batch) = Batch::decode(data) else {
        return;
    };
    let first = batch.encode_to_vec();
    let again = Batch::decode(first.as_slice()).expect("a re-encoded batch decodes");
    assert_eq!(again, batch, "decode of the re-encoding differs");
    assert_eq!(again.encode_to_vec(), first, "re-encoding is not stable");
    let accounted: usize = batch.frames.iter().map(Frame::batch_size).sum();
    assert_eq!(accounted, first.len(), "batch_size does not add up");
    for frame in &batch.frames {
        let envelope = frame.clone().into_envelope();
        assert_eq!(frame.body_size(), envelope.size());
        let op = Op::try_from(frame.op).unwrap_or(Op::Unspecified);
        let back = Frame::from_envelope(op, frame.id, envelope);
        if Op::try_from(frame.op).is_ok() {
            assert_eq!(&back, frame, "a frame changed on its way to an envelope");
        }
    }
}

/// Valid inputs for the `fabric_batch` target (an empty batch, and calls,
/// answers and a message as the writer batches them): the starting corpus.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let call = Frame::from_envelope(
        Op::Call,
        7,
        crate::Envelope::new(0x1234, 3, &b"payload"[..]).with_meta(&b"/quorum/orders"[..]),
    );
    let message = Frame::from_envelope(Op::Message, 0, crate::Envelope::new(9, 4, &b"m"[..]));
    let reply = Frame::answer(7, Ok(bytes::Bytes::from_static(b"answer")));
    let error = Frame::answer(8, Err("no such queue".to_owned()));
    let batches = [
        Batch { frames: Vec::new() },
        Batch {
            frames: vec![call, message, reply, error],
        },
    ];
    batches
        .iter()
        .map(|batch| ("fabric_batch", batch.encode_to_vec()))
        .collect()
}
