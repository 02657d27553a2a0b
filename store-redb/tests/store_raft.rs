//! Real openraft `Raft` instances on `GroupLogStore`s: several single-node
//! groups share one `LogStore` (so their appends, votes and commits are
//! group-committed together), write concurrently, snapshot and purge, shut
//! down, and restart from the reopened file. Guards against a store that
//! passes the conformance suite but trips openraft's real call patterns
//! (flush callbacks, committed, purge after a snapshot, recovery).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{MemStateMachine, NodeId, Snapshot, TypeConfig};
use openraft::alias::VoteOf;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Config, Raft, ServerState};
use ramqpd_store_redb::{LogStore, LogStoreOptions};

const NODE: NodeId = 1;
const N_GROUPS: u64 = 4;
const N_WRITES: u64 = 50;
const WAIT: Option<Duration> = Some(Duration::from_secs(10));

/// Single-node groups never send; every RPC fails.
struct NoNetwork;

fn unreachable() -> Unreachable<TypeConfig> {
    Unreachable::new(&std::io::Error::other("single-node test"))
}

impl RaftNetworkFactory<TypeConfig> for NoNetwork {
    type Network = NoNetwork;

    async fn new_client(&mut self, _target: NodeId, _node: &BasicNode) -> NoNetwork {
        NoNetwork
    }
}

impl RaftNetworkV2<TypeConfig> for NoNetwork {
    type SnapshotData = std::io::Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        Err(RPCError::Unreachable(unreachable()))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        Err(RPCError::Unreachable(unreachable()))
    }

    async fn full_snapshot(
        &mut self,
        _vote: VoteOf<TypeConfig>,
        _snapshot: Snapshot,
        _cancel: impl std::future::Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        Err(StreamingError::Unreachable(unreachable()))
    }
}

fn config() -> Arc<Config> {
    let config = Config {
        cluster_name: "store-raft-test".into(),
        ..Config::default()
    };
    Arc::new(config.validate().expect("valid config"))
}

async fn start(
    store: &LogStore,
    group_id: u64,
    sm: MemStateMachine,
) -> Raft<TypeConfig, MemStateMachine> {
    let log_store = store.group::<TypeConfig>(group_id).unwrap();
    Raft::new(NODE, config(), NoNetwork, log_store, sm)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_groups_write_snapshot_purge_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    let machines: BTreeMap<u64, MemStateMachine> = (0..N_GROUPS)
        .map(|g| (g, MemStateMachine::default()))
        .collect();

    let last_index = {
        let store = LogStore::open(&path, LogStoreOptions::default()).unwrap();
        let mut rafts = Vec::new();
        for (g, sm) in &machines {
            let raft = start(&store, *g, sm.clone()).await;
            raft.initialize(BTreeMap::from([(NODE, BasicNode::default())]))
                .await
                .unwrap();
            rafts.push(raft);
        }
        let writers = rafts.iter().cloned().enumerate().map(|(g, raft)| {
            tokio::spawn(async move {
                raft.wait(WAIT)
                    .state(ServerState::Leader, "leader")
                    .await
                    .unwrap();
                for i in 0..N_WRITES {
                    raft.client_write(format!("g{g}-{i}")).await.unwrap();
                }
            })
        });
        for w in writers.collect::<Vec<_>>() {
            w.await.unwrap();
        }
        let stats = store.stats();
        assert!(stats.commits > 0 && stats.entries >= N_GROUPS * N_WRITES);

        // Snapshot and purge group 0's log.
        let raft0 = &rafts[0];
        // `client_write` answers once the entry is applied, but the metrics
        // that report it are published a moment later: wait until they show
        // the whole log applied (CI once read index 50 of 51 here and then
        // waited for a snapshot at 50 while openraft built it at 51).
        let settled = raft0
            .wait(WAIT)
            .metrics(
                |m| {
                    m.last_log_index.is_some()
                        && m.last_applied.map(|l| l.index) == m.last_log_index
                },
                "whole log applied",
            )
            .await
            .unwrap();
        let applied_log_id = settled.last_applied.unwrap();
        let applied = applied_log_id.index;
        raft0.trigger().snapshot().await.unwrap();
        raft0
            .wait(WAIT)
            .snapshot(applied_log_id, "snapshot")
            .await
            .unwrap();
        raft0.trigger().purge_log(applied).await.unwrap();
        raft0
            .wait(WAIT)
            .metrics(|m| m.purged.is_some_and(|p| p.index == applied), "purged")
            .await
            .unwrap();

        let last_index: Vec<u64> = rafts
            .iter()
            .map(|r| r.metrics().borrow_watched().last_log_index.unwrap())
            .collect();
        for raft in &rafts {
            raft.shutdown().await.unwrap();
        }
        last_index
    };

    for (g, sm) in &machines {
        let data = &sm.lock().applied_data;
        assert_eq!(data.len() as u64, N_WRITES, "group {g} applied every write");
        assert_eq!(data.last(), Some(&format!("g{g}-{}", N_WRITES - 1)));
    }

    // Restart every group from the reopened file, with its state machine.
    // openraft 0.10's tasks of a group (its state-machine worker among
    // them) may still hold the first store for a moment after `shutdown()`
    // returned, and redb refuses a second open of the file meanwhile
    // (seen once in seven runs): retry, bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let store = loop {
        match LogStore::open(&path, LogStoreOptions::default()) {
            Ok(store) => break store,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("reopen: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("reopen: {e}"),
        }
    };
    assert_eq!(store.groups().unwrap(), (0..N_GROUPS).collect::<Vec<_>>());
    store.verify().unwrap();
    for (g, sm) in &machines {
        let raft = start(&store, *g, sm.clone()).await;
        let m = raft
            .wait(WAIT)
            .state(ServerState::Leader, "leader again")
            .await
            .unwrap();
        assert!(m.last_log_index.unwrap() >= last_index[*g as usize]);
        assert!(m.current_term >= 1);
        if *g == 0 {
            assert!(m.purged.is_some(), "group 0's purge survived");
        }
        raft.client_write(format!("g{g}-after-restart"))
            .await
            .unwrap();
        raft.shutdown().await.unwrap();
        assert_eq!(
            sm.lock().applied_data.last(),
            Some(&format!("g{g}-after-restart"))
        );
    }
}
