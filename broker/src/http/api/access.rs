//! Who may call the management API, and what they may do.
//!
//! - The listener: the API answers only on a loopback listener or over
//!   TLS ([`listener_allows_api`]); anywhere else a password would cross
//!   the network in the clear, so every `/api` request is answered 403
//!   (health and metrics stay open there, as probes and scrapers expect).
//! - The caller: with users configured (a users file, or the deprecated
//!   `[sasl] users`), HTTP basic auth checked against the stored SCRAM
//!   credential ([`Authenticator::check_password`]: PBKDF2 with its salt
//!   and iterations, compared in constant time). A wrong password is
//!   counted and slowed by the same login throttle as SASL, then answered
//!   401 with `WWW-Authenticate: Basic realm="ramqp"`. Without users the
//!   API is open, on a loopback listener only.
//! - What a caller may do ([`Caller`]): the user's configure/write/read
//!   patterns, matched against the queue's address as for an attach, and
//!   the `administrator` tag.
//!
//! Knows no route: headers and the peer in, a caller or a refusal out.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hyper::header::{HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::http::request::Parts;
use hyper::StatusCode;

use super::reply;
use crate::auth::{Access, Authenticator, Permissions};
use crate::http::Answer;

/// The realm a client is asked to log in to.
const REALM: &str = "Basic realm=\"ramqp\"";
/// Longest `Authorization` header value looked at (a name and a password).
const AUTHORIZATION_MAX_BYTES: usize = 4096;

/// The connection a request came in on.
#[derive(Debug, Clone, Copy)]
pub(in crate::http) struct HttpPeer {
    /// The client's address (the login throttle counts per address).
    pub(in crate::http) addr: SocketAddr,
    /// Whether the listener is bound to a loopback address.
    pub(in crate::http) listener_loopback: bool,
    /// Whether the connection is HTTPS.
    pub(in crate::http) secure: bool,
}

/// Whether the API may answer on a listener; why not otherwise.
pub(super) fn listener_allows_api(listener_loopback: bool, secure: bool) -> Result<(), String> {
    if listener_loopback || secure {
        return Ok(());
    }
    Err(
        "the management API answers only on a loopback listener or over TLS \
         ([http] tls = true / --http-tls): this listener is plain HTTP on a \
         non-loopback address, where a password would cross the network in clear"
            .into(),
    )
}

/// Why a caller may not do what it asked: answered 403 with this text.
#[derive(Debug)]
pub(super) struct Refused(String);

impl Refused {
    /// The 403 answer.
    pub(super) fn answer(self) -> Answer {
        reply::error(StatusCode::FORBIDDEN, self.0)
    }
}

/// Who is calling and what they may do.
#[derive(Debug)]
pub(super) struct Caller {
    /// The user logged in; `None` when the API is open (no users).
    pub(super) user: Option<String>,
    permissions: Permissions,
    administrator: bool,
}

impl Caller {
    /// Without users: everything (on a loopback listener).
    fn open() -> Caller {
        Caller {
            user: None,
            permissions: Permissions::all(),
            administrator: true,
        }
    }

    /// Whether the caller has `access` to `address`.
    pub(super) fn may(&self, access: Access, address: &str) -> bool {
        self.permissions.allows(access, address)
    }

    /// Whether the caller may see the queue at `address` (read or
    /// configure it, as RabbitMQ lists queues).
    pub(super) fn may_see(&self, address: &str) -> bool {
        self.may(Access::Read, address) || self.may(Access::Configure, address)
    }

    fn who(&self) -> &str {
        self.user.as_deref().unwrap_or("the caller")
    }

    /// Refused (403) unless the caller has `access` to `address`.
    pub(super) fn require(&self, access: Access, address: &str) -> Result<(), Refused> {
        if self.may(access, address) {
            return Ok(());
        }
        Err(Refused(format!(
            "{} has no {} permission on {address}",
            self.who(),
            access.name()
        )))
    }

    /// Refused (403) unless the caller may see the queue at `address`.
    pub(super) fn require_sight(&self, address: &str) -> Result<(), Refused> {
        if self.may_see(address) {
            return Ok(());
        }
        Err(Refused(format!(
            "{} has neither read nor configure permission on {address}",
            self.who()
        )))
    }

    /// Refused (403) unless the caller has the `administrator` tag.
    pub(super) fn require_administrator(&self) -> Result<(), Refused> {
        if self.administrator {
            return Ok(());
        }
        Err(Refused(format!(
            "{} does not have the administrator tag",
            self.who()
        )))
    }
}

