//! SCRAM-SHA-256 (RFC 5802, RFC 7677): the stored credential (salt,
//! iterations, StoredKey, ServerKey; never the password) and the server's
//! side of one exchange. Also checks a SASL PLAIN password against the
//! same credential, so one store serves both mechanisms.
//!
//! Knows nothing of AMQP frames or users files: bytes in, bytes out.
//! Passwords are used as their UTF-8 bytes (no SASLprep), which is the
//! same for the ASCII passwords clients normalise.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// PBKDF2 iterations for new credentials (RFC 7677's minimum).
pub const DEFAULT_ITERATIONS: u32 = 4096;
/// Fewer iterations than this in a stored credential is refused: it
/// would make a stolen users file cheap to crack.
pub const MIN_ITERATIONS: u32 = 4096;
/// More than this would let a users file make every login a CPU burn.
pub const MAX_ITERATIONS: u32 = 1_000_000;
const SALT_BYTES: usize = 16;
const PREFIX: &str = "SCRAM-SHA-256$";

/// Why a credential string or an exchange was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// The stored credential is not `SCRAM-SHA-256$<i>:<salt>$<stored>:<server>`.
    #[error("malformed SCRAM credential: {0}")]
    BadCredential(&'static str),
    /// The client sent something RFC 5802 does not allow.
    #[error("malformed SCRAM message: {0}")]
    BadMessage(&'static str),
    /// Channel binding was asked for; none is offered.
    #[error("SCRAM channel binding is not supported")]
    ChannelBinding,
    /// Wrong password, unknown user or a nonce that does not match.
    #[error("SCRAM authentication failed")]
    Failed,
}

/// What a users file keeps of a password.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// The random salt.
    pub salt: Vec<u8>,
    /// H(ClientKey).
    pub stored_key: [u8; 32],
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: [u8; 32],
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length: new_from_slice cannot fail.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts every key length"),
    };
    mac.update(data);
    mac.finalize().into_bytes().into()
}

fn salted_password(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
    out
}

/// Compare in constant time, so timing says nothing about how much of a
/// secret matched.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `len` random bytes from the OS.
pub(crate) fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness is not something to limp on with a weak salt.
        panic!("the operating system gave no random bytes");
    }
    bytes
}

impl ScramCredential {
    /// The credential of `password` with `salt`.
    pub fn derive(password: &str, salt: &[u8], iterations: u32) -> ScramCredential {
        let salted = salted_password(password.as_bytes(), salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        ScramCredential {
            iterations,
            salt: salt.to_vec(),
            stored_key: Sha256::digest(client_key).into(),
            server_key: hmac(&salted, b"Server Key"),
        }
    }

    /// A new credential with a fresh random salt.
    pub fn new(password: &str) -> ScramCredential {
        Self::derive(password, &random_bytes(SALT_BYTES), DEFAULT_ITERATIONS)
    }

    /// Whether `password` (from SASL PLAIN) is the one this was made from.
    pub fn verify_password(&self, password: &[u8]) -> bool {
        let salted = salted_password(password, &self.salt, self.iterations);
        let stored: [u8; 32] = Sha256::digest(hmac(&salted, b"Client Key")).into();
        same_secret(&stored, &self.stored_key)
    }

    /// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, base64
    /// (the form PostgreSQL stores).
    pub fn encode(&self) -> String {
        format!(
            "{PREFIX}{}:{}${}:{}",
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(self.stored_key),
            BASE64.encode(self.server_key)
        )
    }

    /// Parse [`ScramCredential::encode`]'s form.
    pub fn decode(text: &str) -> Result<ScramCredential, ScramError> {
        let rest = text
            .strip_prefix(PREFIX)
            .ok_or(ScramError::BadCredential("missing SCRAM-SHA-256$"))?;
        let (params, keys) = rest
            .split_once('$')
            .ok_or(ScramError::BadCredential("missing '$' before the keys"))?;
        let (iterations, salt) = params.split_once(':').ok_or(ScramError::BadCredential(
            "missing ':' after the iterations",
        ))?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| ScramError::BadCredential("iterations are not a number"))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::BadCredential("iterations out of range"));
        }
        let salt = BASE64
            .decode(salt)
            .map_err(|_| ScramError::BadCredential("salt is not base64"))?;
        if salt.is_empty() {
            return Err(ScramError::BadCredential("empty salt"));
        }
        let (stored, server) = keys
            .split_once(':')
            .ok_or(ScramError::BadCredential("missing ':' between the keys"))?;
        Ok(ScramCredential {
            iterations,
            salt,
            stored_key: key32(stored)?,
            server_key: key32(server)?,
        })
    }
}

fn key32(text: &str) -> Result<[u8; 32], ScramError> {
    BASE64
        .decode(text)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes.as_slice()).ok())
        .ok_or(ScramError::BadCredential("a key is not 32 bytes of base64"))
}

