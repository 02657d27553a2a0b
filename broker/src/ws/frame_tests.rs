//! Frame reader and writer cases: every header length form, masking at
//! every phase, fragmentation and each violation's close code.

use super::*;

const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A client's frame: header (masked with KEY) and masked payload.
fn client_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.push(first);
    write_len(&mut out, payload.len(), true);
    out.extend_from_slice(&KEY);
    let mut body = payload.to_vec();
    apply_mask(&mut body, KEY, 0);
    out.extend_from_slice(&body);
    out
}

fn write_len(out: &mut Vec<u8>, len: usize, masked: bool) {
    let bit = if masked { 0x80 } else { 0 };
    if len < 126 {
        out.push(bit | len as u8);
    } else if len <= 0xFFFF {
        out.push(bit | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Payload bytes and control frames read.
type Read = (Vec<u8>, Vec<(Opcode, Vec<u8>)>);

/// Run the reader over `input` fed `chunk` bytes at a time, taking at most
/// `want` payload bytes a step; the payload bytes and control frames seen.
fn read_all(
    reader: &mut FrameReader,
    input: &[u8],
    chunk: usize,
    want: usize,
) -> Result<Read, Violation> {
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut data = Vec::new();
    let mut controls = Vec::new();
    loop {
        match reader.step(&mut buf, want)? {
            Step::Payload { header, len } => {
                data.extend_from_slice(&buf[header..header + len]);
                buf.drain(..header + len);
            }
            Step::Control {
                opcode,
                header,
                len,
            } => {
                controls.push((opcode, buf[header..header + len].to_vec()));
                buf.drain(..header + len);
            }
            Step::NeedMore if fed == input.len() => return Ok((data, controls)),
            Step::NeedMore => {
                let end = (fed + chunk).min(input.len());
                buf.extend_from_slice(&input[fed..end]);
                fed = end;
            }
        }
    }
}

#[test]
fn every_length_form_reads_back_at_any_chunking() {
    for len in [0usize, 1, 7, 125, 126, 300, 65535, 65536, 70_000] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let wire = client_frame(0x82, &payload);
        for (chunk, want) in [(1, 1), (3, 5), (4096, 4096), (wire.len(), usize::MAX)] {
            let mut reader = FrameReader::new(Role::Server, 1 << 20);
            let (data, controls) = read_all(&mut reader, &wire, chunk, want).unwrap();
            assert_eq!(data, payload, "len {len} chunk {chunk} want {want}");
            assert!(controls.is_empty());
            assert!(reader.at_boundary());
        }
    }
}

#[test]
fn fragments_and_interleaved_pings_make_one_message() {
    let mut wire = client_frame(0x02, b"hello ");
    wire.extend(client_frame(0x89, b"are you there"));
    wire.extend(client_frame(0x00, b""));
    wire.extend(client_frame(0x80, b"world"));
    let mut reader = FrameReader::new(Role::Server, 1024);
    let (data, controls) = read_all(&mut reader, &wire, 2, 3).unwrap();
    assert_eq!(data, b"hello world");
    assert_eq!(controls, vec![(Opcode::Ping, b"are you there".to_vec())]);
    assert!(reader.at_boundary());
}

#[test]
fn a_message_in_progress_is_no_boundary() {
    let wire = client_frame(0x02, b"part");
    let mut reader = FrameReader::new(Role::Server, 1024);
    read_all(&mut reader, &wire, 64, 64).unwrap();
    assert!(!reader.at_boundary());
}

#[test]
fn violations_get_their_close_codes() {
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (client_frame(0x81, b"text"), close_code::UNSUPPORTED_DATA),
        (client_frame(0xC2, b"rsv1"), close_code::PROTOCOL_ERROR),
        (client_frame(0x83, b"opcode 3"), close_code::PROTOCOL_ERROR),
        (
            client_frame(0x80, b"lone continuation"),
            close_code::PROTOCOL_ERROR,
        ),
        (
            client_frame(0x09, b"fragmented ping"),
            close_code::PROTOCOL_ERROR,
        ),
        (client_frame(0x89, &[0u8; 126]), close_code::PROTOCOL_ERROR),
        (
            [client_frame(0x02, b"a"), client_frame(0x82, b"b")].concat(),
            close_code::PROTOCOL_ERROR,
        ),
        (client_frame(0x82, &[0u8; 2000]), close_code::TOO_BIG),
        (
            [
                client_frame(0x02, &[0u8; 600]),
                client_frame(0x80, &[0u8; 600]),
            ]
            .concat(),
            close_code::TOO_BIG,
        ),
        // Unmasked from a client.
        (vec![0x82, 0x01, 0x00], close_code::PROTOCOL_ERROR),
        // A 64-bit length with its top bit set.
        (
            [
                vec![0x82, 0xFF],
                vec![0x80, 0, 0, 0, 0, 0, 0, 0],
                KEY.to_vec(),
            ]
            .concat(),
            close_code::PROTOCOL_ERROR,
        ),
    ];
    for (wire, code) in cases {
        let mut reader = FrameReader::new(Role::Server, 1024);
        let err = read_all(&mut reader, &wire, 5, 64).unwrap_err();
        assert_eq!(err.code, code, "{wire:02x?}: {}", err.reason);
    }
}

#[test]
fn a_client_reads_unmasked_frames_and_refuses_masked_ones() {
    let mut wire = vec![0x82];
    write_len(&mut wire, 3, false);
    wire.extend_from_slice(b"abc");
    let mut reader = FrameReader::new(Role::Client, 1024);
    let (data, _) = read_all(&mut reader, &wire, 2, 64).unwrap();
    assert_eq!(data, b"abc");
    let mut reader = FrameReader::new(Role::Client, 1024);
    let err = read_all(&mut reader, &client_frame(0x82, b"x"), 64, 64).unwrap_err();
    assert_eq!(err.code, close_code::PROTOCOL_ERROR);
}

#[test]
fn written_headers_read_back() {
    for len in [0usize, 125, 126, 65535, 65536] {
        for mask in [None, Some(KEY)] {
            let mut wire = Vec::new();
            write_header(&mut wire, Opcode::Binary, len, mask);
            let header = wire.len();
            let mut payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            if let Some(key) = mask {
                apply_mask(&mut payload, key, 0);
            }
            wire.extend_from_slice(&payload);
            let role = if mask.is_some() {
                Role::Server
            } else {
                Role::Client
            };
            let mut reader = FrameReader::new(role, 1 << 20);
            let (data, _) = read_all(&mut reader, &wire, wire.len(), usize::MAX).unwrap();
            assert_eq!(data.len(), len);
            assert!(data.iter().enumerate().all(|(i, b)| *b == i as u8));
            assert!(header <= MAX_HEADER);
        }
    }
}

#[test]
fn masking_at_any_phase_matches_bytewise() {
    let data: Vec<u8> = (0..41).collect();
    for offset in 0..8 {
        for split in 0..data.len() {
            let mut fast = data.clone();
            apply_mask(&mut fast[..split], KEY, offset);
            apply_mask(&mut fast[split..], KEY, offset + split);
            let slow: Vec<u8> = data
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ KEY[(offset + i) % 4])
                .collect();
            assert_eq!(fast, slow, "offset {offset} split {split}");
        }
    }
}
