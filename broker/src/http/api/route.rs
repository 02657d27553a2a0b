//! The management API's routes as a closed enum: a request's method and
//! path become one [`Route`] (queue addresses already validated), or the
//! reason there is none (404, 405 with the methods allowed, 400 for a bad
//! queue name). Queues are named by two path segments, the address's
//! kind and name: `/api/queues/quorum/orders` is `/quorum/orders`,
//! `/api/queues/queues/tmp` is `/queues/tmp`; a name is percent-decoded.
//!
//! Knows no handler and no caller: strings in, a route out.

use hyper::Method;

use crate::queue::QueueAddress;

/// One API request, by what it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// `GET /api/overview`
    Overview,
    /// `GET /api/nodes`
    Nodes,
    /// `GET /api/queues`
    Queues,
    /// `GET /api/queues/{kind}/{name}`
    Queue(QueueAddress),
    /// `PUT /api/queues/{kind}/{name}`
    Declare(QueueAddress),
    /// `DELETE /api/queues/{kind}/{name}`
    Delete(QueueAddress),
    /// `POST /api/queues/{kind}/{name}/purge`
    Purge(QueueAddress),
    /// `POST /api/queues/{kind}/{name}/move-leadership`
    MoveLeadership(QueueAddress),
    /// `GET /api/connections`
    Connections,
    /// `DELETE /api/connections/{id}`
    CloseConnection(u64),
    /// `GET /api/policies`
    Policies,
    /// `PUT /api/policies`
    SetPolicies,
}

/// Why a request has no route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RouteError {
    /// 404: nothing here.
    NotFound,
    /// 405: the path exists for these methods only.
    Method(&'static str),
    /// 400: a queue kind or name that cannot be, or a bad id.
    BadRequest(String),
}

/// Decode `%XX` escapes; `None` for a bad escape or bytes that are not
/// UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The queue address of path segments `kind`, `name`.
fn address(kind: &str, name: &str) -> Result<QueueAddress, RouteError> {
    let prefix = match kind {
        "quorum" => "/quorum/",
        "queues" => "/queues/",
        other => {
            return Err(RouteError::BadRequest(format!(
                "queue kind {other:?}: quorum or queues (for /quorum/<name> or /queues/<name>)"
            )))
        }
    };
    let name = percent_decode(name)
        .ok_or_else(|| RouteError::BadRequest(format!("bad percent-encoding in {name:?}")))?;
    QueueAddress::parse(&format!("{prefix}{name}"))
        .map_err(|e| RouteError::BadRequest(e.to_string()))
}

/// The route of `method` on `path` (which starts with `/api`).
pub(super) fn route(method: &Method, path: &str) -> Result<Route, RouteError> {
    let rest = path.strip_prefix("/api").unwrap_or(path);
    let segments: Vec<&str> = rest
        .trim_start_matches('/')
        .trim_end_matches('/')
        .split('/')
        .collect();
    let get = *method == Method::GET || *method == Method::HEAD;
    let only = |allowed: &'static str, ok: bool, route: Route| match ok {
        true => Ok(route),
        false => Err(RouteError::Method(allowed)),
    };
    match segments.as_slice() {
        ["overview"] => only("GET, HEAD", get, Route::Overview),
        ["nodes"] => only("GET, HEAD", get, Route::Nodes),
        ["queues"] => only("GET, HEAD", get, Route::Queues),
        ["connections"] => only("GET, HEAD", get, Route::Connections),
        ["policies"] => match *method {
            Method::PUT => Ok(Route::SetPolicies),
            _ if get => Ok(Route::Policies),
            _ => Err(RouteError::Method("GET, HEAD, PUT")),
        },
        ["queues", kind, name] => {
            let address = address(kind, name)?;
            match *method {
                Method::GET | Method::HEAD => Ok(Route::Queue(address)),
                Method::PUT => Ok(Route::Declare(address)),
                Method::DELETE => Ok(Route::Delete(address)),
                _ => Err(RouteError::Method("GET, HEAD, PUT, DELETE")),
            }
        }
        ["queues", kind, name, "purge"] => only(
            "POST",
            *method == Method::POST,
            Route::Purge(address(kind, name)?),
        ),
        ["queues", kind, name, "move-leadership"] => only(
            "POST",
            *method == Method::POST,
            Route::MoveLeadership(address(kind, name)?),
        ),
        ["connections", id] => {
            let id = id
                .parse()
                .map_err(|_| RouteError::BadRequest(format!("connection id {id:?}: a number")))?;
            only(
                "DELETE",
                *method == Method::DELETE,
                Route::CloseConnection(id),
            )
        }
        _ => Err(RouteError::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(address: &str) -> QueueAddress {
        QueueAddress::parse(address).unwrap()
    }

    #[test]
    fn paths_become_routes() {
        let get = Method::GET;
        assert_eq!(route(&get, "/api/overview"), Ok(Route::Overview));
        assert_eq!(route(&get, "/api/nodes/"), Ok(Route::Nodes));
        assert_eq!(route(&get, "/api/queues"), Ok(Route::Queues));
        assert_eq!(
            route(&get, "/api/queues/quorum/orders"),
            Ok(Route::Queue(q("/quorum/orders")))
        );
        assert_eq!(
            route(&Method::PUT, "/api/queues/queues/tmp"),
            Ok(Route::Declare(q("/queues/tmp")))
        );
        assert_eq!(
            route(&Method::DELETE, "/api/queues/queues/a%3Ab"),
            Ok(Route::Delete(q("/queues/a:b")))
        );
        assert_eq!(
            route(&Method::POST, "/api/queues/quorum/o/purge"),
            Ok(Route::Purge(q("/quorum/o")))
        );
        assert_eq!(
            route(&Method::POST, "/api/queues/quorum/o/move-leadership"),
            Ok(Route::MoveLeadership(q("/quorum/o")))
        );
        assert_eq!(route(&get, "/api/connections"), Ok(Route::Connections));
        assert_eq!(route(&get, "/api/policies"), Ok(Route::Policies));
        assert_eq!(route(&Method::PUT, "/api/policies"), Ok(Route::SetPolicies));
        assert_eq!(
            route(&Method::POST, "/api/policies"),
            Err(RouteError::Method("GET, HEAD, PUT"))
        );
        assert_eq!(
            route(&Method::DELETE, "/api/connections/17"),
            Ok(Route::CloseConnection(17))
        );
    }

    #[test]
    fn bad_requests_are_told_apart() {
        let get = Method::GET;
        assert_eq!(route(&get, "/api"), Err(RouteError::NotFound));
        assert_eq!(route(&get, "/api/whatever"), Err(RouteError::NotFound));
        assert_eq!(
            route(&Method::POST, "/api/queues"),
            Err(RouteError::Method("GET, HEAD"))
        );
        assert_eq!(
            route(&get, "/api/queues/quorum/o/purge"),
            Err(RouteError::Method("POST"))
        );
        for bad in [
            "/api/queues/topic/x",
            "/api/queues/queues/a%2Fb",
            "/api/queues/queues/a%20b",
            "/api/queues/queues/%zz",
            "/api/queues/queues/%ff",
            &format!("/api/queues/queues/{}", "n".repeat(256)),
        ] {
            assert!(
                matches!(route(&get, bad), Err(RouteError::BadRequest(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            route(&Method::DELETE, "/api/connections/x"),
            Err(RouteError::BadRequest(_))
        ));
    }
}
