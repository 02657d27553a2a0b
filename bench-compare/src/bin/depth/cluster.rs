//! A local cluster of `ramqp-brokerd` processes that the bench starts
//! itself (rejoin mode), laid out like `deploy/local-cluster.sh`: node N
//! (1-based) serves AMQP on `base + N - 1` and its fabric on
//! `base + 10 + N - 1`, every node gets the others as `--peer` and no
//! `--join` (a fresh cluster bootstraps from the shared member list), data
//! in `<work>/nodeN/data`. A node is killed, wiped and restarted with the
//! same flags, so it keeps its identity. Nodes are asked through
//! `ramqp-ctl` (`status --json`, `health`, `move-leadership`), the
//! operator's tool, so the bench sees what an operator sees. Every process
//! is killed when the cluster is dropped (`child::Brokerd`). It knows
//! nothing of AMQP.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use broker::admin::{NodeStatus, QueueStatus};

use crate::child::Brokerd;

/// How often a node that is starting is asked whether it is healthy.
const HEALTH_POLL: Duration = Duration::from_millis(200);

/// One node: its fixed identity and its current process.
pub(crate) struct Node {
    pub(crate) id: u64,
    pub(crate) amqp: SocketAddr,
    pub(crate) fabric: SocketAddr,
    pub(crate) data_dir: PathBuf,
    process: Option<Brokerd>,
    /// Processes started for this node so far (names the log files).
    starts: u32,
}

/// The nodes, the binaries and where their files go.
pub(crate) struct Cluster {
    brokerd: PathBuf,
    ctl: PathBuf,
    logs: PathBuf,
    timeout: Duration,
    pub(crate) nodes: Vec<Node>,
}

impl Cluster {
    /// Start `n` nodes on ports from `base_port` and wait until every one
    /// listens and sees all `n` members reachable.
    pub(crate) async fn start(
        brokerd: &Path,
        ctl: &Path,
        work: &Path,
        base_port: u16,
        n: u64,
        timeout: Duration,
    ) -> Result<Cluster> {
        let mut nodes = Vec::new();
        for id in 1..=n {
            let offset = u16::try_from(id - 1).context("node id")?;
            let amqp = SocketAddr::from(([127, 0, 0, 1], base_port + offset));
            let fabric = SocketAddr::from(([127, 0, 0, 1], base_port + 10 + offset));
            for addr in [amqp, fabric] {
                TcpListener::bind(addr).with_context(|| {
                    format!("port {addr} is taken: pick other ports with --base-port")
                })?;
            }
            let dir = work.join(format!("node{id}"));
            std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
            nodes.push(Node {
                id,
                amqp,
                fabric,
                data_dir: dir.join("data"),
                process: None,
                starts: 0,
            });
        }
        let mut cluster = Cluster {
            brokerd: brokerd.to_path_buf(),
            ctl: ctl.to_path_buf(),
            logs: work.to_path_buf(),
            timeout,
            nodes,
        };
        for id in 1..=n {
            cluster.spawn(id)?;
        }
        for id in 1..=n {
            cluster.listening(id).await?;
        }
        for id in 1..=n {
            cluster.wait_healthy(id).await?;
        }
        Ok(cluster)
    }

