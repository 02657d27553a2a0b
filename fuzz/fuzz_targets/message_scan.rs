//! Fuzzes `MessageView::scan` over arbitrary message bytes and checks the
//! view it returns against the input.
#![no_main]

use broker::codec::{Header, MessageView};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let message = Bytes::copy_from_slice(data);
    let Ok(view) = MessageView::scan(&message) else {
        return;
    };
    assert!(view.n_sections >= 1);
    assert!(view.header_len <= message.len());
    assert_eq!(view.header.is_some(), view.header_len > 0);
    if let Some(header) = &view.header {
        // The header section alone decodes to the same header.
        let mut section = message.slice(..view.header_len);
        assert_eq!(Header::decode(&mut section).as_ref(), Ok(header));
        assert!(section.is_empty());
        // Replacing it with our own encoding keeps the message valid.
        let mut rewritten = BytesMut::new();
        header.encode(&mut rewritten);
        rewritten.extend_from_slice(&message[view.header_len..]);
        let again = MessageView::scan(&rewritten.freeze()).expect("rewritten header scans");
        assert_eq!(again.header.as_ref(), Some(header));
        assert_eq!(again.n_sections, view.n_sections);
    }
});
