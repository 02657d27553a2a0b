//! The paged-body segment store on real files in a temporary directory:
//! roundtrip, roll, release and deletion, restart, torn tails, corruption,
//! compaction and its crash safety, and a model test of random operation
//! sequences (crashes included) against a `BTreeMap`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use ramqpd_broker::paging::{
    Location, RecordError, ScanTail, SegmentStore, StoreError, StoreOptions,
};

fn small() -> StoreOptions {
    StoreOptions {
        segment_max_bytes: 256,
        max_record_bytes: 1024,
        write_buffer_bytes: 64,
        // Small, so that the writeback hint runs in these tests too.
        writeback_step_bytes: 128,
    }
}

fn body(id: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (id as usize * 31 + i) as u8).collect()
}

fn segment_file(dir: &Path, segment: u32) -> PathBuf {
    dir.join(format!("{segment:020}.seg"))
}

fn files(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[test]
fn roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), StoreOptions::default()).unwrap();
    let bodies: Vec<Vec<u8>> = vec![vec![], b"a".to_vec(), body(3, 100_000)];
    let locations: Vec<Location> = bodies
        .iter()
        .enumerate()
        .map(|(id, b)| store.append(id as u64, b).unwrap())
        .collect();
    for (id, (location, b)) in locations.iter().zip(&bodies).enumerate() {
        assert_eq!(store.read(*location, id as u64).unwrap(), b.as_slice());
    }
    store.sync().unwrap();
    for (id, (location, b)) in locations.iter().zip(&bodies).enumerate() {
        assert_eq!(store.read(*location, id as u64).unwrap(), b.as_slice());
    }
    // The wrong id at a right location is refused.
    assert!(matches!(
        store.read(locations[1], 99),
        Err(StoreError::WrongRecord { .. })
    ));
    let stats = store.stats();
    assert_eq!(stats.n_live_records, 3);
    assert_eq!(stats.live_bytes, 3 * 16 + 100_001);
    assert_eq!(stats.file_bytes, stats.live_bytes);
}

#[test]
fn body_over_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    assert!(matches!(
        store.append(1, &[0u8; 1025]),
        Err(StoreError::BodyTooLarge { .. })
    ));
    // Exactly the limit is fine, and goes alone into a segment.
    let location = store.append(1, &[7u8; 1024]).unwrap();
    assert_eq!(store.read(location, 1).unwrap(), vec![7u8; 1024]);
}

#[test]
fn segments_roll_at_the_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    // 100-byte bodies are 116-byte records: two fit in 256, the third rolls.
    let locations: Vec<Location> = (0..5)
        .map(|id| store.append(id, &body(id, 100)).unwrap())
        .collect();
    let segments: Vec<u32> = locations.iter().map(|l| l.segment).collect();
    assert_eq!(segments, vec![0, 0, 1, 1, 2]);
    assert_eq!(locations[3].offset, 116);
    assert_eq!(locations[3].ordinal, 1);
    store.sync().unwrap();
    assert_eq!(store.segments(), vec![0, 1, 2]);
    for seq in 0..2 {
        assert_eq!(
            fs::metadata(segment_file(dir.path(), seq)).unwrap().len(),
            232
        );
    }
    for (id, location) in locations.iter().enumerate() {
        assert_eq!(
            store.read(*location, id as u64).unwrap(),
            body(id as u64, 100)
        );
    }
}

#[test]
fn releasing_every_record_of_a_segment_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    let locations: Vec<Location> = (0..3)
        .map(|id| store.append(id, &body(id, 100)).unwrap())
        .collect();
    store.sync().unwrap();
    assert_eq!(store.release(locations[0]).unwrap().deleted_segment, None);
    assert!(matches!(
        store.release(locations[0]),
        Err(StoreError::NotLive { .. })
    ));
    assert!(segment_file(dir.path(), 0).exists());
    assert_eq!(
        store.release(locations[1]).unwrap().deleted_segment,
        Some(0)
    );
    assert!(!segment_file(dir.path(), 0).exists());
    assert!(matches!(
        store.read(locations[1], 1),
        Err(StoreError::SegmentGone { segment: 0 })
    ));
    // The active segment, emptied once at least a quarter full, goes too
    // (a drained deep queue must not keep its last segment); the next
    // append starts a new one.
    assert_eq!(
        store.release(locations[2]).unwrap().deleted_segment,
        Some(1)
    );
    assert!(!segment_file(dir.path(), 1).exists());
    let next = store.append(9, &body(9, 200)).unwrap();
    assert_eq!(next.segment, 2);
    store.sync().unwrap();
    let stats = store.stats();
    assert_eq!((stats.n_segments, stats.n_live_records), (1, 1));
}

