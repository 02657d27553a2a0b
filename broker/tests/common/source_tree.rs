//! Reading the workspace's own sources, for the tests that check the tree
//! (`architecture.rs`, `tidy_sleeps.rs`).

use std::path::{Path, PathBuf};

/// The workspace root (the parent of `broker/`).
pub fn workspace_root() -> PathBuf {
    let broker = Path::new(env!("CARGO_MANIFEST_DIR"));
    broker.parent().unwrap_or(broker).to_path_buf()
}

/// Every `.rs` file at or under `path` (a file or a directory), skipping
/// build output (`target/`).
pub fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.to_path_buf());
        }
        return;
    }
    if path.file_name().is_some_and(|n| n == "target") {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        rust_files(&entry.path(), out);
    }
}
