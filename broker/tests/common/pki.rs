//! Certificates made in the test: a CA, server certificates for
//! `localhost` / 127.0.0.1 and client certificates with a chosen CN, all
//! with rcgen, written as PEM files into a temporary directory; and the
//! client side of TLS (tokio-rustls, ring) that verifies the server
//! against such a CA.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use super::wait::step;

/// A test certificate authority and the files it issued.
pub struct Pki {
    pub dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A client certificate and its key.
pub struct ClientIdentity {
    pub certs: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Pki {
    /// A new CA called `name`.
    pub fn new(name: &str) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params.self_signed(&ca_key).unwrap();
        Pki {
            dir: tempfile::tempdir().unwrap(),
            ca,
            ca_key,
        }
    }

    /// The CA certificate as a PEM file (for --tls-client-ca, or a client).
    pub fn ca_file(&self) -> PathBuf {
        let path = self.dir.path().join("ca.pem");
        std::fs::write(&path, self.ca.pem()).unwrap();
        path
    }

    /// A server certificate for localhost and 127.0.0.1 as (cert, key)
    /// PEM files named `<stem>.pem` / `<stem>.key`.
    pub fn server_files(&self, stem: &str) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let cert_path = self.dir.path().join(format!("{stem}.pem"));
        let key_path = self.dir.path().join(format!("{stem}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    /// A client certificate whose subject CN is `cn`.
    pub fn client(&self, cn: &str) -> ClientIdentity {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        ClientIdentity {
            certs: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }

    /// A client-certificate PEM pair as files (for Proton).
    pub fn client_files(&self, cn: &str) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let cert_path = self.dir.path().join(format!("client-{cn}.pem"));
        let key_path = self.dir.path().join(format!("client-{cn}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    /// A client that trusts this CA only (and presents `identity`).
    pub fn connector(&self, identity: Option<ClientIdentity>) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let builder = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match identity {
            Some(identity) => builder
                .with_client_auth_cert(identity.certs, identity.key)
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        TlsConnector::from(Arc::new(config))
    }
}

/// TLS to `addr`, verifying the server as `localhost`.
pub async fn tls_connect(
    addr: SocketAddr,
    connector: &TlsConnector,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = step("tcp connect", TcpStream::connect(addr)).await?;
    tls_over(tcp, connector).await
}

/// TLS over an already connected socket, verifying the server as `localhost`.
pub async fn tls_over(
    tcp: TcpStream,
    connector: &TlsConnector,
) -> std::io::Result<TlsStream<TcpStream>> {
    let name = ServerName::try_from("localhost").unwrap();
    step("tls handshake", connector.connect(name, tcp)).await
}
