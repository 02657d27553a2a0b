//! Fuzzes `Value::decode`. A decoded value must re-encode into bytes that
//! decode again and re-encode identically (encoding is canonical).
#![no_main]

use broker::codec::{CodecError, Value};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes::copy_from_slice(data);
    let Ok(value) = Value::decode(&mut input) else {
        return;
    };
    let mut first = BytesMut::new();
    value.encode(&mut first);
    let first = first.freeze();
    match Value::decode(&mut first.clone()) {
        Ok(again) => {
            let mut second = BytesMut::new();
            again.encode(&mut second);
            assert_eq!(first, second.freeze(), "encoding is not canonical");
        }
        // Arrays of zero-width elements (nulls) are bounded by the input's
        // length; the re-encoding can be shorter than the fuzz input.
        Err(CodecError::InvalidSize("array count")) => {}
        Err(e) => panic!("{value:?} re-encodes into undecodable bytes: {e}"),
    }
});
