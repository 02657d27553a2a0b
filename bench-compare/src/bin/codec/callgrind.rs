//! Instructions per operation under `valgrind --tool=callgrind`: the bin
//! runs itself (`--one CASE --ops N`) twice, with N1 and N2 operations,
//! counting only inside `codec_timed_batch` (so neither start-up nor the
//! untimed buffer fills count); per operation = (total(N2) - total(N1)) /
//! (N2 - N1), which also cancels one-off work inside the timed part.
//! Instruction counts do not move with the load of this shared machine,
//! wall-clock times do.

use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use ramqp_bench_compare::codec_compare::cases::CaseId;

/// Instructions one callgrind run collected for `case` at `ops` operations.
fn collected(exe: &Path, dir: &Path, case: &CaseId, ops: u64) -> Result<u64> {
    let out_file = dir.join(format!("callgrind.{ops}.out"));
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg("--toggle-collect=*codec_timed_batch*")
        .arg(exe)
        .args(["--one", &case.name(), "--ops", &ops.to_string()])
        .output()
        .context("run valgrind (is it installed?)")?;
    let _ = std::fs::remove_file(&out_file);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!("valgrind on {} failed: {stderr}", case.name());
    }
    // "==1234== Collected : 5678"
    stderr
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| anyhow!("no `Collected :` line from callgrind: {stderr}"))
}

/// Instructions per operation of `case`, from runs of `n1` and `n2` ops.
pub fn per_op(case: &CaseId, n1: u64, n2: u64) -> Result<f64> {
    let exe = std::env::current_exe().context("this bin's path")?;
    let dir = std::env::temp_dir().join(format!("codec-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let first = collected(&exe, &dir, case, n1);
    let second = collected(&exe, &dir, case, n2);
    let _ = std::fs::remove_dir_all(&dir);
    let (first, second) = (first?, second?);
    Ok((second as f64 - first as f64) / (n2 - n1) as f64)
}

/// `valgrind --version`, if valgrind runs.
pub fn version() -> Option<String> {
    let out = Command::new("valgrind").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
