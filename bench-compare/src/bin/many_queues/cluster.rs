//! The three `ramqp-brokerd` processes the `many_queues` bin measures: how
//! they are started and stopped (the flags of deploy/local-cluster.sh, plus
//! an HTTP port for `/metrics`), what they cost (/proc: CPU ticks, RSS) and
//! what their metrics say about the Raft groups (leaders, terms).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One node of the cluster.
pub struct Node {
    pub id: u64,
    pub amqp: u16,
    pub fabric: u16,
    pub http: u16,
    pub dir: PathBuf,
    pub child: Option<Child>,
}

/// The processes, their ports and data directories.
pub struct Cluster {
    pub bin: PathBuf,
    pub nodes: Vec<Node>,
    pub extra_args: Vec<String>,
}

impl Cluster {
    /// Lay out `n` nodes under `root` with ports from `base`. Unless
    /// `extra_args` say otherwise, each node gets its share of the cores as
    /// runtime workers, as deploy/local-cluster.sh gives them.
    pub fn new(
        bin: PathBuf,
        root: &Path,
        base: u16,
        n: u64,
        mut extra_args: Vec<String>,
    ) -> Cluster {
        if !extra_args.iter().any(|a| a.starts_with("--worker-threads")) {
            let cores = std::thread::available_parallelism().map_or(1, |c| c.get() as u64);
            extra_args.push("--worker-threads".into());
            extra_args.push((cores / n.max(1)).max(1).to_string());
        }
        let nodes = (1..=n)
            .map(|id| Node {
                id,
                amqp: base + id as u16 - 1,
                fabric: base + 10 + id as u16 - 1,
                http: base + 20 + id as u16 - 1,
                dir: root.join(format!("node{id}")),
                child: None,
            })
            .collect();
        Cluster {
            bin,
            nodes,
            extra_args,
        }
    }

    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[(id - 1) as usize]
    }

    /// Start node `id` (its data directory kept if it exists).
    pub fn spawn(&mut self, id: u64) -> Result<()> {
        let peers: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.id != id)
            .map(|n| format!("{}=127.0.0.1:{}", n.id, n.fabric))
            .collect();
        let bin = self.bin.clone();
        let extra = self.extra_args.clone();
        let node = &mut self.nodes[(id - 1) as usize];
        std::fs::create_dir_all(&node.dir)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.dir.join("log"))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("--node-id")
            .arg(id.to_string())
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", node.amqp))
            .arg("--fabric-listen")
            .arg(format!("127.0.0.1:{}", node.fabric))
            .arg("--http-listen")
            .arg(format!("127.0.0.1:{}", node.http))
            .arg("--data-dir")
            .arg(node.dir.join("data"));
        for peer in peers {
            cmd.arg("--peer").arg(peer);
        }
        cmd.args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        node.child = Some(cmd.spawn().with_context(|| format!("spawn {bin:?}"))?);
        Ok(())
    }

    pub fn pid(&self, id: u64) -> Option<u32> {
        self.node(id).child.as_ref().map(|c| c.id())
    }

    /// Send `signal` (TERM, KILL) to node `id`.
    pub fn signal(&self, id: u64, signal: &str) -> Result<()> {
        let pid = self
            .pid(id)
            .ok_or_else(|| anyhow!("node {id} is not running"))?;
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()?;
        if !status.success() {
            bail!("kill -{signal} {pid} failed");
        }
        Ok(())
    }

    /// Wait (bounded) until node `id`'s process exited; its exit status.
    pub async fn wait_exit(&mut self, id: u64, within: Duration) -> Result<String> {
        let deadline = Instant::now() + within;
        let node = &mut self.nodes[(id - 1) as usize];
        let child = node
            .child
            .as_mut()
            .ok_or_else(|| anyhow!("node {id} is not running"))?;
        loop {
            if let Some(status) = child.try_wait()? {
                node.child = None;
                return Ok(status.to_string());
            }
            if Instant::now() > deadline {
                bail!("node {id} did not exit within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait until node `id` answers `/readyz` with 200.
    pub async fn wait_ready(&self, id: u64, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        let port = self.node(id).http;
        loop {
            if let Ok((200, _)) = http_get(port, "/readyz").await {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("node {id} not ready within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stop every running node (KILL: the bench is over).
    pub fn kill_all(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// utime + stime of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) in parens.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("bad /proc/{pid}/stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.get(11).context("utime")?.parse()?;
    let stime: u64 = fields.get(12).context("stime")?.parse()?;
    Ok(utime + stime)
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 if that fails).
pub fn ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Resident set size of a process, KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no VmRSS for {pid}"))
}

/// What one node's `/metrics` says about its quorum groups.
#[derive(Debug, Default, Clone)]
pub struct GroupFigures {
    /// Quorum groups open on the node.
    pub groups: u64,
    /// Quorum groups it leads.
    pub leading: u64,
    /// Of those, the quiet ones (no heartbeats).
    pub quiet: u64,
    /// The log store's durable writes, journal folds and seconds spent in
    /// durable writes, since the node started.
    pub store_commits: u64,
    pub store_folds: u64,
    pub store_commit_s: f64,
    /// Groups whose leader it knows.
    pub leader_known: u64,
    /// Term per group address.
    pub terms: HashMap<String, u64>,
}

/// Scrape node `port`'s `/metrics` (every figure), or `/metrics/node`
/// (the node-wide ones: no terms, no `leader_known`), a few KB instead of
/// ~8 MB at 10,000 queues.
pub async fn group_figures(port: u16, path: &str) -> Result<GroupFigures> {
    let (status, body) = http_get(port, path).await?;
    if status != 200 {
        bail!("{path} answered {status}");
    }
    let mut figures = GroupFigures::default();
    for line in body.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if key == "ramqp_store_commit_duration_seconds_sum" {
            figures.store_commit_s = value;
            continue;
        }
        let value = value as u64;
        let (name, group) = match key.split_once('{') {
            Some((name, labels)) => (name, label(labels, "group")),
            None => (key, None),
        };
        match (name, group) {
            ("ramqp_raft_groups", None) => figures.groups = value,
            ("ramqp_raft_groups_leading", None) => figures.leading = value,
            ("ramqp_raft_groups_quiet", None) => figures.quiet = value,
            ("ramqp_store_commits_total", None) => figures.store_commits = value,
            ("ramqp_store_journal_folds_total", None) => figures.store_folds = value,
            ("ramqp_raft_leader_known", Some(g)) if g.starts_with("/quorum/") => {
                figures.leader_known += value
            }
            ("ramqp_raft_term", Some(g)) if g.starts_with("/quorum/") => {
                figures.terms.insert(g, value);
            }
            _ => {}
        }
    }
    Ok(figures)
}

fn label(labels: &str, name: &str) -> Option<String> {
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let end = labels[start..].find('"')? + start;
    Some(labels[start..end].to_owned())
}

/// Elections between two scrapes of every node: per group, the highest
/// term any node saw, summed growth (a group that moved from term 3 to 5
/// held two elections).
pub fn elections(before: &[GroupFigures], after: &[GroupFigures]) -> u64 {
    fn max_terms(figures: &[GroupFigures]) -> HashMap<&str, u64> {
        let mut max: HashMap<&str, u64> = HashMap::new();
        for f in figures {
            for (g, t) in &f.terms {
                let e = max.entry(g.as_str()).or_default();
                *e = (*e).max(*t);
            }
        }
        max
    }
    let (b, a) = (max_terms(before), max_terms(after));
    a.iter()
        .map(|(g, t)| t.saturating_sub(*b.get(g).unwrap_or(t)))
        .sum()
}

/// A plain HTTP/1.1 GET on loopback: status and body (chunked decoded).
pub async fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    let work = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| anyhow!("no HTTP head"))?;
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("no HTTP status"))?;
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        let body = if chunked {
            dechunk(body)?
        } else {
            body.to_owned()
        };
        Ok::<_, anyhow::Error>((status, body))
    };
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .map_err(|_| anyhow!("GET {path} on {port} timed out"))?
}

fn dechunk(mut body: &str) -> Result<String> {
    let mut out = String::with_capacity(body.len());
    loop {
        let (size, rest) = body
            .split_once("\r\n")
            .ok_or_else(|| anyhow!("bad chunk"))?;
        let size = usize::from_str_radix(size.trim(), 16)?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).ok_or_else(|| anyhow!("short chunk"))?);
        body = rest.get(size + 2..).unwrap_or("");
    }
}