#[test]
fn restart_restores_the_live_set_and_appends_to_a_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    let locations: Vec<Location> = (0..6)
        .map(|id| store.append(id, &body(id, 100)).unwrap())
        .collect();
    store.sync().unwrap();
    drop(store);

    // The caller's persisted index says 1, 2 and 5 are live: segment 0
    // keeps 1, segment 1 keeps 2, segment 2 keeps 5.
    let live = [1usize, 2, 5];
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    let restored = store
        .restore_live(live.iter().map(|&i| locations[i]))
        .unwrap();
    assert_eq!(restored.n_live, 3);
    assert!(restored.missing.is_empty());
    assert!(restored.deleted_segments.is_empty());
    for &i in &live {
        assert_eq!(
            store.read(locations[i], i as u64).unwrap(),
            body(i as u64, 100)
        );
    }
    // Segment 2 was the active one; after a restart it is sealed.
    let new = store.append(6, b"new").unwrap();
    assert_eq!(new.segment, 3);
    assert_eq!(
        store.release(locations[5]).unwrap().deleted_segment,
        Some(2)
    );
    drop(store);

    // Only 2 is live now (and 6 was never synced or persisted): segments
    // 0 and 3 have nothing live and are deleted.
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    let restored = store.restore_live([locations[2]]).unwrap();
    assert_eq!(restored.deleted_segments, vec![0, 3]);
    store.sync().unwrap();
    assert_eq!(
        files(dir.path()),
        BTreeSet::from(["00000000000000000001.seg".to_string()])
    );
    assert_eq!(store.read(locations[2], 2).unwrap(), body(2, 100));
}

#[test]
fn a_torn_tail_ends_the_scan_and_earlier_records_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        segment_max_bytes: 4096,
        ..small()
    };
    let mut store = SegmentStore::open(dir.path(), options).unwrap();
    let locations: Vec<Location> = (0..3)
        .map(|id| store.append(id, &body(id, 50)).unwrap())
        .collect();
    store.sync().unwrap();
    drop(store);
    // Cut the last record in the middle of its body.
    let path = segment_file(dir.path(), 0);
    let cut = u64::from(locations[2].offset) + 16 + 20;
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();

    let store = SegmentStore::open(dir.path(), options).unwrap();
    let scan = store.scan(0).unwrap();
    let found: Vec<u64> = scan.records.iter().map(|r| r.id).collect();
    assert_eq!(found, vec![0, 1]);
    assert_eq!(scan.records[1].location, locations[1]);
    assert!(matches!(
        scan.tail,
        ScanTail::Damaged {
            offset,
            error: RecordError::Truncated { .. }
        } if offset == u64::from(locations[2].offset)
    ));
    assert_eq!(store.read(locations[0], 0).unwrap(), body(0, 50));
    assert_eq!(store.read(locations[1], 1).unwrap(), body(1, 50));
    assert!(matches!(
        store.read(locations[2], 2),
        Err(StoreError::OutOfBounds { .. })
    ));

    // A torn header (a few bytes of one) is reported too, never a panic.
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(u64::from(locations[2].offset) + 5)
        .unwrap();
    let store = SegmentStore::open(dir.path(), options).unwrap();
    let scan = store.scan(0).unwrap();
    assert_eq!(scan.records.len(), 2);
    assert!(matches!(scan.tail, ScanTail::Damaged { .. }));
}

#[test]
fn a_flipped_byte_in_a_body_is_detected_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    let a = store.append(1, &body(1, 40)).unwrap();
    let b = store.append(2, &body(2, 40)).unwrap();
    store.sync().unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(segment_file(dir.path(), 0))
        .unwrap();
    let at = u64::from(b.offset) + 16 + 7;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x01], at).unwrap();
    // The store's cached handle sees the change: the record is refused.
    assert!(matches!(
        store.read(b, 2),
        Err(StoreError::Corrupt {
            source: RecordError::Checksum { .. },
            ..
        })
    ));
    assert_eq!(store.read(a, 1).unwrap(), body(1, 40));
    // A length field flipped to something huge is refused before any
    // allocation of that size.
    file.write_all_at(&u32::MAX.to_le_bytes(), u64::from(a.offset))
        .unwrap();
    assert!(matches!(
        store.read(a, 1),
        Err(StoreError::Corrupt {
            source: RecordError::TooLarge { .. },
            ..
        })
    ));
}

