//! A follower installs a snapshot its leader streamed: the received file
//! is read record by record into a new segment generation (every body
//! paged: a follower keeps nothing resident), its CRC checked at the end,
//! the segments fsynced, a snapshot file naming the new generation written
//! and renamed into place (the commit point), and only then the state in
//! memory swapped and the old generation removed. A crash at any step
//! leaves either the old snapshot and generation or the new ones; the
//! leftovers are removed at the next open (`replica_files::remove_stale`).

use std::io::BufReader;
use std::path::Path;

use super::index::{MessageIndex, Placement, Slot};
use super::replica_files::{self, SNAPSHOT_FILE};
use super::snapshot_data::SnapshotData;
use super::state_machine::{io_error, read_error, Shared};
use super::{snapshot_file, snapshot_transfer};
use crate::crash_point;
use crate::paging::{SegmentStore, StoreOptions};

/// The state machine was used before `open` gave it a segment store.
#[derive(Debug, thiserror::Error)]
#[error("quorum queue segment store is not open")]
pub(crate) struct NotOpen;

type Meta = openraft::alias::SnapshotMetaOf<super::types::QueueRaft>;

/// Install the snapshot in `data` (see the module docs).
pub(crate) async fn install(
    shared: &Shared,
    dir: &Path,
    meta: &Meta,
    data: SnapshotData,
) -> Result<(), std::io::Error> {
    let file = data.into_file().await.map_err(read_error)?;
    let generation = shared.lock().generation + 1;
    let options = shared.limits.store;
    let build_dir = dir.to_path_buf();
    let build_meta = meta.clone();
    let (index, store) = tokio::task::spawn_blocking(move || {
        build(&build_dir, generation, file, options, &build_meta)
    })
    .await
    .map_err(io_error)??;
    // The log purge openraft issued with this install may go ahead now.
    shared
        .snapshot_cover
        .recorded(meta.last_log_id.map(|l| l.index));
    let (old_generation, old_resident) = {
        let mut inner = shared.lock();
        let old = (inner.generation, inner.index.resident_bytes());
        inner.index = index;
        inner.store = Some(store);
        inner.generation = generation;
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        // openraft sends snapshots to followers only, so there is no
        // dispatcher to rebuild; the feed starts when this node leads.
        old
    };
    // The outbox came with the snapshot: the dead-letter sender sleeps
    // while it had none (`dead_letter_outbox.rs`).
    shared.dead_letter_wake.notify_one();
    shared.limits.node.give_back(old_resident);
    let old_dir = replica_files::segments_dir(dir, old_generation);
    tokio::task::spawn_blocking(move || {
        let _ = std::fs::remove_dir_all(&old_dir);
    })
    .await
    .map_err(io_error)?;
    tracing::info!(
        queue = %shared.queue,
        last_log_id = ?meta.last_log_id,
        generation,
        "quorum queue: snapshot installed"
    );
    Ok(())
}

/// Page the received bodies into `segments-<generation>` and record a
/// snapshot file naming them; blocking.
fn build(
    dir: &Path,
    generation: u64,
    file: std::fs::File,
    options: StoreOptions,
    meta: &Meta,
) -> Result<(MessageIndex, SegmentStore), std::io::Error> {
    let segments = replica_files::segments_dir(dir, generation);
    match std::fs::remove_dir_all(&segments) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(e)),
    }
    let mut store = SegmentStore::open(&segments, options).map_err(io_error)?;
    store.restore_live([]).map_err(io_error)?;
    let mut index = MessageIndex::default();
    let read = snapshot_transfer::read(
        BufReader::with_capacity(256 * 1024, file),
        options.max_record_bytes,
        |id, delivery_count, expires_at, body| {
            let location = store.append(id, body)?;
            let slot = Slot {
                id,
                location,
                delivery_count,
                placement: Placement::Paged,
            };
            index.push(slot, None);
            index.set_expiry(id, expires_at);
            Ok::<_, crate::paging::StoreError>(())
        },
    );
    match read {
        Ok(Ok((_, dead))) => *index.dead_letters_mut() = dead,
        Ok(Err(e)) => return Err(io_error(e)),
        Err(e) => {
            drop(store);
            let _ = std::fs::remove_dir_all(&segments);
            return Err(read_error(e));
        }
    }
    store.sync().map_err(io_error)?;
    crash_point::reached(crash_point::INSTALL_STAGED);
    replica_files::write_durably(dir, SNAPSHOT_FILE, |out| {
        snapshot_file::write(out, meta, generation, &index)
    })
    .map_err(io_error)?;
    crash_point::reached(crash_point::INSTALL_RECORDED);
    Ok((index, store))
}
