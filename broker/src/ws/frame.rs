//! RFC 6455 framing (section 5): reading frame headers out of received
//! bytes, unmasking payloads in place, and writing frame headers. A sans-io
//! state machine: it never touches a socket, so `stream.rs` drives it over
//! any byte stream and the fuzz check drives it over arbitrary bytes.
//!
//! Knows frames, fragmentation and the close codes of a protocol
//! violation; not what the payload means (AMQP bytes to the engine) nor
//! what to do about a ping or a close (the stream answers them).

/// A frame's opcode (RFC 6455 5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// Which end of the WebSocket we are: a server reads masked frames and
/// writes unmasked ones, a client the other way round (RFC 6455 5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Server,
    Client,
}

/// Close codes we end a WebSocket with (RFC 6455 7.4.1).
pub(crate) mod close_code {
    /// A clean close.
    pub(crate) const NORMAL: u16 = 1000;
    /// A frame broke the protocol.
    pub(crate) const PROTOCOL_ERROR: u16 = 1002;
    /// A text message: the AMQP binding takes binary only.
    pub(crate) const UNSUPPORTED_DATA: u16 = 1003;
    /// A message over the configured limit.
    pub(crate) const TOO_BIG: u16 = 1009;
}

/// Received bytes that end the WebSocket: the close code to send and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
}

fn violation(code: u16, reason: &'static str) -> Violation {
    Violation { code, reason }
}

/// What the next received bytes hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Message payload: after `header` bytes of frame header (0 inside a
    /// frame), `len` bytes now unmasked in place. Consume `header + len`.
    Payload { header: usize, len: usize },
    /// A whole control frame: its payload (unmasked) is at
    /// `header..header + len`. Consume `header + len`.
    Control {
        opcode: Opcode,
        header: usize,
        len: usize,
    },
    /// Too few bytes for the next header or control frame, or none of a
    /// payload: read more.
    NeedMore,
}

/// The data frame being read.
#[derive(Debug)]
struct DataFrame {
    left: u64,
    mask: Option<[u8; 4]>,
    /// Payload bytes of this frame unmasked so far (the mask's phase).
    offset: usize,
    fin: bool,
}

/// Reads frames out of received bytes, one step at a time.
#[derive(Debug)]
pub(crate) struct FrameReader {
    role: Role,
    max_message: u64,
    /// The data frame whose payload is being read.
    frame: Option<DataFrame>,
    /// Bytes of the binary message in progress; `None` between messages.
    message: Option<u64>,
}

/// The longest frame header: 2 bytes, an 8-byte length, a 4-byte mask.
pub(crate) const MAX_HEADER: usize = 14;

/// The most bytes one control frame takes (header and payload): what a
/// reader's buffer must at least hold.
pub(crate) const MAX_CONTROL_FRAME: usize = MAX_HEADER + 125;

impl FrameReader {
    /// A reader for `role`, refusing messages over `max_message` bytes.
    pub(crate) fn new(role: Role, max_message: usize) -> FrameReader {
        FrameReader {
            role,
            max_message: max_message as u64,
            frame: None,
            message: None,
        }
    }

    /// Whether the bytes so far end between frames of a finished message
    /// (an end of stream here is clean).
    pub(crate) fn at_boundary(&self) -> bool {
        self.frame.is_none() && self.message.is_none()
    }