/// Eight 100-byte records in segments 0..3 (two per segment), 0, 2, 4 and
/// 6 released: segments 0..3 are each half live.
fn half_released(dir: &Path) -> (SegmentStore, Vec<Location>) {
    let mut store = SegmentStore::open(dir, small()).unwrap();
    let locations: Vec<Location> = (0..9)
        .map(|id| store.append(id, &body(id, 100)).unwrap())
        .collect();
    for id in [0, 2, 4, 6] {
        store.release(locations[id]).unwrap();
    }
    store.sync().unwrap();
    (store, locations)
}

#[test]
fn compaction_moves_live_records_and_frees_space() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, locations) = half_released(dir.path());
    let before = store.stats();
    // Exactly half live is not under half.
    assert!(store.compact(50).unwrap().moves.is_empty());
    let compaction = store.compact(51).unwrap();
    assert_eq!(compaction.retired_segments, vec![0, 1, 2, 3]);
    assert_eq!(compaction.new_segments, vec![5, 6]);
    let moved: Vec<u64> = compaction.moves.iter().map(|m| m.id).collect();
    assert_eq!(moved, vec![1, 3, 5, 7]);
    for m in &compaction.moves {
        assert_eq!(m.from, locations[m.id as usize]);
        assert_eq!(store.read(m.to, m.id).unwrap(), body(m.id, 100));
        assert!(matches!(
            store.read(m.from, m.id),
            Err(StoreError::Compacted { .. })
        ));
    }
    // Not in a segment that was compacted: record 8 in the active one.
    assert_eq!(store.read(locations[8], 8).unwrap(), body(8, 100));
    let after = store.stats();
    assert_eq!(after.n_live_records, before.n_live_records);
    assert_eq!(after.n_retired_segments, 4);
    assert_eq!(store.delete_retired().unwrap(), vec![0, 1, 2, 3]);
    store.sync().unwrap();
    assert!(store.stats().file_bytes < before.file_bytes);
    assert_eq!(store.stats().file_bytes, 5 * 116);
    assert!(matches!(
        store.read(locations[1], 1),
        Err(StoreError::SegmentGone { .. })
    ));
    // Moved records release normally at their new location.
    assert_eq!(
        store
            .release(compaction.moves[0].to)
            .unwrap()
            .deleted_segment,
        None
    );
    assert_eq!(
        store
            .release(compaction.moves[1].to)
            .unwrap()
            .deleted_segment,
        Some(5)
    );
}

#[test]
fn a_crash_before_the_rename_leaves_the_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (store, locations) = half_released(dir.path());
    drop(store);
    // A crash in step 1: a half-written temp file with a new number.
    fs::write(dir.path().join("00000000000000000005.seg.tmp"), b"partial").unwrap();
    let mut store = SegmentStore::open(dir.path(), small()).unwrap();
    assert!(!dir.path().join("00000000000000000005.seg.tmp").exists());
    let live: Vec<Location> = [1, 3, 5, 7, 8].iter().map(|&i| locations[i]).collect();
    store.restore_live(live.iter().copied()).unwrap();
    for (&id, location) in [1u64, 3, 5, 7, 8].iter().zip(&live) {
        assert_eq!(store.read(*location, id).unwrap(), body(id, 100));
    }
    // And compaction then works as if nothing happened.
    assert_eq!(store.compact(51).unwrap().moves.len(), 4);
}

#[test]
fn a_crash_after_the_rename_keeps_whichever_copy_the_caller_names() {
    for caller_persisted_moves in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, locations) = half_released(dir.path());
        let compaction = store.compact(51).unwrap();
        // Crash before delete_retired: old and new files both exist.
        drop(store);
        let mut store = SegmentStore::open(dir.path(), small()).unwrap();
        assert_eq!(store.segments(), vec![0, 1, 2, 3, 4, 5, 6]);
        let live: Vec<(u64, Location)> = if caller_persisted_moves {
            compaction.moves.iter().map(|m| (m.id, m.to)).collect()
        } else {
            compaction.moves.iter().map(|m| (m.id, m.from)).collect()
        };
        let restored = store
            .restore_live(live.iter().map(|(_, l)| *l).chain([locations[8]]))
            .unwrap();
        let expected: Vec<u32> = if caller_persisted_moves {
            vec![0, 1, 2, 3]
        } else {
            vec![5, 6]
        };
        assert_eq!(restored.deleted_segments, expected);
        for (id, location) in &live {
            assert_eq!(store.read(*location, *id).unwrap(), body(*id, 100));
        }
        store.sync().unwrap();
        assert_eq!(files(dir.path()).len(), store.segments().len());
    }
}

