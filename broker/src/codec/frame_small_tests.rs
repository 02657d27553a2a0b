//! The stack-built frames (`encode/small.rs`) are byte for byte the
//! frames the general writer makes for the same performative.

use bytes::{Bytes, BytesMut};

use super::{encode_amqp_frame, encode_amqp_frame_general, encode_transfer_frame};
use crate::codec::definitions::{DeliveryState, Role};
use crate::codec::performative::{Disposition, Performative, Transfer};
use crate::codec::TransferHead;

#[test]
fn transfer_frames_match_the_general_writer() {
    let short = 7u64.to_be_bytes();
    let longest = [9u8; 32];
    let too_long = [1u8; 33];
    for channel in [0, 1, 300] {
        for handle in [0, 1, 255, 256, u32::MAX] {
            for delivery_id in [None, Some(0), Some(1), Some(300), Some(u32::MAX)] {
                for delivery_tag in [
                    None,
                    Some(&short[..]),
                    Some(&[][..]),
                    Some(&longest[..]),
                    Some(&too_long[..]),
                ] {
                    for message_format in [None, Some(0)] {
                        for settled in [None, Some(false), Some(true)] {
                            for more in [false, true] {
                                let head = TransferHead {
                                    handle,
                                    delivery_id,
                                    delivery_tag,
                                    message_format,
                                    settled,
                                    more,
                                };
                                let mut ours = BytesMut::from(&b"before"[..]);
                                encode_transfer_frame(&mut ours, channel, &head, 77);
                                let transfer = Performative::Transfer(Transfer {
                                    handle,
                                    delivery_id,
                                    delivery_tag: delivery_tag.map(Bytes::copy_from_slice),
                                    message_format,
                                    settled,
                                    more,
                                    ..Transfer::default()
                                });
                                let mut general = BytesMut::from(&b"before"[..]);
                                encode_amqp_frame_general(&mut general, channel, &transfer, 77);
                                assert_eq!(ours, general, "{head:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn disposition_frames_match_the_general_writer() {
    let states = [
        None,
        Some(DeliveryState::Accepted),
        Some(DeliveryState::Released),
        Some(DeliveryState::Rejected { error: None }),
        Some(DeliveryState::Modified {
            delivery_failed: true,
            undeliverable_here: false,
            message_annotations: None,
        }),
    ];
    for channel in [0, 2] {
        for role in [Role::Sender, Role::Receiver] {
            for (first, last) in [(0, None), (0, Some(0)), (9, Some(300)), (u32::MAX, None)] {
                for settled in [false, true] {
                    for state in &states {
                        for batchable in [false, true] {
                            let disposition = Performative::Disposition(Disposition {
                                role,
                                first,
                                last,
                                settled,
                                state: state.clone(),
                                batchable,
                            });
                            let mut ours = BytesMut::new();
                            encode_amqp_frame(&mut ours, channel, &disposition, 0);
                            let mut general = BytesMut::new();
                            encode_amqp_frame_general(&mut general, channel, &disposition, 0);
                            assert_eq!(ours, general, "{disposition:?}");
                        }
                    }
                }
            }
        }
    }
}
