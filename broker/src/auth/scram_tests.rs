//! SCRAM-SHA-256 against RFC 7677's example exchange, and the ways a
//! client can get it wrong.

use super::*;

// RFC 7677 section 3.
const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_credential() -> ScramCredential {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    ScramCredential::derive("pencil", &salt, 4096)
}

#[test]
fn rfc7677_exchange() {
    let (server, first) =
        ScramServer::start(CLIENT_FIRST.as_bytes(), |_| rfc_credential(), SERVER_NONCE).unwrap();
    assert_eq!(first, SERVER_FIRST);
    assert_eq!(server.username(), "user");
    assert_eq!(
        server.finish(CLIENT_FINAL.as_bytes()).unwrap(),
        SERVER_FINAL
    );
}

#[test]
fn wrong_proof_nonce_or_binding_fails() {
    let start = || {
        ScramServer::start(CLIENT_FIRST.as_bytes(), |_| rfc_credential(), SERVER_NONCE)
            .unwrap()
            .0
    };
    let bad_proof = CLIENT_FINAL.replace("p=dHzb", "p=dHzc");
    assert_eq!(
        start().finish(bad_proof.as_bytes()),
        Err(ScramError::Failed)
    );
    let bad_nonce = CLIENT_FINAL.replace("k0,p=", "k1,p=");
    assert_eq!(
        start().finish(bad_nonce.as_bytes()),
        Err(ScramError::Failed)
    );
    let bad_binding = CLIENT_FINAL.replace("c=biws", "c=eSws");
    assert!(matches!(
        start().finish(bad_binding.as_bytes()),
        Err(ScramError::BadMessage(_))
    ));
    // Another password's credential: the RFC's proof no longer fits.
    let (other, _) = ScramServer::start(
        CLIENT_FIRST.as_bytes(),
        |_| ScramCredential::derive("pencil2", &rfc_credential().salt, 4096),
        SERVER_NONCE,
    )
    .unwrap();
    assert_eq!(
        other.finish(CLIENT_FINAL.as_bytes()),
        Err(ScramError::Failed)
    );
}

#[test]
fn malformed_client_first_is_refused() {
    let cred = |_: &str| rfc_credential();
    for bad in [
        "",
        "n,,",
        "x,,n=user,r=abc",
        "n,,r=abc",
        "n,,n=user",
        "n,,n=us=er,r=abc",
        "n,,m=ext,n=user,r=abc",
        "n,a=other,n=user,r=abc",
    ] {
        assert!(
            ScramServer::start(bad.as_bytes(), cred, SERVER_NONCE).is_err(),
            "{bad:?} was accepted"
        );
    }
    assert_eq!(
        ScramServer::start(b"p=tls-unique,,n=user,r=abc", cred, SERVER_NONCE).err(),
        Some(ScramError::ChannelBinding)
    );
    let (escaped, _) = ScramServer::start(b"y,,n=a=2Cb=3Dc,r=abc", cred, SERVER_NONCE).unwrap();
    assert_eq!(escaped.username(), "a,b=c");
}

#[test]
fn credential_round_trips_and_checks_plain_passwords() {
    let credential = ScramCredential::new("s3cret");
    let text = credential.encode();
    assert!(text.starts_with("SCRAM-SHA-256$4096:"), "{text}");
    assert!(!text.contains("s3cret"));
    let decoded = ScramCredential::decode(&text).unwrap();
    assert_eq!(decoded, credential);
    assert!(decoded.verify_password(b"s3cret"));
    assert!(!decoded.verify_password(b"s3creT"));
    assert!(!decoded.verify_password(b""));
    // Two credentials of one password differ: the salt is random.
    assert_ne!(ScramCredential::new("s3cret").encode(), text);
    // The RFC's values, stored and read back.
    let rfc = ScramCredential::decode(&rfc_credential().encode()).unwrap();
    assert!(rfc.verify_password(b"pencil"));
}

#[test]
fn malformed_credentials_are_refused() {
    let good = ScramCredential::new("x").encode();
    let (head, keys) = good.rsplit_once('$').unwrap();
    for bad in [
        String::new(),
        good.replace("SCRAM-SHA-256$", "SCRAM-SHA-1$"),
        good.replace("$4096:", "$100:"),
        good.replace("$4096:", "$many:"),
        format!("{head}$"),
        format!("{head}${}", keys.split(':').next().unwrap()),
        format!("{head}$AAAA:AAAA"),
    ] {
        assert!(
            ScramCredential::decode(&bad).is_err(),
            "{bad:?} was accepted"
        );
    }
}

#[test]
fn decoy_is_stable_per_name_and_never_verifies() {
    let secret = [7u8; 32];
    let a = decoy_credential(&secret, "mallory");
    assert_eq!(a, decoy_credential(&secret, "mallory"));
    assert_ne!(a.salt, decoy_credential(&secret, "eve").salt);
    assert!(!a.verify_password(b""));
}
