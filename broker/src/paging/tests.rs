//! Unit tests of the store's internals that the public API cannot show:
//! file names, write buffering, restore bookkeeping. Behaviour on real
//! files through the public API is in `broker/tests/paging_segments.rs`.

use std::fs;

use super::segment::{parse_name, FileKind};
use super::*;

fn options() -> StoreOptions {
    StoreOptions {
        segment_max_bytes: 1024,
        max_record_bytes: 4096,
        write_buffer_bytes: 256,
        writeback_step_bytes: 512,
    }
}

fn file_len(store: &SegmentStore, segment: u32) -> u64 {
    fs::metadata(store.dir().join(format!("{segment:020}.seg")))
        .unwrap()
        .len()
}

#[test]
fn file_names() {
    assert_eq!(
        parse_name("00000000000000000007.seg"),
        Some(FileKind::Segment(7))
    );
    assert_eq!(
        parse_name("00000000004294967295.seg.tmp"),
        Some(FileKind::Temp(u32::MAX))
    );
    assert_eq!(parse_name("00000000004294967296.seg"), None, "over u32");
    assert_eq!(parse_name("7.seg"), None);
    assert_eq!(parse_name("0000000000000000000a.seg"), None);
    assert_eq!(parse_name("00000000000000000007.log"), None);
}

#[test]
fn appends_are_buffered_until_the_buffer_fills_or_sync() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    let first = store.append(1, &[1u8; 50]).unwrap();
    let second = store.append(2, &[2u8; 50]).unwrap();
    // 132 bytes buffered, under 256: no write yet, but reads see them.
    assert_eq!(file_len(&store, first.segment), 0);
    assert_eq!(store.read(second, 2).unwrap(), vec![2u8; 50]);
    // The third append passes 256 buffered bytes: one write of all three.
    store.append(3, &[3u8; 110]).unwrap();
    assert_eq!(file_len(&store, first.segment), 3 * 16 + 210);
    store.append(4, &[4u8; 100]).unwrap();
    assert_eq!(file_len(&store, first.segment), 3 * 16 + 210);
    store.sync().unwrap();
    assert_eq!(file_len(&store, first.segment), 4 * 16 + 310);
    assert_eq!(store.read(first, 1).unwrap(), vec![1u8; 50]);
}

#[test]
fn a_reopened_store_refuses_changes_until_restored() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    let location = store.append(1, b"x").unwrap();
    store.sync().unwrap();
    drop(store);

    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    assert!(matches!(
        store.append(2, b"y"),
        Err(StoreError::RestoreRequired)
    ));
    assert!(matches!(
        store.release(location),
        Err(StoreError::RestoreRequired)
    ));
    assert!(matches!(
        store.compact(50),
        Err(StoreError::RestoreRequired)
    ));
    // Reads are allowed before the restore (tools).
    assert_eq!(store.read(location, 1).unwrap(), &b"x"[..]);
    store.restore_live([location]).unwrap();
    assert!(matches!(
        store.restore_live([location]),
        Err(StoreError::AlreadyRestored)
    ));
    let next = store.append(2, b"y").unwrap();
    assert!(
        next.segment > location.segment,
        "appends go to a new segment"
    );
}

#[test]
fn restore_rejects_bad_locations_and_never_reuses_segment_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    let location = store.append(1, b"abc").unwrap();
    store.sync().unwrap();
    drop(store);

    let past_end = Location {
        offset: 1000,
        ..location
    };
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    assert!(matches!(
        store.restore_live([past_end]),
        Err(StoreError::OutOfBounds { .. })
    ));
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    assert!(matches!(
        store.restore_live([location, location]),
        Err(StoreError::DuplicateLocation { .. })
    ));

    // A location in segment 9, whose file is gone: reported, and segment
    // 9 is never created again (a replayed release must not hit it).
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    let gone = Location {
        segment: 9,
        ..location
    };
    let restored = store.restore_live([location, gone]).unwrap();
    assert_eq!(restored.missing, vec![gone]);
    assert_eq!(restored.n_live, 1);
    assert_eq!(store.append(2, b"d").unwrap().segment, 10);
}

#[test]
fn invalid_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        StoreOptions {
            segment_max_bytes: 8,
            ..options()
        },
        StoreOptions {
            write_buffer_bytes: 0,
            ..options()
        },
    ] {
        assert!(matches!(
            SegmentStore::open(dir.path(), bad),
            Err(StoreError::InvalidOptions { .. })
        ));
    }
}

#[test]
fn an_emptied_active_segment_goes_once_a_quarter_full() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    // Under a quarter of the 1,024-byte segment: emptied, it stays.
    let small = store.append(1, &[1u8; 50]).unwrap();
    let released = store.release(small).unwrap();
    assert_eq!(released.deleted_segment, None);
    assert_eq!(store.stats().n_segments, 1);
    // Past a quarter: emptied, the file goes, and appends start a new one.
    let big: Vec<Location> = (2..6)
        .map(|id| store.append(id, &[2u8; 60]).unwrap())
        .collect();
    assert!(big.iter().all(|l| l.segment == small.segment));
    let path = dir.path().join(format!("{:020}.seg", small.segment));
    assert!(path.exists());
    let mut deleted = None;
    for location in &big {
        deleted = store
            .release(*location)
            .unwrap()
            .deleted_segment
            .or(deleted);
    }
    assert_eq!(deleted, Some(small.segment));
    assert!(!path.exists(), "the emptied active segment is deleted");
    let next = store.append(9, b"after").unwrap();
    assert!(next.segment > small.segment, "a new segment number");
    assert_eq!(store.read(next, 9).unwrap(), &b"after"[..]);
}

#[test]
fn an_idle_store_sheds_its_small_emptied_active_segment_and_only_that() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), options()).unwrap();
    store.shed_idle().unwrap();
    assert!(
        !store.holds_idle_segment(),
        "nothing to shed: no segment yet"
    );
    let kept = store.append(1, &[1u8; 50]).unwrap();
    let path = dir.path().join(format!("{:020}.seg", kept.segment));
    // Something live: nothing goes.
    assert!(!store.holds_idle_segment());
    store.shed_idle().unwrap();
    assert!(path.exists());
    assert_eq!(store.read(kept, 1).unwrap(), vec![1u8; 50]);
    // Emptied and small, `release` keeps it; the shed takes it.
    store.release(kept).unwrap();
    assert!(path.exists() && store.holds_idle_segment());
    store.shed_idle().unwrap();
    assert!(!path.exists(), "the idle segment's file is deleted");
    assert_eq!(store.stats().n_segments, 0);
    assert!(!store.holds_idle_segment());
    // The store goes on: a new segment, and a sync makes it durable.
    let next = store.append(2, b"after").unwrap();
    assert!(next.segment > kept.segment, "a new segment number");
    store.sync().unwrap();
    assert_eq!(store.read(next, 2).unwrap(), &b"after"[..]);
}

#[test]
fn the_broker_config_default_writeback_step_is_the_store_default() {
    // config sits below paging and repeats the literal; this keeps the two
    // from drifting apart.
    assert_eq!(
        crate::BrokerConfig::default()
            .quorum
            .segment_writeback_step_bytes,
        WRITEBACK_STEP_BYTES_DEFAULT
    );
}