#[test]
fn compaction_with_an_unreadable_live_record_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, locations) = half_released(dir.path());
    // Corrupt live record 3 (segment 1): compaction must not drop it.
    let file = OpenOptions::new()
        .write(true)
        .open(segment_file(dir.path(), 1))
        .unwrap();
    file.write_all_at(b"XX", u64::from(locations[3].offset) + 16 + 10)
        .unwrap();
    let before = store.stats();
    assert!(matches!(
        store.compact(51),
        Err(StoreError::Corrupt {
            segment: 1,
            source: RecordError::Checksum { .. },
            ..
        })
    ));
    assert_eq!(store.stats(), before);
    assert_eq!(store.segments(), vec![0, 1, 2, 3, 4]);
    assert!(
        files(dir.path()).iter().all(|name| name.ends_with(".seg")),
        "temp files left behind: {:?}",
        files(dir.path())
    );
    for id in [1u64, 5, 7, 8] {
        assert_eq!(
            store.read(locations[id as usize], id).unwrap(),
            body(id, 100)
        );
    }
}

// ---- model test ----

#[derive(Debug, Clone)]
enum Op {
    Append {
        len: usize,
    },
    Release {
        pick: usize,
    },
    /// sync, then the caller persists its index and deletes retired files.
    Checkpoint,
    Compact {
        live_percent_max: u32,
    },
    /// Drop the store without sync (a crash: unwritten buffers are lost)
    /// and reopen from the last checkpoint's index.
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..300).prop_map(|len| Op::Append { len }),
        4 => any::<usize>().prop_map(|pick| Op::Release { pick }),
        2 => Just(Op::Checkpoint),
        1 => (1u32..101).prop_map(|live_percent_max| Op::Compact { live_percent_max }),
        1 => Just(Op::Crash),
    ]
}

/// The caller's view: id → (location, body).
type Index = BTreeMap<u64, (Location, Vec<u8>)>;

fn check(store: &SegmentStore, index: &Index) -> Result<(), TestCaseError> {
    for (id, (location, expected)) in index {
        let got = store.read(*location, *id);
        prop_assert!(got.is_ok(), "read {id} at {location:?}: {got:?}");
        prop_assert_eq!(&got.unwrap()[..], &expected[..]);
    }
    prop_assert_eq!(store.stats().n_live_records, index.len() as u64);
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        segment_max_bytes: 512,
        max_record_bytes: 400,
        write_buffer_bytes: 128,
        writeback_step_bytes: 256,
    };
    let mut store = SegmentStore::open(dir.path(), options).unwrap();
    let mut index = Index::new();
    let mut persisted = Index::new();
    let mut next_id = 0u64;
    for op in ops {
        match op {
            Op::Append { len } => {
                let b = body(next_id, len);
                let location = store.append(next_id, &b).unwrap();
                index.insert(next_id, (location, b));
                next_id += 1;
            }
            Op::Release { pick } => {
                if index.is_empty() {
                    continue;
                }
                let id = *index.keys().nth(pick % index.len()).unwrap();
                let (location, _) = index.remove(&id).unwrap();
                store.release(location).unwrap();
            }
            Op::Checkpoint => {
                store.sync().unwrap();
                persisted = index.clone();
                store.delete_retired().unwrap();
            }
            Op::Compact { live_percent_max } => {
                let compaction = store.compact(live_percent_max).unwrap();
                for m in compaction.moves {
                    let entry = index.get_mut(&m.id).unwrap();
                    prop_assert_eq!(entry.0, m.from);
                    entry.0 = m.to;
                }
            }
            Op::Crash => {
                drop(store);
                store = SegmentStore::open(dir.path(), options).unwrap();
                let restored = store
                    .restore_live(persisted.values().map(|(l, _)| *l))
                    .unwrap();
                // Missing: records released after the checkpoint whose
                // segment emptied; the caller's log replay releases them.
                let missing: BTreeSet<Location> = restored.missing.into_iter().collect();
                persisted.retain(|id, (location, _)| {
                    let gone = missing.contains(location);
                    assert!(!gone || !index.contains_key(id), "live record {id} lost");
                    !gone
                });
                index = persisted.clone();
            }
        }
        check(&store, &index)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn model(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}