/// The name and password of a `Basic` authorization; `None` when there
/// is no such header, `Some(Err)` when it is malformed.
fn basic_credentials(parts: &Parts) -> Option<Result<(String, String), ()>> {
    let value = parts.headers.get(AUTHORIZATION)?;
    let parsed = (|| {
        if value.len() > AUTHORIZATION_MAX_BYTES {
            return Err(());
        }
        let text = value.to_str().map_err(|_| ())?.trim();
        let (scheme, encoded) = text.split_once(' ').ok_or(())?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(());
        }
        let decoded = BASE64.decode(encoded.trim()).map_err(|_| ())?;
        let decoded = String::from_utf8(decoded).map_err(|_| ())?;
        let (name, password) = decoded.split_once(':').ok_or(())?;
        Ok((name.to_owned(), password.to_owned()))
    })();
    Some(parsed)
}

/// 401 with the challenge.
fn unauthorized(message: &str) -> Answer {
    let mut answer = reply::error(StatusCode::UNAUTHORIZED, message);
    answer
        .headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static(REALM));
    answer
}

/// The caller of one request, or the refusal to send.
pub(super) async fn authenticate(
    parts: &Parts,
    peer: HttpPeer,
    auth: &Arc<Authenticator>,
) -> Result<Caller, Answer> {
    listener_allows_api(peer.listener_loopback, peer.secure)
        .map_err(|reason| reply::error(StatusCode::FORBIDDEN, reason))?;
    if !auth.has_credentials() {
        if !peer.listener_loopback {
            return Err(reply::error(
                StatusCode::FORBIDDEN,
                "no users are configured (--users): the management API is open on a \
                 loopback listener only",
            ));
        }
        return Ok(Caller::open());
    }
    let (name, password) = match basic_credentials(parts) {
        // Not a failed login: a browser asks without credentials first.
        None => return Err(unauthorized("log in with HTTP basic auth")),
        Some(Ok(credentials)) => credentials,
        Some(Err(())) => (String::new(), String::new()),
    };
    // PBKDF2 is milliseconds of CPU: off the runtime's threads.
    let checker = auth.clone();
    let checked_name = name.clone();
    let user = tokio::task::spawn_blocking(move || {
        if checked_name.is_empty() {
            return None;
        }
        checker.check_password(&checked_name, password.as_bytes())
    })
    .await
    .ok()
    .flatten();
    let Some(user) = user else {
        // Counted and slowed as a failed SASL login.
        let delay = auth.throttle().failed(peer.addr.ip());
        tracing::info!(peer = %peer.addr, user = %name, delay_ms = delay.as_millis() as u64,
            "http: login failed");
        tokio::time::sleep(delay).await;
        return Err(unauthorized("wrong user name or password"));
    };
    auth.throttle().succeeded(peer.addr.ip());
    Ok(Caller {
        user: Some(user.name.clone()),
        permissions: user.permissions.clone(),
        administrator: user.administrator,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_needs_a_loopback_listener_or_tls() {
        assert!(listener_allows_api(true, false).is_ok());
        assert!(listener_allows_api(true, true).is_ok());
        assert!(listener_allows_api(false, true).is_ok());
        let refused = listener_allows_api(false, false).unwrap_err();
        assert!(refused.contains("loopback"), "{refused}");
    }

    fn parts_with(authorization: Option<&str>) -> Parts {
        let mut request = hyper::Request::builder().uri("/api/overview");
        if let Some(value) = authorization {
            request = request.header(AUTHORIZATION, value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn basic_credentials_are_read_or_refused() {
        assert_eq!(basic_credentials(&parts_with(None)), None);
        let good = format!("Basic {}", BASE64.encode("ops:pa:ss"));
        assert_eq!(
            basic_credentials(&parts_with(Some(&good))),
            Some(Ok(("ops".into(), "pa:ss".into())))
        );
        let lower = format!("basic {}", BASE64.encode("a:b"));
        assert!(matches!(
            basic_credentials(&parts_with(Some(&lower))),
            Some(Ok(_))
        ));
        for bad in [
            "Bearer abc",
            "Basic !!!",
            "Basic",
            &format!("Basic {}", BASE64.encode("nocolon")),
        ] {
            assert_eq!(
                basic_credentials(&parts_with(Some(bad))),
                Some(Err(())),
                "{bad}"
            );
        }
    }
}
