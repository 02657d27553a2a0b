//! Reading many records at once: records that lie back to back in one
//! segment (the common case, since a queue is read in the order it was
//! written) are read with one positioned read per run instead of two per
//! record, and handed out as slices of that one buffer. Every record is
//! still checked (length, id, CRC32C) on its own.

use bytes::Bytes;

use super::error::StoreError;
use super::location::Location;
use super::segment;
use super::store::SegmentStore;

/// Bytes read in one positioned read at most.
const RUN_BYTES_MAX: u64 = 1024 * 1024;

impl SegmentStore {
    /// Reads records `(location, id)`, in the given order; one result per
    /// record, a bad record an error (never served), the others unaffected.
    pub fn read_batch(&self, records: &[(Location, u64)]) -> Vec<Result<Bytes, StoreError>> {
        let mut out = Vec::with_capacity(records.len());
        let mut start = 0;
        while start < records.len() {
            // The run: records that follow each other in one segment.
            let first = records[start].0;
            let mut end = start + 1;
            let mut run_bytes = first.record_bytes();
            while let Some((next, _)) = records.get(end) {
                let previous = records[end - 1].0;
                let follows = next.segment == first.segment
                    && u64::from(previous.offset) + previous.record_bytes()
                        == u64::from(next.offset);
                if !follows || run_bytes + next.record_bytes() > RUN_BYTES_MAX {
                    break;
                }
                run_bytes += next.record_bytes();
                end += 1;
            }
            self.read_run(&records[start..end], run_bytes, &mut out);
            start = end;
        }
        out
    }

    fn read_run(
        &self,
        run: &[(Location, u64)],
        run_bytes: u64,
        out: &mut Vec<Result<Bytes, StoreError>>,
    ) {
        let first = run[0].0;
        if run.len() == 1 {
            out.push(self.read(first, run[0].1));
            return;
        }
        let Some(entry) = self.segments.get(&first.segment) else {
            out.extend(run.iter().map(|_| Err(self.gone(first.segment))));
            return;
        };
        let segment_bytes = entry.segment.bytes();
        let offset = u64::from(first.offset);
        if offset + run_bytes > segment_bytes {
            // Let the one-by-one path say which record is out of bounds.
            out.extend(run.iter().map(|(l, id)| self.read(*l, *id)));
            return;
        }
        let buffer = match entry.segment.read_range(offset, run_bytes as usize) {
            Ok(buffer) => Bytes::from(buffer),
            Err(e) => {
                let message = e.to_string();
                out.extend(run.iter().map(|_| {
                    Err(StoreError::io(
                        "read segment run",
                        entry.segment.path(),
                        std::io::Error::other(message.clone()),
                    ))
                }));
                return;
            }
        };
        for (location, id) in run {
            let at = (u64::from(location.offset) - offset) as usize;
            out.push(segment::body_at(
                &buffer,
                at,
                *location,
                *id,
                self.options.max_record_bytes,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paging::StoreOptions;

    #[test]
    fn a_batch_reads_runs_and_checks_each_record() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            segment_max_bytes: 300,
            ..StoreOptions::default()
        };
        let mut store = SegmentStore::open(dir.path(), options).unwrap();
        store.restore_live([]).unwrap();
        let mut records = Vec::new();
        for id in 0..40u64 {
            let body = vec![id as u8; 10 + id as usize % 7];
            records.push((store.append(id, &body).unwrap(), id));
            if id == 25 {
                store.sync().unwrap(); // half written, half buffered
            }
        }
        let read = store.read_batch(&records);
        for ((location, id), body) in records.iter().zip(&read) {
            let body = body.as_ref().unwrap();
            assert_eq!(body.len() as u32, location.body_bytes);
            assert!(body.iter().all(|b| *b == *id as u8));
        }
        // A wrong id in the middle of a run fails that record only.
        let mut wrong = records.clone();
        wrong[5].1 = 999;
        let read = store.read_batch(&wrong);
        assert!(read[5].is_err());
        assert!(read[4].is_ok() && read[6].is_ok());
    }
}
