//! The measured cases: which operation, on which frame, by which codec,
//! and the untimed set-up (`prepare`) separated from the timed work
//! (`run`), so a bin can time `run` and count its allocations alone.
//!
//! Decoding works like a connection's receive buffer: `prepare` fills one
//! buffer with `n` copies of the frame, `run` splits them off one by one.
//! Encoding appends `n` frames to one output buffer reserved in `prepare`,
//! like the broker's outbox between two writes.

use std::hint::black_box;

use anyhow::{bail, Result};
use bytes::{Bytes, BytesMut};

use super::fixture::BODY_SIZES;
use super::ours::{self, OurMessage};
use super::theirs::{self, TheirMessage};

/// Which codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `broker::codec`
    Ours,
    /// serde_amqp + fe2o3-amqp-types
    Theirs,
}

impl Side {
    /// Both, ours first.
    pub const BOTH: [Side; 2] = [Side::Ours, Side::Theirs];

    /// Short name for case names and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::Theirs => "serde_amqp",
        }
    }
}

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A received transfer as the broker's hot path reads it.
    DecodeHot,
    /// A received transfer with every section decoded.
    DecodeFull,
    /// A transfer frame written in front of stored message bytes.
    EncodeHot,
    /// A transfer frame with its message encoded from typed sections.
    EncodeFull,
    /// A received disposition.
    DecodeDisposition,
    /// A disposition written.
    EncodeDisposition,
}

/// One case: an operation on one body size by one codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseId {
    /// The operation.
    pub op: Op,
    /// Body bytes of the transfer (0 for dispositions).
    pub body: usize,
    /// The codec.
    pub side: Side,
}

impl CaseId {
    /// Every case, each operation with ours then serde_amqp.
    pub fn all() -> Vec<CaseId> {
        let mut ids = Vec::new();
        for body in BODY_SIZES {
            for op in [Op::DecodeHot, Op::DecodeFull, Op::EncodeHot, Op::EncodeFull] {
                for side in Side::BOTH {
                    ids.push(CaseId { op, body, side });
                }
            }
        }
        for op in [Op::DecodeDisposition, Op::EncodeDisposition] {
            for side in Side::BOTH {
                ids.push(CaseId { op, body: 0, side });
            }
        }
        ids
    }

    /// The operation's name without the codec, e.g. `decode-transfer-256-hot`.
    pub fn op_name(&self) -> String {
        match self.op {
            Op::DecodeHot => format!("decode-transfer-{}-hot", self.body),
            Op::DecodeFull => format!("decode-transfer-{}-full", self.body),
            Op::EncodeHot => format!("encode-transfer-{}-hot", self.body),
            Op::EncodeFull => format!("encode-transfer-{}-full", self.body),
            Op::DecodeDisposition => "decode-disposition".to_owned(),
            Op::EncodeDisposition => "encode-disposition".to_owned(),
        }
    }

    /// `op/side`, e.g. `decode-transfer-256-hot/ours`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.op_name(), self.side.name())
    }

    /// The case named `name` (as [`CaseId::name`] writes it).
    pub fn parse(name: &str) -> Option<CaseId> {
        CaseId::all().into_iter().find(|id| id.name() == name)
    }

    /// What the operation does with this codec, for the report.
    pub fn what(&self) -> &'static str {
        match (self.op, self.side) {
            (Op::DecodeHot, Side::Ours) => "decode_frame (transfer performative, payload a slice) + MessageView::scan (sections walked by size, header decoded): the broker's per-transfer work",
            (Op::DecodeHot, Side::Theirs) => "fe2o3 FrameDecoder + every section read as a LazyValue (bytes copied out) + the header deserialized: the nearest serde_amqp offers to a scan",
            (Op::DecodeFull, Side::Ours) => "decode_frame + Value::decode of every section (strings owned, binaries sliced)",
            (Op::DecodeFull, Side::Theirs) => "fe2o3 FrameDecoder + Message<Body<Value>> via DecodeIntoMessage over a SliceReader (fe2o3's receiver)",
            (Op::EncodeHot, Side::Ours) => "Transfer built (tag a Bytes clone) + encode_amqp_frame + stored message bytes appended: the broker's per-delivery work",
            (Op::EncodeHot, Side::Theirs) => "Transfer built (tag an owned Vec) + frame header + serde_amqp Serializer + stored message bytes appended",
            (Op::EncodeFull, Side::Ours) => "Transfer + Header::encode + Value::encode of properties, application-properties, data",
            (Op::EncodeFull, Side::Theirs) => "Transfer + Serializable(&Message<Data>) through serde_amqp's Serializer",
            (Op::DecodeDisposition, Side::Ours) => "decode_frame of a disposition",
            (Op::DecodeDisposition, Side::Theirs) => "fe2o3 FrameDecoder of a disposition",
            (Op::EncodeDisposition, Side::Ours) => "Disposition built + encode_amqp_frame",
            (Op::EncodeDisposition, Side::Theirs) => "Disposition built + frame header + serde_amqp Serializer",
        }
    }
}

/// The bytes every case works on, made once per body size.
pub struct Inputs {
    /// A transfer frame as a publisher sends it (serialized by
    /// serde_amqp, i.e. by the fe2o3-amqp client's types).
    pub transfer_frame: Bytes,
    /// Its message bytes (the payload after the performative).
    pub message: Bytes,
    /// A disposition frame (serialized by serde_amqp).
    pub disposition_frame: Bytes,
}

