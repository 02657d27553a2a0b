//! The SASL mechanisms (SASL layer, AMQP 5.3): ANONYMOUS, PLAIN and
//! SCRAM-SHA-256 checked through the [`Authenticator`], EXTERNAL as the
//! verified client certificate's CN. A failed login is answered with
//! outcome `auth` only after the throttle's delay for its source address.
//!
//! The credentials, the SCRAM arithmetic and the permissions live in
//! `crate::auth`; this file only speaks the frames.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;

use super::handshake::HandshakeError;
use super::outbox::Outbox;
use super::transport::ByteStream;
use crate::auth::{scram, Authenticator, Permissions, ScramServer};
use crate::codec::frame::decode_frame;
use crate::codec::{FrameBody, SaslCode, SaslFrame, SaslMechanisms, SaslOutcome, Symbol};

const ANONYMOUS: &str = "ANONYMOUS";
const PLAIN: &str = "PLAIN";
const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
const EXTERNAL: &str = "EXTERNAL";

/// What the SASL layer knows of the peer.
pub(crate) struct SaslPeer<'a> {
    pub(crate) addr: SocketAddr,
    /// The verified client certificate's CN, for EXTERNAL.
    pub(crate) client_name: Option<&'a str>,
    /// Largest SASL frame read from a peer that has not logged in
    /// (`limits.max_frame_size_before_open_bytes`).
    pub(crate) frame_max: u32,
}

/// A successful login.
#[derive(Debug)]
pub(crate) struct Login {
    /// The user; `None` for anonymous.
    pub(crate) user: Option<String>,
    /// What the connection may do.
    pub(crate) permissions: Permissions,
}

impl Login {
    pub(crate) fn anonymous(auth: &Authenticator) -> Login {
        Login {
            user: None,
            permissions: auth.anonymous_grant(),
        }
    }

    fn user(name: String, permissions: Permissions) -> Login {
        Login {
            user: Some(name),
            permissions,
        }
    }
}

async fn read_sasl_frame(
    stream: &mut dyn ByteStream,
    buf: &mut BytesMut,
    frame_max: u32,
) -> Result<SaslFrame, HandshakeError> {
    loop {
        match decode_frame(buf, frame_max) {
            Ok(Some(frame)) => match frame.body {
                FrameBody::Sasl(sasl) => return Ok(sasl),
                _ => return Err(HandshakeError::Sasl("expected a SASL frame".into())),
            },
            Ok(None) => {
                if stream.read_buf(buf).await? == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                }
            }
            Err(e) => return Err(HandshakeError::Sasl(e.to_string())),
        }
    }
}

/// Send `challenge`, return the peer's response.
async fn challenge(
    stream: &mut dyn ByteStream,
    buf: &mut BytesMut,
    out: &mut Outbox,
    challenge: Bytes,
    frame_max: u32,
) -> Result<Bytes, HandshakeError> {
    out.sasl(&SaslFrame::Challenge(challenge));
    out.flush(stream).await?;
    match read_sasl_frame(stream, buf, frame_max).await? {
        SaslFrame::Response(response) => Ok(response),
        _ => Err(HandshakeError::Sasl("expected sasl-response".into())),
    }
}

/// Check a PLAIN response `authzid NUL authcid NUL passwd`.
fn check_plain(auth: &Authenticator, response: &[u8]) -> Result<Login, HandshakeError> {
    let mut parts = response.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HandshakeError::Sasl("malformed PLAIN response".into()));
    };
    let user = String::from_utf8_lossy(user).into_owned();
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(HandshakeError::AuthFailed(user));
    }
    match auth.check_plain(&user, password) {
        Some(permissions) => Ok(Login::user(user, permissions)),
        None => Err(HandshakeError::AuthFailed(user)),
    }
}

/// Run SCRAM-SHA-256 from the client-first message; the login and the
/// server-final message for the outcome's additional-data.
async fn scram_exchange(
    stream: &mut dyn ByteStream,
    buf: &mut BytesMut,
    out: &mut Outbox,
    auth: &Authenticator,
    client_first: Bytes,
    frame_max: u32,
) -> Result<(Login, Bytes), HandshakeError> {
    let (server, server_first) = ScramServer::start(
        &client_first,
        |name| auth.scram_credential(name),
        &scram::server_nonce(),
    )
    .map_err(|e| HandshakeError::Sasl(e.to_string()))?;
    let user = server.username().to_owned();
    let client_final = challenge(stream, buf, out, Bytes::from(server_first), frame_max).await?;
    let server_final = server
        .finish(&client_final)
        .map_err(|_| HandshakeError::AuthFailed(user.clone()))?;
    // The user may have been removed by a reload meanwhile.
    let permissions = auth
        .grant(&user)
        .ok_or_else(|| HandshakeError::AuthFailed(user.clone()))?;
    Ok((Login::user(user, permissions), Bytes::from(server_final)))
}

