//! TLS on the AMQP port (rustls, ring provider): the server configuration
//! built from the certificate, key and client-CA files, swapped in whole
//! by [`TlsServer::reload`] (SIGHUP in `ramqp-brokerd`; connections already
//! up keep the configuration they started with), and the start of a
//! connection on either listener (`negotiate.rs`).
//!
//! Knows nothing of SASL or AMQP frames beyond the 8-byte protocol
//! headers; hands a byte stream and the client certificate's name to the
//! node, which hands them to the engine.

mod negotiate;
mod peer_name;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::TlsConfig;

pub(crate) use negotiate::{client_name, negotiate, Negotiated};
pub use peer_name::common_name;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A setting is missing.
    #[error("tls: {0}")]
    Config(&'static str),
    /// A PEM file could not be read or holds nothing usable.
    #[error("tls: {path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the certificate, key or CA.
    #[error("tls: {0}")]
    Rustls(String),
}

/// The files a TLS configuration is built from.
#[derive(Debug, Clone)]
struct TlsFiles {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

/// The TLS side of a broker's AMQP listeners, reloadable.
pub struct TlsServer {
    files: TlsFiles,
    acceptor: RwLock<TlsAcceptor>,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no certificate in the file"));
    }
    Ok(certs)
}

fn build(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let certs = load_certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| file_error(&files.key, e))?;
    let provider = Arc::new(ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match &files.client_ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in load_certs(path)? {
                roots.add(cert).map_err(|e| file_error(path, e))?;
            }
            // Clients without a certificate may still log in with PLAIN
            // or SCRAM; one with a certificate must present a valid one.
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Rustls(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

impl TlsServer {
    /// Read the files `config` names; `None` when TLS is not configured.
    pub fn load(config: &TlsConfig) -> Result<Option<TlsServer>, TlsError> {
        if config.listen.is_none() {
            if config.cert_file.is_some() || config.client_ca_file.is_some() {
                return Err(TlsError::Config(
                    "tls.cert_file and tls.client_ca_file need tls.listen",
                ));
            }
            return Ok(None);
        }
        let (Some(cert), Some(key)) = (&config.cert_file, &config.key_file) else {
            return Err(TlsError::Config(
                "tls.listen needs tls.cert_file and tls.key_file",
            ));
        };
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: config.client_ca_file.clone(),
        };
        let acceptor = build(&files)?;
        Ok(Some(TlsServer {
            files,
            acceptor: RwLock::new(acceptor),
        }))
    }

    /// Read the files again and use them for new connections. On an error
    /// the configuration in force stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let acceptor = build(&self.files)?;
        *self.acceptor.write().unwrap_or_else(|e| e.into_inner()) = acceptor;
        Ok(())
    }

    /// Whether client certificates are verified (SASL EXTERNAL offered).
    pub fn verifies_clients(&self) -> bool {
        self.files.client_ca.is_some()
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.acceptor
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
