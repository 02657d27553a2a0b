//! The deterministic payload of entry `(group, index)`, shared by the crash
//! writer and the test that checks its output byte for byte.

/// The payload of `(group_id, index)`, `n_bytes` long.
pub fn payload(group_id: u64, index: u64, n_bytes: usize) -> String {
    let mut s = format!("g{group_id}-i{index}-");
    while s.len() < n_bytes {
        s.push(char::from(b'a' + ((s.len() as u64 + index) % 26) as u8));
    }
    s
}