impl Inputs {
    /// The inputs for a body of `body` bytes.
    pub fn new(body: usize) -> Result<Inputs> {
        let theirs = TheirMessage::new(body);
        let mut frame = BytesMut::new();
        theirs.encode_full(&mut frame)?;
        let transfer_frame = frame.freeze();
        // The message starts after the performative: ask our decoder where.
        let mut buf = BytesMut::from(&transfer_frame[..]);
        let (frame, _) = ours::decode_hot(&mut buf)?;
        let broker::codec::FrameBody::Amqp { payload, .. } = frame.body else {
            bail!("the fixture frame is not an AMQP frame");
        };
        let mut disposition = BytesMut::new();
        theirs::encode_disposition(&mut disposition)?;
        Ok(Inputs {
            transfer_frame,
            message: payload,
            disposition_frame: disposition.freeze(),
        })
    }
}

/// A case ready to run: its inputs and its buffer.
pub struct Runner {
    id: CaseId,
    inputs: Inputs,
    ours: OurMessage,
    theirs: TheirMessage,
    buf: BytesMut,
}

/// Bytes a decode case puts into its receive buffer per `prepare`, at most.
const FILL_BYTES_MAX: usize = 1 << 20;

impl Runner {
    /// Set up `id`.
    pub fn new(id: CaseId) -> Result<Runner> {
        let body = id.body.max(1);
        Ok(Runner {
            id,
            inputs: Inputs::new(body)?,
            ours: OurMessage::new(body),
            theirs: TheirMessage::new(body),
            buf: BytesMut::new(),
        })
    }

    /// The case.
    pub fn id(&self) -> CaseId {
        self.id
    }

    fn frame(&self) -> &Bytes {
        match self.id.op {
            Op::DecodeDisposition | Op::EncodeDisposition => &self.inputs.disposition_frame,
            _ => &self.inputs.transfer_frame,
        }
    }

    /// Operations per `prepare`/`run` pair: as many frames as fit in 1 MiB
    /// (16 at least, 4,096 at most).
    pub fn batch(&self) -> usize {
        (FILL_BYTES_MAX / self.frame().len()).clamp(16, 4096)
    }

    /// Whether the case decodes (else it encodes).
    pub fn decodes(&self) -> bool {
        matches!(
            self.id.op,
            Op::DecodeHot | Op::DecodeFull | Op::DecodeDisposition
        )
    }

    /// The buffer: what is left to decode, or the frames encoded so far.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Untimed: a receive buffer holding `n` frames, or an empty output
    /// buffer with room for `n`.
    pub fn prepare(&mut self, n: usize) {
        let frame = self.frame().clone();
        self.buf.clear();
        self.buf.reserve(frame.len() * n);
        if self.decodes() {
            for _ in 0..n {
                self.buf.extend_from_slice(&frame);
            }
            // Splitting a frame off turns the buffer into a shared one (one
            // allocation); a connection's long-lived receive buffer already
            // is, so that happens here, outside the timed run.
            drop(self.buf.split_to(0));
        }
    }

    /// Timed: `n` operations (`n` at most what `prepare` made room for).
    /// Returns a value that depends on every result, so none is optimised
    /// away.
    pub fn run(&mut self, n: usize) -> Result<u64> {
        let mut sum = 0u64;
        let buf = &mut self.buf;
        for _ in 0..n {
            sum += match (self.id.op, self.id.side) {
                (Op::DecodeHot, Side::Ours) => {
                    black_box(ours::decode_hot(buf)?).1.n_sections as u64
                }
                (Op::DecodeHot, Side::Theirs) => black_box(theirs::decode_hot(buf)?).2 as u64,
                (Op::DecodeFull, Side::Ours) => black_box(ours::decode_full(buf)?).1.len() as u64,
                (Op::DecodeFull, Side::Theirs) => {
                    black_box(theirs::decode_full(buf)?).1.sections() as u64
                }
                (Op::DecodeDisposition, Side::Ours) => {
                    black_box(ours::decode_disposition(buf)?).channel as u64
                }
                (Op::DecodeDisposition, Side::Theirs) => {
                    black_box(theirs::decode_disposition(buf)?).channel as u64
                }
                (Op::EncodeHot, Side::Ours) => {
                    self.ours.encode_hot(buf, &self.inputs.message);
                    buf.len() as u64
                }
                (Op::EncodeHot, Side::Theirs) => {
                    self.theirs.encode_hot(buf, &self.inputs.message)?;
                    buf.len() as u64
                }
                (Op::EncodeFull, Side::Ours) => {
                    self.ours.encode_full(buf);
                    buf.len() as u64
                }
                (Op::EncodeFull, Side::Theirs) => {
                    self.theirs.encode_full(buf)?;
                    buf.len() as u64
                }
                (Op::EncodeDisposition, Side::Ours) => {
                    ours::encode_disposition(buf);
                    buf.len() as u64
                }
                (Op::EncodeDisposition, Side::Theirs) => {
                    theirs::encode_disposition(buf)?;
                    buf.len() as u64
                }
            };
        }
        Ok(black_box(sum))
    }
}
