//! The fast path agrees with the general decoder: it decodes the usual
//! encodings of transfers and dispositions to the same value, consuming
//! the same bytes, and never answers where the general decoder fails or
//! reads differently (checked over every single-byte change and every
//! truncation of those encodings).

use bytes::{Bytes, BytesMut};

use super::decode;
use crate::codec::definitions::{DeliveryState, Role};
use crate::codec::performative::{Disposition, Performative, Transfer};

fn encoded(performative: &Performative, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    performative.encode(&mut out);
    out.extend_from_slice(payload);
    out.to_vec()
}

/// If the fast path answers for `bytes`, the general decoder gives the
/// same value and leaves the same bytes; returns whether it answered.
fn agrees(bytes: &[u8]) -> bool {
    let mut fast_input = Bytes::copy_from_slice(bytes);
    let fast = decode(&mut fast_input);
    let mut general_input = Bytes::copy_from_slice(bytes);
    let general = Performative::decode_general(&mut general_input);
    match fast {
        None => {
            assert_eq!(&fast_input[..], bytes, "a refusal consumed input");
            false
        }
        Some(fast) => {
            match general {
                Ok(general) => assert_eq!(general, fast, "{bytes:02x?}"),
                Err(error) => panic!("fast path answered, general failed ({error}): {bytes:02x?}"),
            }
            assert_eq!(fast_input, general_input, "{bytes:02x?}");
            true
        }
    }
}

fn transfers() -> Vec<Transfer> {
    let mut all = Vec::new();
    for handle in [0, 1, 255, 256, u32::MAX] {
        for delivery_id in [None, Some(0), Some(7), Some(70_000)] {
            for delivery_tag in [
                None,
                Some(Bytes::new()),
                Some(Bytes::from_static(b"12345678")),
            ] {
                for settled in [None, Some(false), Some(true)] {
                    for more in [false, true] {
                        for aborted in [false, true] {
                            all.push(Transfer {
                                handle,
                                delivery_id,
                                delivery_tag: delivery_tag.clone(),
                                message_format: delivery_id.map(|_| 0),
                                settled,
                                more,
                                resume: aborted && more,
                                aborted,
                                batchable: more && !aborted,
                                ..Transfer::default()
                            });
                        }
                    }
                }
            }
        }
    }
    all
}

fn dispositions() -> Vec<Disposition> {
    let mut all = Vec::new();
    for role in [Role::Sender, Role::Receiver] {
        for (first, last) in [
            (0, None),
            (5, Some(9)),
            (300, Some(70_000)),
            (u32::MAX, None),
        ] {
            for settled in [false, true] {
                for state in [
                    None,
                    Some(DeliveryState::Accepted),
                    Some(DeliveryState::Released),
                ] {
                    for batchable in [false, true] {
                        all.push(Disposition {
                            role,
                            first,
                            last,
                            settled,
                            state: state.clone(),
                            batchable,
                        });
                    }
                }
            }
        }
    }
    all
}

#[test]
fn usual_encodings_take_the_fast_path_with_the_same_result() {
    for transfer in transfers() {
        let bytes = encoded(&Performative::Transfer(transfer), b"payload");
        assert!(agrees(&bytes), "{bytes:02x?}");
    }
    for disposition in dispositions() {
        let bytes = encoded(&Performative::Disposition(disposition), b"");
        assert!(agrees(&bytes), "{bytes:02x?}");
    }
}

#[test]
fn wide_uints_and_short_lists_agree() {
    // handle and delivery-id as 4-byte uints, list of 2 fields.
    let bytes = [
        0x00, 0x53, 0x14, 0xc0, 0x0b, 0x02, 0x70, 0, 0, 0, 1, 0x70, 0, 0, 0, 2, b'x',
    ];
    assert!(agrees(&bytes));
    // A disposition with an empty field list is the general decoder's
    // error (missing role): not answered here.
    assert!(!agrees(&[0x00, 0x53, 0x15, 0xc0, 0x01, 0x00]));
}

#[test]
fn other_fields_and_encodings_go_the_general_way() {
    let with_state = Transfer {
        handle: 1,
        delivery_id: Some(1),
        state: Some(Box::new(DeliveryState::Accepted)),
        ..Transfer::default()
    };
    assert!(!agrees(&encoded(&Performative::Transfer(with_state), b"")));
    let rejected = Disposition {
        role: Role::Receiver,
        first: 1,
        last: None,
        settled: true,
        state: Some(DeliveryState::Rejected { error: None }),
        batchable: false,
    };
    assert!(!agrees(&encoded(&Performative::Disposition(rejected), b"")));
    // A flow is never the fast path's.
    assert!(!agrees(&[0x00, 0x53, 0x13, 0x45]));
}

#[test]
fn changed_and_truncated_encodings_never_disagree() {
    let mut samples: Vec<Vec<u8>> = transfers()
        .into_iter()
        .step_by(7)
        .map(|t| encoded(&Performative::Transfer(t), b"ab"))
        .collect();
    samples.extend(
        dispositions()
            .into_iter()
            .step_by(5)
            .map(|d| encoded(&Performative::Disposition(d), b"")),
    );
    let replacements = [
        0x00, 0x01, 0x02, 0x08, 0x14, 0x15, 0x24, 0x26, 0x40, 0x41, 0x42, 0x43, 0x45, 0x52, 0x53,
        0x56, 0x70, 0xa0, 0xb0, 0xc0, 0xd0, 0xff,
    ];
    for sample in &samples {
        for len in 0..sample.len() {
            agrees(&sample[..len]);
        }
        for i in 0..sample.len() {
            let mut changed = sample.clone();
            for &b in replacements
                .iter()
                .chain(&[sample[i].wrapping_add(1), sample[i].wrapping_sub(1)])
            {
                changed[i] = b;
                agrees(&changed);
            }
        }
    }
}
