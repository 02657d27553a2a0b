//! [`TransferHead`]: the fields of an outgoing transfer the broker sets
//! (handle, delivery-id, delivery-tag, message-format, settled, more),
//! borrowed, so a delivery's transfer is encoded without building a
//! [`Transfer`](super::Transfer) (whose tag is an owned `Bytes`: one
//! allocation per delivery). Encodes byte for byte as the `Transfer` with
//! the same fields and every other field at its default.
//!
//! It must not know where the tag or the payload come from.

use bytes::BytesMut;

use super::codes::dc;
use super::encode::{self, CompositeWriter};

/// An outgoing transfer performative with only the fields a delivery uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferHead<'a> {
    /// handle (mandatory)
    pub handle: u32,
    /// delivery-id
    pub delivery_id: Option<u32>,
    /// delivery-tag
    pub delivery_tag: Option<&'a [u8]>,
    /// message-format
    pub message_format: Option<u32>,
    /// settled
    pub settled: Option<bool>,
    /// more (default false)
    pub more: bool,
}

impl TransferHead<'_> {
    /// Append the encoding (descriptor + list, trailing defaults trimmed).
    pub fn encode(&self, out: &mut BytesMut) {
        let mut w = CompositeWriter::begin(out, dc::TRANSFER);
        w.uint(self.handle)
            .opt_uint(self.delivery_id)
            .opt(self.delivery_tag, encode::put_binary)
            .opt_uint(self.message_format)
            .opt_bool(self.settled)
            .flag(self.more);
        w.finish();
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::codec::{Performative, Transfer};

    fn same_as_transfer(head: TransferHead<'_>) {
        let mut ours = BytesMut::new();
        head.encode(&mut ours);
        let mut general = BytesMut::new();
        Performative::Transfer(Transfer {
            handle: head.handle,
            delivery_id: head.delivery_id,
            delivery_tag: head.delivery_tag.map(Bytes::copy_from_slice),
            message_format: head.message_format,
            settled: head.settled,
            more: head.more,
            ..Transfer::default()
        })
        .encode(&mut general);
        assert_eq!(&ours[..], &general[..], "{head:?}");
    }

    #[test]
    fn encodes_as_the_transfer_with_the_same_fields() {
        let tag = 7u64.to_be_bytes();
        for handle in [0, 1, 255, 256, u32::MAX] {
            for delivery_id in [None, Some(0), Some(1), Some(300), Some(u32::MAX)] {
                for delivery_tag in [None, Some(&tag[..]), Some(&[][..])] {
                    for message_format in [None, Some(0)] {
                        for settled in [None, Some(false), Some(true)] {
                            for more in [false, true] {
                                same_as_transfer(TransferHead {
                                    handle,
                                    delivery_id,
                                    delivery_tag,
                                    message_format,
                                    settled,
                                    more,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
}
