//! A snapshot crossing to a follower in chunks. openraft 0.10 hands the
//! network a whole snapshot (`RaftNetworkV2::full_snapshot`) and takes a
//! whole one on the receiving side (`Raft::install_full_snapshot`); the
//! chunks in between are ours: each [`SnapshotChunk`] is one call (bounded
//! memory on both sides: one chunk), written by the follower into a
//! [`SnapshotSink`] (the quorum queues: an unlinked staging file; the
//! metadata group: memory), installed when the last one is in.
//!
//! Knows nothing of what a snapshot holds.

use std::io;
use std::sync::Mutex;

use openraft::alias::{SnapshotMetaOf, VoteOf};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::raft::SnapshotResponse;
use openraft::storage::RaftStateMachine;
use openraft::vote::RaftVote;
use openraft::{Raft, RaftTypeConfig, Snapshot};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

/// One chunk of a snapshot on the wire (`RpcKind::InstallSnapshot`). The
/// reply is `Result<Option<SnapshotResponse>, String>`: `None` for a chunk
/// taken, the follower's response once the snapshot is installed or when
/// the follower's vote is newer than the sender's (it stops there).
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub(crate) struct SnapshotChunk<C: RaftTypeConfig> {
    /// The sending leader's vote.
    pub(crate) vote: VoteOf<C>,
    /// The snapshot's meta, in every chunk (so a follower joining a
    /// transfer midway refuses it rather than misfiling it).
    pub(crate) meta: SnapshotMetaOf<C>,
    /// Where `data` starts in the snapshot.
    pub(crate) offset: u64,
    /// The bytes.
    pub(crate) data: Vec<u8>,
    /// Whether this is the last chunk.
    pub(crate) done: bool,
}

/// Fills `buf` from `data` as far as it goes: fewer bytes only at the end.
pub(crate) async fn read_chunk<R: AsyncRead + Unpin>(
    data: &mut R,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let read = data.read(&mut buf[n..]).await?;
        if read == 0 {
            break;
        }
        n += read;
    }
    Ok(n)
}

/// Where a follower puts the chunks of a snapshot it receives.
pub(crate) trait SnapshotSink: Send + 'static {
    /// What the state machine installs.
    type Data: Send + 'static;
    /// Appends one chunk's bytes.
    fn write(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// The whole snapshot.
    fn finish(self) -> io::Result<Self::Data>;
}

/// The metadata group's snapshots: bytes in memory.
impl SnapshotSink for Vec<u8> {
    type Data = io::Cursor<Vec<u8>>;

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.extend_from_slice(bytes);
        Ok(())
    }

    fn finish(self) -> io::Result<io::Cursor<Vec<u8>>> {
        Ok(io::Cursor::new(self))
    }
}

struct Receiving<S> {
    /// The snapshot's last log id and the sender's vote, as text: a chunk
    /// of another transfer does not continue this one.
    key: String,
    next_offset: u64,
    sink: S,
}

/// The snapshot a group is receiving, if any (one at a time: a new
/// transfer's first chunk replaces an unfinished one, which openraft may
/// abandon without a word).
pub(crate) struct SnapshotReceiver<S> {
    receiving: Mutex<Option<Receiving<S>>>,
}

impl<S> Default for SnapshotReceiver<S> {
    fn default() -> Self {
        SnapshotReceiver {
            receiving: Mutex::new(None),
        }
    }
}

impl<S: SnapshotSink> SnapshotReceiver<S> {
    /// Takes one chunk for `raft`; `new_sink` makes the sink of a
    /// transfer's first chunk.
    pub(crate) async fn take<C, SM>(
        &self,
        raft: &Raft<C, SM>,
        chunk: SnapshotChunk<C>,
        new_sink: impl FnOnce() -> io::Result<S>,
    ) -> Result<Option<SnapshotResponse<C>>, String>
    where
        C: RaftTypeConfig,
        SM: RaftStateMachine<C, SnapshotData = S::Data>,
    {
        // A follower that has seen a newer leader answers at once, so the
        // stale sender stops instead of streaming the whole snapshot.
        let current = raft.metrics().borrow_watched().vote.clone();
        if RaftVote::partial_cmp(&current, &chunk.vote) == Some(std::cmp::Ordering::Greater) {
            *self.lock() = None;
            return Ok(Some(SnapshotResponse::new(current)));
        }
        let key = format!(
            "{}@{}",
            chunk
                .meta
                .last_log_id
                .as_ref()
                .map_or("-".to_string(), |l| l.to_string()),
            chunk.vote
        );
        let done = {
            let mut receiving = self.lock();
            if chunk.offset == 0 {
                *receiving = Some(Receiving {
                    key: key.clone(),
                    next_offset: 0,
                    sink: new_sink().map_err(|e| format!("staging a snapshot: {e}"))?,
                });
            }
            let Some(r) = receiving.as_mut() else {
                return Err(format!(
                    "snapshot chunk at {} without its start",
                    chunk.offset
                ));
            };
            if r.key != key || r.next_offset != chunk.offset {
                *receiving = None;
                return Err(format!(
                    "snapshot chunk at {} does not continue the transfer here",
                    chunk.offset
                ));
            }
            r.sink
                .write(&chunk.data)
                .map_err(|e| format!("writing a snapshot chunk: {e}"))?;
            r.next_offset += chunk.data.len() as u64;
            match chunk.done {
                true => receiving.take(),
                false => None,
            }
        };
        let Some(received) = done else {
            return Ok(None);
        };
        let data = received
            .sink
            .finish()
            .map_err(|e| format!("finishing a snapshot: {e}"))?;
        let snapshot = Snapshot {
            meta: chunk.meta,
            snapshot: data,
        };
        raft.install_full_snapshot(chunk.vote, snapshot)
            .await
            .map(Some)
            .map_err(|e| e.to_string())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Receiving<S>>> {
        self.receiving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