    /// The next step over `input`, the bytes received and not consumed;
    /// at most `want` payload bytes are unmasked and returned.
    pub(crate) fn step(&mut self, input: &mut [u8], want: usize) -> Result<Step, Violation> {
        if let Some(frame) = self.frame.as_mut() {
            let len = input.len().min(want);
            let len = usize::try_from(frame.left).map_or(len, |left| len.min(left));
            if len == 0 && frame.left > 0 {
                return Ok(Step::NeedMore);
            }
            if let Some(mask) = frame.mask {
                apply_mask(&mut input[..len], mask, frame.offset);
            }
            frame.offset = frame.offset.wrapping_add(len);
            frame.left -= len as u64;
            if frame.left == 0 {
                if frame.fin {
                    self.message = None;
                }
                self.frame = None;
            }
            return Ok(Step::Payload { header: 0, len });
        }
        let Some((head, header)) = parse_header(input, self.role)? else {
            return Ok(Step::NeedMore);
        };
        if head.opcode.is_control() {
            // Control frames are short and whole (5.5), so they are
            // answered from one buffer.
            let len = head.len as usize;
            if input.len() < header + len {
                return Ok(Step::NeedMore);
            }
            if let Some(mask) = head.mask {
                apply_mask(&mut input[header..header + len], mask, 0);
            }
            return Ok(Step::Control {
                opcode: head.opcode,
                header,
                len,
            });
        }
        let so_far = match (head.opcode, self.message) {
            (Opcode::Continuation, Some(so_far)) => so_far,
            (Opcode::Continuation, None) => {
                return Err(violation(
                    close_code::PROTOCOL_ERROR,
                    "continuation frame outside a message",
                ))
            }
            (_, Some(_)) => {
                return Err(violation(
                    close_code::PROTOCOL_ERROR,
                    "new message before the last one ended",
                ))
            }
            (Opcode::Text, None) => {
                return Err(violation(
                    close_code::UNSUPPORTED_DATA,
                    "AMQP over WebSocket takes binary messages only",
                ))
            }
            (_, None) => 0,
        };
        let total = so_far.saturating_add(head.len);
        if total > self.max_message {
            return Err(violation(close_code::TOO_BIG, "message too large"));
        }
        self.message = if head.fin { None } else { Some(total) };
        if head.len > 0 {
            self.frame = Some(DataFrame {
                left: head.len,
                mask: head.mask,
                offset: 0,
                fin: head.fin,
            });
            // The payload that came with the header, in the same step.
            let rest = &mut input[header..];
            if let Step::Payload { len, .. } = self.step(rest, want)? {
                return Ok(Step::Payload { header, len });
            }
        }
        // An empty frame (its message ends here when `fin`).
        Ok(Step::Payload { header, len: 0 })
    }
}

/// A parsed frame header.
#[derive(Debug)]
struct Header {
    fin: bool,
    opcode: Opcode,
    mask: Option<[u8; 4]>,
    len: u64,
}

/// The header at the start of `input` and its length, or `None` when it
/// is not all there yet.
fn parse_header(input: &[u8], role: Role) -> Result<Option<(Header, usize)>, Violation> {
    let [b0, b1, ..] = *input else {
        return Ok(None);
    };
    if b0 & 0x70 != 0 {
        // No extension was negotiated, so no reserved bit may be set.
        return Err(violation(close_code::PROTOCOL_ERROR, "reserved bits set"));
    }
    let fin = b0 & 0x80 != 0;
    let opcode = Opcode::from_bits(b0 & 0x0F)
        .ok_or_else(|| violation(close_code::PROTOCOL_ERROR, "unknown opcode"))?;
    let masked = b1 & 0x80 != 0;
    match (role, masked) {
        (Role::Server, false) => {
            return Err(violation(
                close_code::PROTOCOL_ERROR,
                "client frame not masked",
            ))
        }
        (Role::Client, true) => {
            return Err(violation(close_code::PROTOCOL_ERROR, "server frame masked"))
        }
        _ => {}
    }
    let (len, mut at) = match b1 & 0x7F {
        126 => match input.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match input.get(2..10).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            Some(b) => (u64::from_be_bytes(b), 10),
            None => return Ok(None),
        },
        short => (u64::from(short), 2),
    };
    if len >> 63 != 0 {
        return Err(violation(
            close_code::PROTOCOL_ERROR,
            "payload length with its top bit set",
        ));
    }
    if opcode.is_control() && (len > 125 || !fin) {
        return Err(violation(
            close_code::PROTOCOL_ERROR,
            "control frame fragmented or over 125 bytes",
        ));
    }
    let mask = if masked {
        match input
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
        {
            Some(key) => {
                at += 4;
                Some(key)
            }
            None => return Ok(None),
        }
    } else {
        None
    };
    Ok(Some((
        Header {
            fin,
            opcode,
            mask,
            len,
        },
        at,
    )))
}

