//! Replays every checked-in input of the `fabric_batch` fuzz target
//! (`fuzz/corpus/fabric_batch/`, `fuzz/seeds/fabric_batch/`) and the
//! batches the real encoder makes through `ramqpd_fabric::fuzz_checks::batch`,
//! the very check the cargo-fuzz target runs, on the stable toolchain. A
//! change to the wire format or its decoding that breaks a once-fine input
//! fails here, naming the file. With `RAMQP_WRITE_FUZZ_SEEDS=1` the encoder's
//! batches are also written to `fuzz/seeds/fabric_batch/`.

use std::path::{Path, PathBuf};

use ramqpd_fabric::fuzz_checks::{batch, seeds};

const TARGET: &str = "fabric_batch";

fn fuzz_dir() -> PathBuf {
    let fabric = Path::new(env!("CARGO_MANIFEST_DIR"));
    fabric.parent().unwrap_or(fabric).join("fuzz")
}

#[test]
fn every_fabric_batch_input_passes_its_check() {
    let generated = seeds();
    if std::env::var_os("RAMQP_WRITE_FUZZ_SEEDS").is_some() {
        let dir = fuzz_dir().join("seeds").join(TARGET);
        std::fs::create_dir_all(&dir).unwrap();
        for (n, (_, bytes)) in generated.iter().enumerate() {
            std::fs::write(dir.join(format!("writer-{n:02}")), bytes).unwrap();
        }
    }
    let mut files = Vec::new();
    for sub in ["corpus", "seeds"] {
        if let Ok(entries) = std::fs::read_dir(fuzz_dir().join(sub).join(TARGET)) {
            files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_file()));
        }
    }
    assert!(!files.is_empty(), "no corpus or seed for {TARGET}");
    for file in &files {
        let data = std::fs::read(file).unwrap();
        let outcome = std::panic::catch_unwind(|| batch(&data));
        assert!(
            outcome.is_ok(),
            "{} fails the {TARGET} check",
            file.display()
        );
    }
    for (_, data) in &generated {
        batch(data);
    }
}
