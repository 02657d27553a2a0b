//! Mutual TLS on the fabric over real TCP, with certificates made here by
//! rcgen: a mesh of nodes holding certificates from one cluster CA carries
//! calls; a node or client whose certificate comes from another CA is
//! refused in the handshake (nothing reaches the handler); a plaintext
//! dialler is refused; a listener whose certificate lacks the fabric's
//! server name is not believed.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use ramqpd_fabric::{
    CallError, Client, ClientConfig, Envelope, FabricConfig, FabricTls, LinkState, NodeId,
    DEFAULT_FABRIC_SERVER_NAME,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// A certificate authority of the test.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// A node certificate: `dns_name` as its subject alternative name, good
    /// for both ends of a connection (a node listens and dials).
    fn issue(&self, cn: &str, dns_name: &str) -> (Vec<u8>, Vec<u8>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![dns_name.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem().into_bytes(), key.serialize_pem().into_bytes())
    }

    /// Mutual TLS trusting `trusted` and presenting a certificate of `self`.
    fn tls(&self, trusted: &Ca, cn: &str, dns_name: &str) -> FabricTls {
        let (cert, key) = self.issue(cn, dns_name);
        FabricTls::from_pem(
            trusted.cert.pem().into_bytes(),
            cert,
            key,
            DEFAULT_FABRIC_SERVER_NAME,
        )
        .expect("valid TLS material")
    }
}

fn tls_config(id: NodeId, tls: FabricTls) -> FabricConfig {
    let mut c = config(id);
    c.tls = Some(tls);
    c
}

