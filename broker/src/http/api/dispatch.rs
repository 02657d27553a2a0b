//! One management API request: its caller first (the listener rule and
//! the login, `access.rs`), then its route, then the answer of the one
//! endpoint it names.

use std::sync::Arc;

use bytes::Bytes;
use hyper::http::request::Parts;
use hyper::StatusCode;

use super::access::{authenticate, HttpPeer};
use super::route::{route, Route, RouteError};
use super::{cluster, connections, policies, queues, reply};
use crate::http::{Answer, Sources};

/// Answer the API request of `parts` with its (bounded, read) `body`.
pub(in crate::http) async fn answer(
    parts: &Parts,
    body: Bytes,
    peer: HttpPeer,
    sources: &Arc<Sources>,
) -> Answer {
    let caller = match authenticate(parts, peer, &sources.auth).await {
        Ok(caller) => caller,
        Err(refused) => return refused,
    };
    let route = match route(&parts.method, parts.uri.path()) {
        Ok(route) => route,
        Err(RouteError::NotFound) => {
            return reply::error(StatusCode::NOT_FOUND, "no such API path")
        }
        Err(RouteError::Method(allowed)) => return reply::method_not_allowed(allowed),
        Err(RouteError::BadRequest(why)) => return reply::error(StatusCode::BAD_REQUEST, why),
    };
    match route {
        Route::Overview => cluster::overview(sources, &caller),
        Route::Nodes => cluster::nodes(sources, &caller),
        Route::Queues => queues::list(sources, &caller).await,
        Route::Queue(address) => queues::show(sources, &caller, &address).await,
        Route::Declare(address) => queues::declare(sources, &caller, &address).await,
        Route::Delete(address) => queues::delete(sources, &caller, &address).await,
        Route::Purge(address) => queues::purge(sources, &caller, &address).await,
        Route::MoveLeadership(address) => {
            queues::move_leadership(sources, &caller, &address, &body).await
        }
        Route::Connections => connections::list(sources, &caller),
        Route::CloseConnection(id) => connections::close(sources, &caller, id),
        Route::Policies => policies::list(sources, &caller),
        Route::SetPolicies => policies::replace(sources, &caller, &body),
    }
}