    fn index(&self, id: u64) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .with_context(|| format!("no node {id} in the cluster"))
    }

    /// Node `id`.
    pub(crate) fn node(&self, id: u64) -> Result<&Node> {
        Ok(&self.nodes[self.index(id)?])
    }

    /// The running process of node `id`.
    pub(crate) fn process(&self, id: u64) -> Result<&Brokerd> {
        self.node(id)?
            .process
            .as_ref()
            .with_context(|| format!("node {id} is not running"))
    }

    fn process_mut(&mut self, id: u64) -> Result<&mut Brokerd> {
        let i = self.index(id)?;
        self.nodes[i]
            .process
            .as_mut()
            .with_context(|| format!("node {id} is not running"))
    }

    /// The same flags at every start of a node: its identity.
    fn flags(&self, node: &Node) -> Vec<String> {
        let mut flags = vec![
            "--node-id".to_string(),
            node.id.to_string(),
            "--fabric-listen".to_string(),
            node.fabric.to_string(),
        ];
        for peer in self.nodes.iter().filter(|p| p.id != node.id) {
            flags.push("--peer".to_string());
            flags.push(format!("{}={}", peer.id, peer.fabric));
        }
        flags
    }

    /// Start node `id`'s process (it must not run); its spawn time.
    pub(crate) fn spawn(&mut self, id: u64) -> Result<Instant> {
        let i = self.index(id)?;
        if self.nodes[i].process.is_some() {
            bail!("node {id} already runs");
        }
        let flags = self.flags(&self.nodes[i]);
        let node = &self.nodes[i];
        let name = format!("node{id}-{}", node.starts + 1);
        let process = Brokerd::spawn_with(
            &self.brokerd,
            &node.amqp.to_string(),
            &node.data_dir,
            &flags,
            &self.logs,
            &name,
        )?;
        let spawned_at = process.spawned_at;
        let node = &mut self.nodes[i];
        node.starts += 1;
        node.process = Some(process);
        Ok(spawned_at)
    }

    /// Wait until node `id` prints its address; when that was.
    pub(crate) async fn listening(&mut self, id: u64) -> Result<Instant> {
        let limit = self.timeout.max(Duration::from_secs(60));
        let process = self.process_mut(id)?;
        process
            .listening(limit)
            .await
            .with_context(|| format!("node {id}"))?;
        Ok(Instant::now())
    }

    /// Wait until node `id` reaches every member and knows a metadata leader.
    pub(crate) async fn wait_healthy(&mut self, id: u64) -> Result<()> {
        let limit = self.timeout.max(Duration::from_secs(60));
        let deadline = Instant::now() + limit;
        let expect = self.nodes.len().to_string();
        loop {
            self.process_mut(id)?.check_running()?;
            let error = match self.ctl(id, &["health", "--expect-members", &expect]).await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                bail!("node {id} not healthy within {limit:?}: {error:#}");
            }
            tokio::time::sleep(HEALTH_POLL).await;
        }
    }

    /// An error if node `id`'s process has exited.
    pub(crate) fn check_running(&mut self, id: u64) -> Result<()> {
        self.process_mut(id)?.check_running()
    }

    /// SIGKILL node `id` and wait for it; how long that took and its status.
    pub(crate) async fn kill(&mut self, id: u64) -> Result<(Duration, String)> {
        let i = self.index(id)?;
        let mut process = self.nodes[i]
            .process
            .take()
            .with_context(|| format!("node {id} is not running"))?;
        process.stop(true, Duration::from_secs(30)).await
    }

    /// Delete node `id`'s whole data directory (it must not run); the
    /// bytes that were in it.
    pub(crate) fn wipe(&self, id: u64) -> Result<u64> {
        let node = self.node(id)?;
        if node.process.is_some() {
            bail!("node {id} still runs; not wiping its data");
        }
        let bytes = crate::footprint::tree_bytes(&node.data_dir).unwrap_or(0);
        std::fs::remove_dir_all(&node.data_dir)
            .with_context(|| format!("delete {}", node.data_dir.display()))?;
        Ok(bytes)
    }

    /// Kill every node (the bench deletes their data afterwards).
    pub(crate) async fn kill_all(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        let ids: Vec<u64> = self
            .nodes
            .iter()
            .filter(|n| n.process.is_some())
            .map(|n| n.id)
            .collect();
        for id in ids {
            if let Err(e) = self.kill(id).await {
                errors.push(format!("killing node {id}: {e:#}"));
            }
        }
        errors
    }

    /// Run `ramqp-ctl --fabric <node id's fabric> <args>`; its stdout, or
    /// an error with its stderr when it fails.
    pub(crate) async fn ctl(&self, id: u64, args: &[&str]) -> Result<String> {
        let fabric = self.node(id)?.fabric;
        let mut command = Command::new(&self.ctl);
        command
            .arg("--fabric")
            .arg(fabric.to_string())
            .arg("--timeout-ms")
            .arg(self.timeout.as_millis().to_string())
            .args(args);
        let what = format!("ramqp-ctl --fabric {fabric} {}", args.join(" "));
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .context("the ramqp-ctl task")?
            .with_context(|| format!("run {what}"))?;
        if !output.status.success() {
            bail!(
                "{what}: {}: {}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim(),
                String::from_utf8_lossy(&output.stdout).trim()
            );
        }
        String::from_utf8(output.stdout).with_context(|| format!("{what}: output is not UTF-8"))
    }

    /// Node `id`'s view (`ramqp-ctl status --json`).
    pub(crate) async fn status(&self, id: u64) -> Result<NodeStatus> {
        let out = self.ctl(id, &["status", "--json"]).await?;
        serde_json::from_str(&out).with_context(|| format!("node {id}: odd status JSON"))
    }

    /// `address` as node `id` sees it (`None`: the node does not know it).
    pub(crate) async fn queue(&self, id: u64, address: &str) -> Result<Option<QueueStatus>> {
        let status = self.status(id).await?;
        Ok(status.queues.into_iter().find(|q| q.address == address))
    }

    /// Ask `leader` to hand `address` to node `to`; ramqp-ctl's summary.
    pub(crate) async fn move_leadership(
        &self,
        leader: u64,
        address: &str,
        to: u64,
    ) -> Result<String> {
        let to = to.to_string();
        let out = self
            .ctl(
                leader,
                &["move-leadership", "--queue", address, "--to", &to],
            )
            .await?;
        Ok(out.trim().to_string())
    }

    /// Node `id`'s stderr log.
    pub(crate) fn log_path(&self, id: u64) -> Result<&Path> {
        Ok(self.process(id)?.stderr_log())
    }
}