/// Waits until the link from `node` to `peer` has failed at least once for
/// a reason other than not having been tried yet, and returns that state.
async fn first_failure(node: &Node, peer: NodeId) -> LinkState {
    let mut last = None;
    eventually(Duration::from_secs(10), "a failed dial", || {
        last = node.fabric.link_state(peer);
        matches!(&last, Some(LinkState::Down(why)) if why != "not connected yet")
            || matches!(&last, Some(LinkState::Refused(_)))
    })
    .await;
    last.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mesh_with_certificates_from_the_cluster_ca_carries_calls() {
    bounded(30, async {
        let ca = Ca::new("cluster CA");
        let nodes = mesh(3, |id| {
            tls_config(
                id,
                ca.tls(&ca, &format!("node-{id}"), DEFAULT_FABRIC_SERVER_NAME),
            )
        })
        .await;
        for a in &nodes {
            for b in &nodes {
                let (from, to) = (a.fabric.node_id(), b.fabric.node_id());
                if from != to {
                    let env = Envelope::new(5, ECHO, Bytes::from_static(b"over tls"));
                    let answer = a.fabric.call(to, env.clone()).await.expect("call");
                    assert_eq!(answer, echo_answer(to, from, &env));
                }
            }
        }
        // An admin client with a certificate from the same CA.
        let mut client = ClientConfig::new(nodes[0].fabric.local_addr(), CLUSTER);
        client.tls = Some(ca.tls(&ca, "ramqp-ctl", "ramqp-ctl"));
        let client = Client::connect_with(client).await.expect("client connects");
        let env = Envelope::new(9, ECHO, Bytes::from_static(b"admin"));
        assert_eq!(
            client.call(env.clone()).await.expect("client call"),
            echo_answer(1, 0, &env)
        );
        client.close().await;
        for n in nodes {
            n.fabric.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_certificate_cannot_send_or_call() {
    bounded(60, async {
        let ca = Ca::new("cluster CA");
        let stranger_ca = Ca::new("stranger CA");
        let mut node = start(tls_config(
            1,
            ca.tls(&ca, "node-1", DEFAULT_FABRIC_SERVER_NAME),
        ))
        .await;
        let addr = node.fabric.local_addr();

        // A node that trusts the cluster CA (so it believes node 1) but
        // presents a certificate the stranger's CA issued, with the right
        // cluster name and a node id of its own.
        let stranger = start(
            tls_config(
                4,
                stranger_ca.tls(&ca, "node-4", DEFAULT_FABRIC_SERVER_NAME),
            )
            .with_peer(1, addr),
        )
        .await;
        let state = first_failure(&stranger, 1).await;
        assert!(matches!(state, LinkState::Down(_)), "{state:?}");
        assert_eq!(
            stranger
                .fabric
                .send(1, Envelope::new(1, ECHO, Bytes::from_static(b"raft?"))),
            Err(CallError::Unreachable(1))
        );
        assert_eq!(
            stranger
                .fabric
                .call(1, Envelope::new(1, ECHO, Bytes::new()))
                .await,
            Err(CallError::Unreachable(1))
        );

        // An admin client with a stranger's certificate gets no stream.
        let mut client = ClientConfig::new(addr, CLUSTER);
        client.connect_timeout = Duration::from_secs(2);
        client.tls = Some(stranger_ca.tls(&ca, "ramqp-ctl", "ramqp-ctl"));
        let refused = Client::connect_with(client).await;
        assert!(refused.is_err(), "stranger client connected");

        // A plaintext dialler gets nothing either.
        let mut plain = ClientConfig::new(addr, CLUSTER);
        plain.connect_timeout = Duration::from_secs(2);
        assert!(Client::connect_with(plain).await.is_err());

        // Node 1 saw no stream open and no frame from any of them.
        let stats = node.fabric.stats();
        assert_eq!(stats.frames_received, 0, "{stats:?}");
        assert!(node.messages.try_recv().is_err());

        // The same node id with a certificate from the cluster CA is let in:
        // what kept the stranger out was its certificate.
        stranger.fabric.shutdown().await;
        let member = start(
            tls_config(4, ca.tls(&ca, "node-4", DEFAULT_FABRIC_SERVER_NAME)).with_peer(1, addr),
        )
        .await;
        assert!(
            member
                .fabric
                .wait_connected(1, Duration::from_secs(10))
                .await
        );
        member
            .fabric
            .send(1, Envelope::new(1, ECHO, Bytes::from_static(b"raft")))
            .expect("send");
        let (from, env) = bounded(10, node.messages.recv()).await.expect("message");
        assert_eq!((from, env.payload), (4, Bytes::from_static(b"raft")));
        member.fabric.shutdown().await;
        node.fabric.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_without_the_fabric_server_name_is_not_believed() {
    bounded(30, async {
        let ca = Ca::new("cluster CA");
        // Issued by the right CA, but for another name.
        let node = start(tls_config(1, ca.tls(&ca, "node-1", "somewhere-else"))).await;
        let dialler = start(
            tls_config(2, ca.tls(&ca, "node-2", DEFAULT_FABRIC_SERVER_NAME))
                .with_peer(1, node.fabric.local_addr()),
        )
        .await;
        let state = first_failure(&dialler, 1).await;
        assert!(matches!(state, LinkState::Down(_)), "{state:?}");
        assert_eq!(node.fabric.stats().frames_received, 0);
        dialler.fabric.shutdown().await;
        node.fabric.shutdown().await;
    })
    .await;
}

#[test]
fn unusable_material_is_refused_up_front() {
    let ca = Ca::new("cluster CA");
    let (cert, key) = ca.issue("node-1", DEFAULT_FABRIC_SERVER_NAME);
    let ca_pem = ca.cert.pem().into_bytes();
    let ok = FabricTls::from_pem(ca_pem.clone(), cert.clone(), key.clone(), "ramqp-fabric");
    assert!(ok.is_ok());
    assert!(FabricTls::from_pem(b"junk".to_vec(), cert.clone(), key.clone(), "x").is_err());
    assert!(FabricTls::from_pem(ca_pem.clone(), Vec::new(), key.clone(), "x").is_err());
    assert!(FabricTls::from_pem(ca_pem.clone(), cert.clone(), cert.clone(), "x").is_err());
    assert!(FabricTls::from_pem(ca_pem, cert, key, "not a name!").is_err());
}
