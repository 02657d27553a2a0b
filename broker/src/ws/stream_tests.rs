//! The byte stream over in-memory pipes: our client and server ends
//! carry bytes both ways, and a raw peer's pings, closes, text messages
//! and broken frames get the answers the RFC asks for.

use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::super::frame::{apply_mask, write_header};
use super::*;

const KEY: [u8; 4] = [9, 8, 7, 6];

fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_header(&mut out, Opcode::Binary, payload.len(), Some(KEY));
    out[0] = first;
    let body = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[body..], KEY, 0);
    out
}

/// Read one unmasked frame a server sent: (first byte, payload).
async fn read_frame(raw: &mut DuplexStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 2];
    raw.read_exact(&mut head).await.unwrap();
    assert_eq!(head[1] & 0x80, 0, "a server's frame is not masked");
    let len = match head[1] & 0x7F {
        126 => usize::from(raw.read_u16().await.unwrap()),
        127 => raw.read_u64().await.unwrap() as usize,
        n => usize::from(n),
    };
    let mut payload = vec![0u8; len];
    raw.read_exact(&mut payload).await.unwrap();
    (head[0], payload)
}

#[tokio::test]
async fn client_and_server_ends_carry_bytes_both_ways() {
    let (a, b) = duplex(1024);
    let mut server = WsByteStream::server(a, &[], 1 << 20);
    let mut client = WsByteStream::client(b, &[], 1 << 20);
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    let send = big.clone();
    let writer = tokio::spawn(async move {
        client.write_all(b"AMQP\x00\x01\x00\x00").await.unwrap();
        client.write_all(&send).await.unwrap();
        client.flush().await.unwrap();
        let mut back = vec![0u8; 5];
        client.read_exact(&mut back).await.unwrap();
        client.shutdown().await.unwrap();
        back
    });
    let mut got = vec![0u8; 8 + big.len()];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got[..8], b"AMQP\x00\x01\x00\x00");
    assert_eq!(&got[8..], &big[..]);
    server.write_all(b"hello").await.unwrap();
    server.flush().await.unwrap();
    assert_eq!(writer.await.unwrap(), b"hello");
    // The client's close ends the server's stream cleanly.
    let mut rest = Vec::new();
    server.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_ping_gets_a_pong_with_its_payload_while_data_flows() {
    let (a, mut raw) = duplex(4096);
    let mut server = WsByteStream::server(a, &[], 1024);
    let mut wire = masked(0x02, b"ab");
    wire.extend(masked(0x89, b"are you there"));
    wire.extend(masked(0x80, b"cd"));
    raw.write_all(&wire).await.unwrap();
    let mut got = [0u8; 4];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"abcd");
    assert_eq!(
        read_frame(&mut raw).await,
        (0x8A, b"are you there".to_vec())
    );
}

#[tokio::test]
async fn a_ping_alone_is_answered_without_any_write_from_the_engine() {
    let (a, mut raw) = duplex(4096);
    let mut server = WsByteStream::server(a, &[], 1024);
    let reading = tokio::spawn(async move {
        let mut buf = [0u8; 16];
        let n = server.read(&mut buf).await.unwrap();
        (server, buf[..n].to_vec())
    });
    raw.write_all(&masked(0x89, b"p")).await.unwrap();
    assert_eq!(read_frame(&mut raw).await, (0x8A, b"p".to_vec()));
    raw.write_all(&masked(0x82, b"x")).await.unwrap();
    let (_server, got) = reading.await.unwrap();
    assert_eq!(got, b"x");
}

#[tokio::test]
async fn a_close_is_echoed_and_ends_the_stream() {
    let (a, mut raw) = duplex(4096);
    let mut server = WsByteStream::server(a, &[], 1024);
    let mut wire = masked(0x82, b"last");
    wire.extend(masked(0x88, &1001u16.to_be_bytes()));
    raw.write_all(&wire).await.unwrap();
    let mut got = Vec::new();
    server.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"last");
    assert_eq!(
        read_frame(&mut raw).await,
        (0x88, 1001u16.to_be_bytes().to_vec())
    );
    // Nothing may follow our close.
    assert!(server.write_all(b"late").await.is_err());
}

#[tokio::test]
async fn violations_are_closed_with_their_code_and_fail_the_read() {
    let cases: [(Vec<u8>, u16); 4] = [
        (masked(0x81, b"text"), close_code::UNSUPPORTED_DATA),
        (masked(0x82, &[0u8; 2000]), close_code::TOO_BIG),
        (vec![0x82, 0x01, b'x'], close_code::PROTOCOL_ERROR),
        (masked(0x88, &[3]), close_code::PROTOCOL_ERROR),
    ];
    for (wire, code) in cases {
        let (a, mut raw) = duplex(8192);
        let mut server = WsByteStream::server(a, &[], 1024);
        raw.write_all(&wire).await.unwrap();
        let mut buf = [0u8; 64];
        let error = server.read(&mut buf).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let (first, payload) = read_frame(&mut raw).await;
        assert_eq!(first, 0x88);
        assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), code);
    }
}

#[tokio::test]
async fn bytes_sent_behind_the_request_are_read_first() {
    let (a, mut raw) = duplex(4096);
    let early = masked(0x82, b"early");
    let mut server = WsByteStream::server(a, &early, 1024);
    raw.write_all(&masked(0x82, b"later")).await.unwrap();
    let mut got = [0u8; 10];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"earlylater");
}

#[tokio::test]
async fn an_end_inside_a_frame_is_an_error_and_shutdown_sends_close() {
    let (a, mut raw) = duplex(4096);
    let mut server = WsByteStream::server(a, &[], 1024);
    server.shutdown().await.unwrap();
    assert_eq!(
        read_frame(&mut raw).await,
        (0x88, 1000u16.to_be_bytes().to_vec())
    );
    let wire = masked(0x82, b"cut short");
    raw.write_all(&wire[..wire.len() - 3]).await.unwrap();
    drop(raw);
    let mut got = Vec::new();
    let error = server.read_to_end(&mut got).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
}