/// Offer the mechanisms, run the one the peer picks, send the outcome.
pub(crate) async fn exchange(
    stream: &mut dyn ByteStream,
    buf: &mut BytesMut,
    out: &mut Outbox,
    auth: &Authenticator,
    peer: &SaslPeer<'_>,
) -> Result<Login, HandshakeError> {
    let mut mechanisms = Vec::new();
    if peer.client_name.is_some() {
        mechanisms.push(Symbol::from(EXTERNAL));
    }
    if auth.has_credentials() {
        mechanisms.push(Symbol::from(SCRAM_SHA_256));
        mechanisms.push(Symbol::from(PLAIN));
    }
    if auth.anonymous_allowed() {
        mechanisms.push(Symbol::from(ANONYMOUS));
    }
    out.sasl(&SaslFrame::Mechanisms(SaslMechanisms { mechanisms }));
    out.flush(stream).await?;

    let SaslFrame::Init(init) = read_sasl_frame(stream, buf, peer.frame_max).await? else {
        return Err(HandshakeError::Sasl("expected sasl-init".into()));
    };
    let result = match init.mechanism.as_str() {
        ANONYMOUS if auth.anonymous_allowed() => Ok((Login::anonymous(auth), None)),
        PLAIN if auth.has_credentials() => {
            let response = match init.initial_response {
                Some(r) => Ok(r),
                // PLAIN without an initial response: ask for it.
                None => challenge(stream, buf, out, Bytes::new(), peer.frame_max).await,
            };
            response.and_then(|r| check_plain(auth, &r).map(|login| (login, None)))
        }
        SCRAM_SHA_256 if auth.has_credentials() => match init.initial_response {
            Some(first) => scram_exchange(stream, buf, out, auth, first, peer.frame_max)
                .await
                .map(|(login, last)| (login, Some(last))),
            None => Err(HandshakeError::Sasl(
                "SCRAM-SHA-256 needs the client-first message in sasl-init".into(),
            )),
        },
        EXTERNAL => match peer.client_name {
            Some(name) => external(auth, name, init.initial_response.as_deref()),
            None => Err(HandshakeError::Sasl(
                "EXTERNAL needs a client certificate".into(),
            )),
        },
        other => Err(HandshakeError::Sasl(format!(
            "mechanism {other:?} not offered"
        ))),
    };
    match result {
        Ok((login, additional_data)) => {
            out.sasl(&SaslFrame::Outcome(SaslOutcome {
                code: SaslCode::Ok,
                additional_data,
            }));
            out.flush(stream).await?;
            Ok(login)
        }
        Err(HandshakeError::Io(e)) => Err(HandshakeError::Io(e)),
        Err(error) => {
            // Counted and slowed, so passwords cannot be tried at wire
            // speed; the delay grows per source address (auth::login_throttle).
            let delay = auth.throttle().failed(peer.addr.ip());
            tracing::info!(peer = %peer.addr, %error, delay_ms = delay.as_millis() as u64, "login failed");
            tokio::time::sleep(delay).await;
            out.sasl(&SaslFrame::Outcome(SaslOutcome {
                code: SaslCode::Auth,
                additional_data: None,
            }));
            Err(error)
        }
    }
}

/// EXTERNAL: the identity is the certificate's CN; a client may name it
/// in its response, and must then name that one.
fn external(
    auth: &Authenticator,
    name: &str,
    response: Option<&[u8]>,
) -> Result<(Login, Option<Bytes>), HandshakeError> {
    if let Some(asked) = response.filter(|r| !r.is_empty()) {
        if asked != name.as_bytes() {
            return Err(HandshakeError::AuthFailed(
                String::from_utf8_lossy(asked).into_owned(),
            ));
        }
    }
    match auth.external_grant(name) {
        Some(permissions) => Ok((Login::user(name.to_owned(), permissions), None)),
        None => Err(HandshakeError::AuthFailed(name.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Access;
    use crate::config::{SaslConfig, User};

    fn auth() -> Authenticator {
        Authenticator::from_config(&SaslConfig {
            allow_anonymous: Some(false),
            users_file: None,
            users: vec![User {
                username: "alice".into(),
                password: "s3cret".into(),
            }],
        })
        .unwrap()
    }

    #[test]
    fn plain_accepts_the_right_password_only() {
        let auth = auth();
        let login = check_plain(&auth, b"\0alice\0s3cret").unwrap();
        assert_eq!(login.user.as_deref(), Some("alice"));
        assert!(login.permissions.allows(Access::Read, "/queues/x"));
        assert!(check_plain(&auth, b"alice\0alice\0s3cret").is_ok());
        for (bad, auth_failure) in [
            (&b"\0alice\0s3creT"[..], true),
            (b"\0bob\0s3cret", true),
            (b"mallory\0alice\0s3cret", true),
            (b"alice s3cret", false),
        ] {
            match check_plain(&auth, bad) {
                Err(HandshakeError::AuthFailed(_)) => assert!(auth_failure, "{bad:?}"),
                Err(HandshakeError::Sasl(_)) => assert!(!auth_failure, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
