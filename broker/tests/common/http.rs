//! A small HTTP/1.1 client for the HTTP endpoint's tests: one request
//! per connection (`Connection: close`), over plain TCP or a stream set up
//! already (TLS), with optional basic auth and body, or as raw bytes; the
//! answer's status, head and body, and the body as JSON.

use std::net::SocketAddr;

use base64::Engine;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::wait::step;

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// A request: method, path, basic-auth user and password, JSON body.
pub struct Call<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub login: Option<(&'a str, &'a str)>,
    pub body: Option<&'a str>,
}

pub fn call<'a>(method: &'a str, path: &'a str, login: Option<(&'a str, &'a str)>) -> Call<'a> {
    Call {
        method,
        path,
        login,
        body: None,
    }
}

impl Call<'_> {
    pub fn request(&self) -> String {
        let mut request = format!(
            "{} {} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n",
            self.method, self.path
        );
        if let Some((user, password)) = self.login {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            request.push_str(&format!("Authorization: Basic {token}\r\n"));
        }
        let body = self.body.unwrap_or("");
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        request
    }

    /// Over plain TCP to `addr`.
    pub async fn send(&self, addr: SocketAddr) -> Answer {
        let stream = step("http connect", TcpStream::connect(addr))
            .await
            .unwrap();
        self.send_on(stream).await
    }

    /// Over a stream already set up (TLS).
    pub async fn send_on(&self, mut stream: impl AsyncRead + AsyncWrite + Unpin) -> Answer {
        step("http exchange", async {
            stream.write_all(self.request().as_bytes()).await.unwrap();
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes).await;
            parse_answer(&bytes)
        })
        .await
    }
}

/// The status, head and body of an answer as read off the socket.
pub fn parse_answer(bytes: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// Send `request` (a whole HTTP/1.1 request, as raw bytes: the refusal
/// tests send malformed and oversized ones) and read the answer's bytes
/// until the server closes the connection.
pub async fn exchange_bytes(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    step("http exchange", async {
        let mut stream = TcpStream::connect(addr).await.expect("connects");
        // The server may answer and close before it read everything.
        let _ = stream.write_all(request).await;
        let mut bytes = Vec::new();
        let _ = stream.read_to_end(&mut bytes).await;
        bytes
    })
    .await
}

/// Send raw `request` bytes and parse the answer.
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> Answer {
    parse_answer(&exchange_bytes(addr, request).await)
}

/// One unlabelled sample of the node's `/metrics/node` (the endpoint at
/// `http`); panics if the family is missing.
pub async fn node_sample(http: SocketAddr, name: &str) -> f64 {
    let request = "GET /metrics/node HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    let answer = exchange(http, request.as_bytes()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let prefix = format!("{name} ");
    answer
        .body
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name} in /metrics/node"))
}