/// A credential for a name that has none: the exchange goes on as for a
/// real user (same messages, same work) and fails at the proof, so a
/// client cannot tell which names exist. The salt is derived from the
/// name with the server's secret, so it is the same on every try.
pub fn decoy_credential(secret: &[u8], username: &str) -> ScramCredential {
    let salt = hmac(secret, username.as_bytes());
    ScramCredential {
        iterations: DEFAULT_ITERATIONS,
        salt: salt[..SALT_BYTES].to_vec(),
        stored_key: hmac(secret, b"decoy stored key"),
        server_key: hmac(secret, b"decoy server key"),
    }
}

/// The server's state between its server-first and the client's final.
#[derive(Debug)]
pub struct ScramServer {
    username: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

/// RFC 5802 saslname: `=2C` is ',' and `=3D` is '='; any other '=' is an error.
fn unescape_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3);
        match code {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return Err(ScramError::BadMessage("bad escape in the user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A printable nonce (RFC 5802: printable ASCII except ',').
fn valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

impl ScramServer {
    /// Take the client-first message. `credential_of` finds the stored
    /// credential of a user name (callers give a decoy for unknown names,
    /// see [`decoy_credential`]); `server_nonce` is this side's random
    /// part. Returns the state and the server-first message.
    pub fn start(
        client_first: &[u8],
        credential_of: impl FnOnce(&str) -> ScramCredential,
        server_nonce: &str,
    ) -> Result<(ScramServer, String), ScramError> {
        let text = std::str::from_utf8(client_first)
            .map_err(|_| ScramError::BadMessage("client-first is not UTF-8"))?;
        let mut parts = text.splitn(3, ',');
        let flag = parts.next().unwrap_or_default();
        let authzid = parts
            .next()
            .ok_or(ScramError::BadMessage("no GS2 header"))?;
        let bare = parts
            .next()
            .ok_or(ScramError::BadMessage("no client-first-bare"))?;
        match flag {
            "n" | "y" => {}
            f if f.starts_with("p=") => return Err(ScramError::ChannelBinding),
            _ => return Err(ScramError::BadMessage("bad GS2 channel-binding flag")),
        }
        let mut fields = bare.split(',');
        let name =
            fields
                .next()
                .and_then(|f| f.strip_prefix("n="))
                .ok_or(ScramError::BadMessage(
                    "client-first-bare must start with n=",
                ))?;
        let client_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramError::BadMessage("no client nonce"))?;
        if bare.contains(",m=") || bare.starts_with("m=") {
            return Err(ScramError::BadMessage(
                "mandatory extensions are not supported",
            ));
        }
        let username = unescape_name(name)?;
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if unescape_name(authzid)? != username {
                return Err(ScramError::BadMessage(
                    "an authorization identity other than the user is not supported",
                ));
            }
        } else if !authzid.is_empty() {
            return Err(ScramError::BadMessage("bad authzid in the GS2 header"));
        }
        if username.is_empty() || !valid_nonce(client_nonce) || !valid_nonce(server_nonce) {
            return Err(ScramError::BadMessage("empty user name or bad nonce"));
        }
        let credential = credential_of(&username);
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let state = ScramServer {
            username,
            gs2_header: format!("{flag},{authzid},"),
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
            credential,
        };
        Ok((state, server_first))
    }

    /// The user name the client gave (not yet proven).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// Take the client-final message: on a valid proof, the server-final
    /// message (`v=<ServerSignature>`) the client checks.
    pub fn finish(self, client_final: &[u8]) -> Result<String, ScramError> {
        let text = std::str::from_utf8(client_final)
            .map_err(|_| ScramError::BadMessage("client-final is not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::BadMessage("no proof"))?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or(ScramError::BadMessage("client-final must start with c="))?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramError::BadMessage("no nonce in client-final"))?;
        let binding = BASE64
            .decode(binding)
            .map_err(|_| ScramError::BadMessage("channel binding is not base64"))?;
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::BadMessage("channel binding does not match"));
        }
        if !same_secret(nonce.as_bytes(), self.nonce.as_bytes()) {
            return Err(ScramError::Failed);
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramError::BadMessage("proof is not base64"))?;
        if proof.len() != 32 {
            return Err(ScramError::Failed);
        }
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let signature = hmac(&self.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(signature).map(|(p, s)| p ^ s).collect();
        let stored: [u8; 32] = Sha256::digest(&client_key).into();
        if !same_secret(&stored, &self.credential.stored_key) {
            return Err(ScramError::Failed);
        }
        let server_signature = hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)))
    }
}

/// A fresh printable server nonce.
pub fn server_nonce() -> String {
    BASE64.encode(random_bytes(18))
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
