//! The transaction coordinator as a link target (transactions 4.5.1): an
//! attach whose target is `coordinator` (0x30) is a valid frame. It used to
//! be a decode error that closed the whole connection; now it decodes (and
//! the engine refuses that link alone, see `amqp_transactions.rs`).

use bytes::BytesMut;
use ramqpd_broker::codec::{CodecError, Performative, Symbol, Target, TargetKind};

use super::{decode_perf, list8};

/// An attach (role sender, no source) whose target field is `target`.
fn attach_with_target(target: &[u8]) -> Vec<u8> {
    list8(
        0x12,
        &[
            &[0xa1, 1, b'l'],
            &[0x43],
            &[0x41],
            &[0x40],
            &[0x40],
            &[0x40],
            target,
        ],
    )
}

/// A client declaring transactions attaches to the `coordinator` (0x30,
/// transactions 4.5.1): a valid frame, which used to be a decode error that
/// closed the whole connection. It decodes, capabilities included.
#[test]
fn coordinator_target_decodes() {
    let capability = [&[0xa3, 23][..], b"amqp:local-transactions"].concat();
    let numeric = [&[0x00, 0x53, 0x30, 0xc0, 26, 1][..], &capability].concat();
    let mut symbolic = vec![0x00, 0xa3, 21];
    symbolic.extend_from_slice(b"amqp:coordinator:list");
    symbolic.extend_from_slice(&[0xc0, 26, 1]);
    symbolic.extend_from_slice(&capability);
    for (what, target) in [
        ("numeric", numeric),
        ("symbolic", symbolic),
        ("list0", vec![0x00, 0x53, 0x30, 0x45]),
    ] {
        let Ok(Performative::Attach(a)) = decode_perf(&attach_with_target(&target)) else {
            panic!("{what}: the attach does not decode");
        };
        let target = a.target.expect("a target");
        assert_eq!(target.kind, TargetKind::Coordinator, "{what}");
        assert_eq!(target.address, None, "{what}");
        let expected: Vec<Symbol> = if what == "list0" {
            Vec::new()
        } else {
            vec!["amqp:local-transactions".into()]
        };
        assert_eq!(target.capabilities, expected, "{what}");
    }
    // Encoded back as a coordinator, with only its capabilities.
    let target = Target {
        kind: TargetKind::Coordinator,
        capabilities: vec!["amqp:local-transactions".into()],
        address: Some("ignored".into()),
        ..Target::default()
    };
    let mut out = BytesMut::new();
    target.encode(&mut out);
    assert_eq!(&out[..], &numeric_coordinator()[..]);
}

/// A coordinator as we encode it: capabilities as a (one-element) array.
fn numeric_coordinator() -> Vec<u8> {
    [
        &[0x00, 0x53, 0x30, 0xc0, 29, 1, 0xe0, 26, 1, 0xa3, 23][..],
        b"amqp:local-transactions",
    ]
    .concat()
}

/// Another described type where the target belongs (here `declare`, 0x31)
/// is still not a terminus.
#[test]
fn other_descriptor_as_target_is_unknown() {
    assert!(matches!(
        decode_perf(&attach_with_target(&[0x00, 0x53, 0x31, 0x45])),
        Err(CodecError::UnknownDescriptor(_))
    ));
}
