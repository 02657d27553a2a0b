//! [`FabricTls`]: mutual TLS between the nodes of a cluster (and its admin
//! clients). Every node and client holds a certificate issued by one cluster
//! CA and trusts only that CA, in both directions: a dialler without such a
//! certificate is refused in the TLS handshake, before any fabric frame is
//! read, and a listener without one is not believed by the dialler.
//!
//! Owns the PEM material and its checks; the handshakes themselves are
//! tonic's (rustls with the ring provider). It must not know who the peers
//! are: which node may say what is the cluster name's and node id's business
//! (see `server.rs`), after the certificate has let it in.

use std::path::Path;

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::FabricError;

/// The name a dialler expects in a listener's certificate when none is
/// configured: node certificates carry it as a DNS subject alternative name,
/// so one certificate layout serves every node whatever its address.
pub const DEFAULT_FABRIC_SERVER_NAME: &str = "ramqp-fabric";

/// The PEM files of one node's (or client's) side of the fabric's mutual TLS.
#[derive(Clone)]
pub struct FabricTls {
    /// The cluster CA: the only issuer whose certificates are accepted, for
    /// listeners and diallers alike.
    ca_pem: Vec<u8>,
    /// This side's certificate chain (leaf first), issued by the cluster CA.
    cert_pem: Vec<u8>,
    /// The private key of the leaf certificate.
    key_pem: Vec<u8>,
    /// The DNS name checked in a listener's certificate.
    server_name: String,
}

impl std::fmt::Debug for FabricTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("FabricTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl FabricTls {
    /// Mutual TLS from PEM bytes; fails unless the CA and the chain each hold
    /// at least one certificate and the key is a private key rustls can use.
    pub fn from_pem(
        ca_pem: Vec<u8>,
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        server_name: impl Into<String>,
    ) -> Result<FabricTls, FabricError> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let count = |pem: &[u8], what: &str| -> Result<usize, FabricError> {
            let certs = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| FabricError::Config(format!("fabric TLS {what}: {e}")))?;
            if certs.is_empty() {
                return Err(FabricError::Config(format!(
                    "fabric TLS {what} holds no PEM certificate"
                )));
            }
            Ok(certs.len())
        };
        count(&ca_pem, "CA")?;
        count(&cert_pem, "certificate")?;
        PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| FabricError::Config(format!("fabric TLS key: {e}")))?;
        let server_name = server_name.into();
        if rustls_pki_types::ServerName::try_from(server_name.as_str()).is_err() {
            return Err(FabricError::Config(format!(
                "fabric TLS server name {server_name:?} is not a DNS name or IP address"
            )));
        }
        Ok(FabricTls {
            ca_pem,
            cert_pem,
            key_pem,
            server_name,
        })
    }

    /// Mutual TLS from three PEM files (CA, certificate chain, key).
    pub fn from_files(
        ca: &Path,
        cert: &Path,
        key: &Path,
        server_name: impl Into<String>,
    ) -> Result<FabricTls, FabricError> {
        let read = |path: &Path| {
            std::fs::read(path)
                .map_err(|e| FabricError::Config(format!("reading {}: {e}", path.display())))
        };
        Self::from_pem(read(ca)?, read(cert)?, read(key)?, server_name)
    }

    /// The DNS name checked in a listener's certificate.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    fn identity(&self) -> Identity {
        Identity::from_pem(&self.cert_pem, &self.key_pem)
    }

    fn ca(&self) -> Certificate {
        Certificate::from_pem(&self.ca_pem)
    }

    /// The listener's side: present our certificate, require one from the
    /// cluster CA of every dialler.
    pub(crate) fn server(&self, handshake_timeout: std::time::Duration) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity())
            .client_ca_root(self.ca())
            .client_auth_optional(false)
            .timeout(handshake_timeout)
    }

    /// The dialler's side: trust only the cluster CA, check the server name,
    /// present our certificate.
    pub(crate) fn client(&self, handshake_timeout: std::time::Duration) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.ca())
            .identity(self.identity())
            .domain_name(self.server_name.clone())
            .timeout(handshake_timeout)
    }
}