/// Write the header of a final (unfragmented) frame of `len` payload
/// bytes into `out`, masked with `mask` when given.
pub(crate) fn write_header(out: &mut Vec<u8>, opcode: Opcode, len: usize, mask: Option<[u8; 4]>) {
    out.push(0x80 | opcode.bits());
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(mask_bit | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
}

/// XOR `data` with the mask, `offset` bytes into the frame's payload
/// (masking and unmasking are the same operation, 5.3). Eight bytes at a
/// time: this runs over every byte a client sends.
pub(crate) fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: usize) {
    let phase = offset % 4;
    let key = [
        mask[phase],
        mask[(phase + 1) % 4],
        mask[(phase + 2) % 4],
        mask[(phase + 3) % 4],
    ];
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i % 4];
    }
}

/// The `ws_frames` fuzz check: the reader never panics on any bytes, and
/// reads the same payload and ends with the same violation whether it is
/// fed all bytes at once or a few at a time. The first byte picks the
/// role and the message limit, the second the chunk size.
pub(crate) fn fuzz_check(data: &[u8]) {
    let [pick, chunk, input @ ..] = data else {
        return;
    };
    let role = if pick & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let max = usize::from(pick >> 1) * 64;
    let chunk = usize::from(*chunk % 16) + 1;
    let whole = read_through(role, max, input, input.len().max(1), usize::MAX);
    let pieces = read_through(role, max, input, chunk, chunk + 1);
    assert_eq!(whole, pieces, "chunking changed what was read");
}

/// Frames our writer makes, as `ws_frames` inputs: a server reading a
/// client's masked message (one frame; fragments around a ping; a close)
/// and a client reading a server's unmasked one.
pub(crate) fn fuzz_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let key = [0x11, 0x22, 0x33, 0x44];
    let masked = |opcode: Opcode, payload: &[u8]| {
        let mut out = Vec::new();
        write_header(&mut out, opcode, payload.len(), Some(key));
        let body = out.len();
        out.extend_from_slice(payload);
        apply_mask(&mut out[body..], key, 0);
        out
    };
    let amqp_header = b"AMQP\x00\x01\x00\x00";
    let mut fragmented = masked(Opcode::Binary, amqp_header);
    fragmented[0] &= 0x7F; // not final
    fragmented.extend(masked(Opcode::Ping, b"ping"));
    fragmented.extend(masked(Opcode::Continuation, &[0u8; 300]));
    let mut unmasked = Vec::new();
    write_header(&mut unmasked, Opcode::Binary, amqp_header.len(), None);
    unmasked.extend_from_slice(amqp_header);
    let server = |frames: Vec<u8>| [vec![0x40, 3], frames].concat();
    vec![
        ("ws_frames", server(masked(Opcode::Binary, amqp_header))),
        ("ws_frames", server(fragmented)),
        (
            "ws_frames",
            server(masked(Opcode::Close, &1000u16.to_be_bytes())),
        ),
        ("ws_frames", [vec![0x41, 0], unmasked].concat()),
    ]
}

/// Payload bytes, control frames and the violation (if any) read from
/// `input` fed `chunk` bytes at a time, at most `want` payload bytes per
/// step.
#[allow(clippy::type_complexity)]
fn read_through(
    role: Role,
    max: usize,
    input: &[u8],
    chunk: usize,
    want: usize,
) -> (Vec<u8>, Vec<(Opcode, Vec<u8>)>, Option<u16>) {
    let mut reader = FrameReader::new(role, max);
    let mut buf: Vec<u8> = Vec::new();
    let (mut fed, mut data, mut controls) = (0, Vec::new(), Vec::new());
    loop {
        match reader.step(&mut buf, want) {
            Ok(Step::Payload { header, len }) => {
                assert!(header + len <= buf.len() && len <= want);
                data.extend_from_slice(&buf[header..header + len]);
                buf.drain(..header + len);
            }
            Ok(Step::Control {
                opcode,
                header,
                len,
            }) => {
                assert!(len <= 125 && header + len <= buf.len());
                controls.push((opcode, buf[header..header + len].to_vec()));
                buf.drain(..header + len);
            }
            Ok(Step::NeedMore) if fed == input.len() => return (data, controls, None),
            Ok(Step::NeedMore) => {
                let end = (fed + chunk).min(input.len());
                buf.extend_from_slice(&input[fed..end]);
                fed = end;
            }
            Err(violation) => return (data, controls, Some(violation.code)),
        }
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
