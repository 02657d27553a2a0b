//! The bench client's side of `amqps://`: rustls (ring provider) trusting
//! the CA in the PEM file named by `RAMQP_BENCH_TLS_CA`, verifying the
//! URL's host name. Only for measuring what TLS costs a broker; it knows
//! nothing of AMQP.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// The environment variable naming the CA file an `amqps://` URL is
/// verified against.
pub const CA_ENV: &str = "RAMQP_BENCH_TLS_CA";

/// A connector trusting only the CA of [`CA_ENV`].
pub fn connector_from_env() -> Result<TlsConnector> {
    let path = std::env::var(CA_ENV)
        .map_err(|_| anyhow!("amqps:// needs {CA_ENV} naming the server's CA (PEM)"))?;
    let pem = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots
            .add(cert.with_context(|| format!("parsing {path}"))?)
            .with_context(|| format!("adding a CA of {path}"))?;
    }
    if roots.is_empty() {
        bail!("{path} holds no certificate");
    }
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// TLS over `stream`, verifying the server as `host`.
pub async fn handshake(stream: TcpStream, host: &str) -> Result<TlsStream<TcpStream>> {
    let name = ServerName::try_from(host.to_owned())
        .with_context(|| format!("{host:?} is not a server name"))?;
    connector_from_env()?
        .connect(name, stream)
        .await
        .with_context(|| format!("TLS handshake with {host}"))
}
