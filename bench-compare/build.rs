//! Records the exact versions of the client stack (from the workspace's
//! Cargo.lock) so every result can name the client that produced it, and
//! those of serde_amqp and fe2o3-amqp-types for the `codec` bin.

use std::path::PathBuf;

fn locked_version(lock: &str, name: &str) -> String {
    let needle = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == needle {
            if let Some(version) = lines.next() {
                if let Some(v) = version.trim().strip_prefix("version = ") {
                    return v.trim_matches('"').to_string();
                }
            }
        }
    }
    "unknown".to_string()
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lock_path = manifest.join("..").join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    println!(
        "cargo:rustc-env=BENCH_FE2O3_VERSION={}",
        locked_version(&lock, "fe2o3-amqp")
    );
    println!(
        "cargo:rustc-env=BENCH_TOKIO_VERSION={}",
        locked_version(&lock, "tokio")
    );
    // The other side of the `codec` bin's comparison.
    println!(
        "cargo:rustc-env=BENCH_SERDE_AMQP_VERSION={}",
        locked_version(&lock, "serde_amqp")
    );
    println!(
        "cargo:rustc-env=BENCH_FE2O3_TYPES_VERSION={}",
        locked_version(&lock, "fe2o3-amqp-types")
    );
}
