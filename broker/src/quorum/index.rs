//! The replicated part of a quorum queue: every message not yet removed,
//! by id (the log index of its enqueue), with its delivery-count. This is
//! what every replica applies identically and what snapshots carry.
//!
//! The map is persistent (`imbl::OrdMap`): cloning it for a snapshot is
//! O(1) and shares structure, so a snapshot of a deep queue never stalls
//! the apply path with a full copy.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::codec::MessageView;
use crate::queue::Message;

use super::types::SettleKind;

/// One message as every replica holds it.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) message: Message,
    pub(crate) delivery_count: u32,
}

/// Every live message of a quorum queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct MessageIndex {
    messages: imbl::OrdMap<u64, Stored>,
    bytes: u64,
}

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SnapshotDecodeError {
    #[error("snapshot truncated")]
    Truncated,
    #[error("snapshot checksum mismatch")]
    Checksum,
    #[error("message {0} in the snapshot is malformed")]
    Message(u64),
}

/// Magic + version at the start of an encoded index.
const SNAPSHOT_MAGIC: &[u8; 8] = b"RAMQPQ01";

impl MessageIndex {
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// Bytes of every live message.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Add a published message. A message that does not scan is kept out
    /// (the leader checked it before proposing; this only guards replay).
    pub(crate) fn enqueue(&mut self, id: u64, bytes: Bytes) -> Option<Stored> {
        let view = MessageView::scan(&bytes).ok()?;
        let stored = Stored {
            delivery_count: view.header.as_ref().map_or(0, |h| h.delivery_count),
            message: Message {
                bytes,
                header: view.header,
                header_len: view.header_len as u32,
            },
        };
        self.bytes += stored.message.len() as u64;
        self.messages.insert(id, stored.clone());
        Some(stored)
    }

    /// Whether message `id` is live.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.messages.contains_key(&id)
    }

    /// Apply a replicated settlement; for a failed delivery, the message's
    /// delivery-count after it (when the message is live).
    pub(crate) fn settle(&mut self, id: u64, kind: SettleKind) -> Option<u32> {
        match kind {
            SettleKind::Remove => {
                if let Some(stored) = self.messages.remove(&id) {
                    self.bytes -= stored.message.len() as u64;
                }
                None
            }
            SettleKind::Failed => self.messages.get_mut(&id).map(|stored| {
                stored.delivery_count = stored.delivery_count.saturating_add(1);
                stored.delivery_count
            }),
        }
    }

    /// Messages in id order (FIFO).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &Stored)> {
        self.messages.iter()
    }

    /// Encode for a snapshot: magic, count, then per message id,
    /// delivery-count, length and bytes; a CRC32C of everything last.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = BytesMut::with_capacity(16 + self.bytes as usize + self.len() * 16);
        out.put_slice(SNAPSHOT_MAGIC);
        out.put_u64_le(self.messages.len() as u64);
        for (id, stored) in &self.messages {
            out.put_u64_le(*id);
            out.put_u32_le(stored.delivery_count);
            out.put_u32_le(stored.message.bytes.len() as u32);
            out.put_slice(&stored.message.bytes);
        }
        let crc = crc32c::crc32c(&out);
        out.put_u32_le(crc);
        out.to_vec()
    }

    /// Decode what [`MessageIndex::encode`] wrote, verifying the checksum.
    pub(crate) fn decode(data: &[u8]) -> Result<MessageIndex, SnapshotDecodeError> {
        if data.len() < SNAPSHOT_MAGIC.len() + 12 || &data[..8] != SNAPSHOT_MAGIC {
            return Err(SnapshotDecodeError::Truncated);
        }
        let (body, crc) = data.split_at(data.len() - 4);
        let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32c::crc32c(body) != crc {
            return Err(SnapshotDecodeError::Checksum);
        }
        let all = Bytes::copy_from_slice(body);
        let mut cursor = all.slice(8..);
        let count = cursor.get_u64_le();
        let mut index = MessageIndex::default();
        for _ in 0..count {
            if cursor.remaining() < 16 {
                return Err(SnapshotDecodeError::Truncated);
            }
            let id = cursor.get_u64_le();
            let delivery_count = cursor.get_u32_le();
            let len = cursor.get_u32_le() as usize;
            if cursor.remaining() < len {
                return Err(SnapshotDecodeError::Truncated);
            }
            let bytes = cursor.split_to(len);
            let mut stored = index
                .enqueue(id, bytes)
                .ok_or(SnapshotDecodeError::Message(id))?;
            stored.delivery_count = delivery_count;
            index.messages.insert(id, stored);
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &[u8]) -> Bytes {
        // amqp-value section holding a binary.
        let mut m = vec![0x00, 0x53, 0x77, 0xa0, body.len() as u8];
        m.extend_from_slice(body);
        Bytes::from(m)
    }

    #[test]
    fn settle_and_snapshot_round_trip() {
        let mut index = MessageIndex::default();
        for id in 1..=5 {
            assert!(index.enqueue(id, message(&[id as u8; 3])).is_some());
        }
        index.settle(2, SettleKind::Remove);
        index.settle(3, SettleKind::Failed);
        index.settle(3, SettleKind::Failed);
        let snapshot = index.clone();
        // Later changes do not reach the snapshot (structural sharing).
        index.settle(4, SettleKind::Remove);
        let decoded = MessageIndex::decode(&snapshot.encode()).unwrap();
        let ids: Vec<(u64, u32)> = decoded
            .iter()
            .map(|(id, s)| (*id, s.delivery_count))
            .collect();
        assert_eq!(ids, vec![(1, 0), (3, 2), (4, 0), (5, 0)]);
        assert_eq!(decoded.bytes(), snapshot.bytes());
        assert_eq!(index.len(), 3);
    }

    #[test]
    fn corrupt_snapshot_is_refused() {
        let mut index = MessageIndex::default();
        index.enqueue(1, message(b"abc"));
        let mut data = index.encode();
        let middle = data.len() / 2;
        data[middle] ^= 0x40;
        assert!(matches!(
            MessageIndex::decode(&data),
            Err(SnapshotDecodeError::Checksum)
        ));
        assert!(MessageIndex::decode(&data[..10]).is_err());
    }
}
