//! Fuzzes `paging::record::decode` (the segment store's record decoder)
//! with a 64 KiB body limit, walking the input record by record as a
//! segment scan does. Every decoded record must re-encode to exactly the
//! bytes it was decoded from, and a rejected length must be over the limit.
#![no_main]

use broker::paging::record::{decode, encode, RecordError};
use libfuzzer_sys::fuzz_target;

const MAX_BODY_BYTES: u32 = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let mut again = Vec::new();
    loop {
        match decode(rest, MAX_BODY_BYTES) {
            Ok((record, used)) => {
                again.clear();
                encode(&mut again, record.id, record.body);
                assert_eq!(&again[..], &rest[..used], "re-encoding differs");
                rest = &rest[used..];
            }
            Err(RecordError::TooLarge { body_bytes, .. }) => {
                assert!(body_bytes > u64::from(MAX_BODY_BYTES));
                return;
            }
            Err(_) => return,
        }
    }
});
