//! `GET /api/connections` and `DELETE /api/connections/{id}` (both need
//! the administrator tag): the engine's table of live AMQP connections,
//! and closing one of them, which its connection task does as a graceful
//! shutdown would: `close` with amqp:connection:forced, the description
//! saying an operator closed it.

use std::time::UNIX_EPOCH;

use hyper::StatusCode;
use serde::Serialize;

use super::access::Caller;
use super::reply;
use crate::engine::ConnectionInfo;
use crate::http::{Answer, Sources};

#[derive(Debug, Serialize)]
struct ConnectionView {
    id: u64,
    peer: String,
    /// `tcp`, `tls` or `websocket`.
    transport: &'static str,
    /// Whether the bytes are encrypted (TLS, wss).
    tls: bool,
    /// `None` before the peer's `open` is in, or anonymous.
    user: Option<String>,
    container_id: Option<String>,
    sessions: u64,
    /// Unix time, seconds, when the connection was accepted.
    opened_at: u64,
    age_seconds: u64,
}

impl From<ConnectionInfo> for ConnectionView {
    fn from(c: ConnectionInfo) -> ConnectionView {
        ConnectionView {
            id: c.id,
            peer: c.peer.to_string(),
            transport: c.transport.name(),
            tls: c.secure,
            user: c.user,
            container_id: c.container_id,
            sessions: c.sessions,
            opened_at: c
                .opened_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            age_seconds: c.accepted_at.elapsed().as_secs(),
        }
    }
}

/// `GET /api/connections`.
pub(super) fn list(sources: &Sources, caller: &Caller) -> Answer {
    if let Err(refused) = caller.require_administrator() {
        return refused.answer();
    }
    let list: Vec<ConnectionView> = sources
        .connections
        .list()
        .into_iter()
        .map(ConnectionView::from)
        .collect();
    reply::json(StatusCode::OK, &list)
}

/// `DELETE /api/connections/{id}`: 204 once its task was asked to close
/// it (it does so at once), 404 for an id not served now.
pub(super) fn close(sources: &Sources, caller: &Caller, id: u64) -> Answer {
    if let Err(refused) = caller.require_administrator() {
        return refused.answer();
    }
    if !sources.connections.close(id) {
        return reply::error(StatusCode::NOT_FOUND, format!("no connection {id}"));
    }
    tracing::info!(
        connection = id,
        user = caller.user.as_deref(),
        "http: connection closed by an operator"
    );
    reply::empty(StatusCode::NO_CONTENT)
}
