//! The HTTP listener: HTTP/1.1 over hyper (over TLS with the AMQP
//! listener's certificate when `[http] tls` is set), one task per
//! connection, and the routes: `/api/...` goes to the management API
//! (`api/`), the rest are health and metrics. Everything a client can make
//! it hold is bounded:
//!
//! - connections: [`MAX_CONNECTIONS`] at once (one past it is closed at
//!   once);
//! - the request head: [`MAX_HEAD_BYTES`] (hyper answers 431 past it) and
//!   [`HEAD_TIMEOUT`] to send it, also the idle time between requests on a
//!   kept-alive connection;
//! - the body: [`MAX_BODY_BYTES`] (health and metrics read none), and
//!   [`API_MAX_BODY_BYTES`] for the API (a larger one is answered 413 and
//!   the connection closed);
//! - the TLS handshake: [`HEAD_TIMEOUT`];
//! - the time to answer: [`REQUEST_TIMEOUT`] (503 past it), and the life
//!   of a connection: [`CONNECTION_MAX`].
//!
//! A scrape is gathered and encoded on a blocking thread (it is CPU work of
//! a few milliseconds with many queues); no lock is held across an await.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::api::HttpPeer;
use super::metrics::Scope;
use super::{Answer, Sources};
use crate::tls::TlsServer;

/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// Largest request head (request line and headers); hyper's smallest
/// read buffer is this size too.
pub(crate) const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Largest request body read (and dropped) by health and metrics, which
/// take none.
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024;
/// Largest request body of the management API (its bodies are a few
/// bytes of JSON).
pub(crate) const API_MAX_BODY_BYTES: usize = 64 * 1024;
/// Time to send a request head, and to start the next one.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to answer one request once its head is in.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest life of one connection.
pub(crate) const CONNECTION_MAX: Duration = Duration::from_secs(300);
/// Pause after a failed accept (out of file descriptors), so the loop
/// does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Serve the endpoint on `listener` (HTTPS with `tls`) until the task is
/// aborted or the node is gone (the sender of `stopping` dropped); the
/// connection tasks end with it. While the node stops (`stopping` true)
/// it goes on answering, so `/readyz` says so.
pub(crate) async fn serve(
    listener: TcpListener,
    sources: Arc<Sources>,
    tls: Option<Arc<TlsServer>>,
    mut stopping: watch::Receiver<bool>,
) {
    // The API's rule looks at the address the listener is bound to (see
    // `api/access.rs`); unknown counts as not loopback.
    let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            changed = stopping.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => match slots.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let peer = HttpPeer {
                            addr,
                            listener_loopback: loopback,
                            secure: tls.is_some(),
                        };
                        connections.spawn(serve_connection(
                            stream,
                            peer,
                            tls.clone(),
                            sources.clone(),
                            permit,
                        ));
                    }
                    // Over the limit: closed at once.
                    Err(_) => drop(stream),
                },
                Err(error) => {
                    tracing::warn!(%error, "http: accept failed");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            },
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: HttpPeer,
    tls: Option<Arc<TlsServer>>,
    sources: Arc<Sources>,
    permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    match tls {
        None => serve_http(stream, peer, sources).await,
        Some(tls) => {
            match tokio::time::timeout(HEAD_TIMEOUT, tls.acceptor().accept(stream)).await {
                Ok(Ok(stream)) => serve_http(stream, peer, sources).await,
                Ok(Err(error)) => {
                    tracing::debug!(peer = %peer.addr, %error, "http: TLS handshake failed");
                }
                Err(_) => tracing::debug!(peer = %peer.addr, "http: TLS handshake timed out"),
            }
        }
    }
    drop(permit);
}

async fn serve_http<S>(stream: S, peer: HttpPeer, sources: Arc<Sources>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let sources = sources.clone();
        async move { Ok::<_, Infallible>(answer(request, peer, sources).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_header_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(CONNECTION_MAX, connection).await {
        Ok(Ok(())) | Err(_) => {}
        Ok(Err(error)) => tracing::debug!(%error, "http: connection ended"),
    }
}

async fn answer(request: Request<Incoming>, peer: HttpPeer, sources: Arc<Sources>) -> Answer {
    match tokio::time::timeout(REQUEST_TIMEOUT, route(request, peer, sources)).await {
        Ok(answer) => answer,
        Err(_) => closing(text(
            StatusCode::SERVICE_UNAVAILABLE,
            "request timed out\n".into(),
        )),
    }
}

async fn route(request: Request<Incoming>, peer: HttpPeer, sources: Arc<Sources>) -> Answer {
    let path = request.uri().path();
    let api = path == "/api" || path.starts_with("/api/");
    let max_body = if api {
        API_MAX_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        return too_large(max_body);
    }
    let (parts, body) = request.into_parts();
    // Read (bounded) whatever body there is, so the connection can take
    // the next request; only the API looks at it.
    let body = match Limited::new(body, max_body).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return too_large(max_body),
    };
    if api {
        return super::api::answer(&parts, body, peer, &sources).await;
    }
    if parts.method != Method::GET && parts.method != Method::HEAD {
        let mut answer = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
        answer
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return answer;
    }
    match parts.uri.path() {
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match super::health::readiness(&sources) {
            Ok(()) => text(StatusCode::OK, "ready\n".into()),
            Err(reason) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")),
        },
        "/metrics" => metrics(sources, Scope::PerQueue).await,
        "/metrics/node" => metrics(sources, Scope::Node).await,
        "/" => super::page::answer(),
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

async fn metrics(sources: Arc<Sources>, scope: Scope) -> Answer {
    match tokio::task::spawn_blocking(move || super::metrics::render(&sources, scope)).await {
        Ok(Ok(body)) => {
            let mut answer = Response::new(Full::new(Bytes::from(body)));
            answer.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(super::metrics::CONTENT_TYPE),
            );
            answer
        }
        Ok(Err(_)) | Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics could not be encoded\n".into(),
        ),
    }
}

pub(super) fn text(status: StatusCode, body: String) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(body)));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

/// The answer ends the connection (its request was not read to the end).
fn closing(mut answer: Answer) -> Answer {
    answer
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    answer
}

fn too_large(max_body: usize) -> Answer {
    closing(text(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body over {max_body} bytes\n"),
    ))
}
