//! A `ramqp-brokerd` child process that the bench starts itself (recovery
//! and rejoin modes): spawned on a data dir with its stdout and stderr in
//! log files, its `listening on` address read from the stdout log, stopped
//! with SIGTERM (or SIGKILL) and awaited, every step bounded. A child still
//! running when this is dropped is killed, so an error never leaves a
//! broker behind. It knows nothing of AMQP.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// How often the child is looked at while waiting for it (its stdout line,
/// its exit): these are waits on another process, which cannot notify us.
const POLL: Duration = Duration::from_millis(10);

/// The stdout line that carries the bound address.
const LISTENING: &str = "ramqp-brokerd listening on ";

/// A running broker process.
pub(crate) struct Brokerd {
    child: Child,
    /// Its process id.
    pub(crate) pid: u32,
    /// When it was spawned.
    pub(crate) spawned_at: Instant,
    stdout_log: PathBuf,
    stderr_log: PathBuf,
    exited: Option<ExitStatus>,
}

impl Brokerd {
    /// Spawn `binary --listen <listen> --data-dir <data_dir>`, its output
    /// into `<logs>/<name>.out` and `.log`. Does not wait for anything.
    pub(crate) fn spawn(
        binary: &Path,
        listen: &str,
        data_dir: &Path,
        logs: &Path,
        name: &str,
    ) -> Result<Brokerd> {
        Brokerd::spawn_with(binary, listen, data_dir, &[], logs, name)
    }

    /// The same with `extra` flags after those two (a cluster node's
    /// `--node-id`, `--fabric-listen`, `--peer`s).
    pub(crate) fn spawn_with(
        binary: &Path,
        listen: &str,
        data_dir: &Path,
        extra: &[String],
        logs: &Path,
        name: &str,
    ) -> Result<Brokerd> {
        let stdout_log = logs.join(format!("{name}.out"));
        let stderr_log = logs.join(format!("{name}.log"));
        let stdout = std::fs::File::create(&stdout_log)
            .with_context(|| format!("create {}", stdout_log.display()))?;
        let stderr = std::fs::File::create(&stderr_log)
            .with_context(|| format!("create {}", stderr_log.display()))?;
        let spawned_at = Instant::now();
        let child = Command::new(binary)
            .arg("--listen")
            .arg(listen)
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        Ok(Brokerd {
            pid: child.id(),
            child,
            spawned_at,
            stdout_log,
            stderr_log,
            exited: None,
        })
    }

    /// Wait (up to `timeout`) for the `listening on` line; the address.
    pub(crate) async fn listening(&mut self, timeout: Duration) -> Result<SocketAddr> {
        let deadline = Instant::now() + timeout;
        loop {
            let out = std::fs::read_to_string(&self.stdout_log).unwrap_or_default();
            if let Some(addr) = out.lines().find_map(|l| l.strip_prefix(LISTENING)) {
                return addr
                    .trim()
                    .parse()
                    .with_context(|| format!("ramqp-brokerd printed an odd address {addr:?}"));
            }
            self.check_running()?;
            if Instant::now() >= deadline {
                bail!(
                    "ramqp-brokerd did not print its address within {timeout:?}; log: {}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// An error (with the log's tail) if the process has exited.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.try_exit()? {
            bail!(
                "ramqp-brokerd (pid {}) exited with {status}; log: {}",
                self.pid,
                self.log_tail()
            );
        }
        Ok(())
    }

    fn try_exit(&mut self) -> Result<Option<ExitStatus>> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().context("wait for ramqp-brokerd")?;
        }
        Ok(self.exited)
    }

    /// Stop it (SIGTERM, or SIGKILL with `kill`) and wait up to `timeout`
    /// for it to exit (then SIGKILL it and fail). Returns how long it took
    /// and its exit status.
    pub(crate) async fn stop(
        &mut self,
        kill: bool,
        timeout: Duration,
    ) -> Result<(Duration, String)> {
        let signalled = Instant::now();
        if self.try_exit()?.is_none() {
            if kill {
                self.child.kill().context("SIGKILL ramqp-brokerd")?;
            } else {
                let status = Command::new("kill")
                    .arg("-TERM")
                    .arg(self.pid.to_string())
                    .status()
                    .context("run kill -TERM")?;
                if !status.success() {
                    bail!("kill -TERM {} failed: {status}", self.pid);
                }
            }
        }
        loop {
            if let Some(status) = self.try_exit()? {
                return Ok((signalled.elapsed(), status.to_string()));
            }
            if signalled.elapsed() >= timeout {
                let _ = self.child.kill();
                return Err(anyhow!(
                    "ramqp-brokerd (pid {}) still running {timeout:?} after the signal; killed",
                    self.pid
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Its stderr log file.
    pub(crate) fn stderr_log(&self) -> &Path {
        &self.stderr_log
    }

    /// The last lines of its stderr log, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

impl Drop for Brokerd {
    fn drop(&mut self) {
        if matches!(self.try_exit(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
