//! Crash safety against a real process death: a child process appends to
//! several groups at once and prints each append the store acknowledged as
//! durable; the test kills it with SIGKILL mid-stream (no destructor, no
//! flush, the writer thread possibly mid-commit), reopens the database and
//! checks that every acknowledged entry is there, intact (CRC verified,
//! payload byte for byte) and in order, and that the store takes appends
//! again. Two rounds, so the second kill hits a database already recovered
//! once. The journal's records are written with `O_DIRECT | O_DSYNC` where
//! the file system allows (the store's default).

#[path = "support/payload.rs"]
mod payload;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId, RaftLogReader};
use payload::payload;
use ramqpd_store_redb::{LogStore, LogStoreOptions};

openraft::declare_raft_types!(TypeConfig);

const CRASH_WRITER: &str = env!("CARGO_BIN_EXE_ramqp-store-redb-crash-writer");
const N_GROUPS: u64 = 8;
const PAYLOAD_BYTES: usize = 256;
/// Acks to read before the kill.
const ACKS_BEFORE_KILL: usize = 2_000;

#[derive(Default)]
struct Acks {
    /// Highest acknowledged index per group.
    last_index: BTreeMap<u64, u64>,
    /// Acknowledged vote term per group.
    vote_term: BTreeMap<u64, u64>,
    n_acks: usize,
}

impl Acks {
    fn take_line(&mut self, line: &str) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let parse = |w: &str| w.parse::<u64>().ok();
        match words.as_slice() {
            ["ack", g, i] => {
                let (Some(g), Some(i)) = (parse(g), parse(i)) else {
                    return;
                };
                let last = self.last_index.entry(g).or_insert(i);
                assert!(i >= *last, "acks of group {g} out of order");
                *last = i;
                self.n_acks += 1;
            }
            ["vote", g, t] => {
                if let (Some(g), Some(t)) = (parse(g), parse(t)) {
                    self.vote_term.insert(g, t);
                }
            }
            _ => {}
        }
    }
}

/// Runs the crash writer on `db`, reads acks until `ACKS_BEFORE_KILL`, kills
/// it with SIGKILL and returns every ack it printed before dying.
fn run_and_kill(db: &Path) -> Acks {
    let mut child = Command::new(CRASH_WRITER)
        .arg(db)
        .arg(N_GROUPS.to_string())
        .arg(PAYLOAD_BYTES.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn crash writer");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut acks = Acks::default();
    while acks.n_acks < ACKS_BEFORE_KILL {
        match lines.next() {
            Some(Ok(line)) => acks.take_line(&line),
            other => panic!("crash writer ended early: {other:?}"),
        }
    }
    child.kill().expect("SIGKILL");
    // Lines already in the pipe were printed after their flush: they count.
    for line in lines.map_while(Result::ok) {
        acks.take_line(&line);
    }
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status:?}");
    acks
}

/// Reopens `db` and checks every group against `acks`; returns each group's
/// last index.
async fn check_after_crash(db: &Path, acks: &Acks) -> BTreeMap<u64, u64> {
    let store = LogStore::open(db, LogStoreOptions::default()).expect("reopen after SIGKILL");
    let report = store.verify().expect("every record passes its CRC");
    assert!(report.n_entries as usize >= acks.n_acks);
    assert_eq!(store.groups().unwrap(), (0..N_GROUPS).collect::<Vec<_>>());
    let mut last_indexes = BTreeMap::new();
    for group_id in 0..N_GROUPS {
        let mut group = store.group::<TypeConfig>(group_id).unwrap();
        let acked = acks.last_index[&group_id];
        let vote = group
            .read_vote()
            .await
            .unwrap()
            .expect("acked vote survives");
        assert!(vote.leader_id.term >= acks.vote_term[&group_id]);
        let state = group.get_log_state().await.unwrap();
        let last = state.last_log_id.expect("group has entries").index;
        assert!(
            last >= acked,
            "group {group_id}: acked {acked}, found only {last}"
        );
        let entries = group.try_get_log_entries(0..=last).await.unwrap();
        assert_eq!(entries.len() as u64, last + 1, "group {group_id}: a hole");
        let mut term = 0;
        for (i, entry) in entries.iter().enumerate() {
            let i = i as u64;
            assert_eq!(entry.log_id.index, i, "group {group_id}: out of order");
            assert!(entry.log_id.leader_id.term >= term, "terms go backwards");
            term = entry.log_id.leader_id.term;
            match &entry.payload {
                EntryPayload::Normal(data) => {
                    assert_eq!(
                        data,
                        &payload(group_id, i, PAYLOAD_BYTES),
                        "group {group_id} index {i}"
                    )
                }
                other => panic!("unexpected payload {other:?}"),
            }
        }
        last_indexes.insert(group_id, last);
    }
    let n_found: u64 = last_indexes.values().map(|l| l + 1).sum();
    eprintln!(
        "after SIGKILL: {} acks read, {} entries on disk in {} groups ({} records verified)",
        acks.n_acks, n_found, N_GROUPS, report.n_entries
    );
    last_indexes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_appends_survive_sigkill() {
    // On a disk file system where there is one, so that the journal's
    // records go through its direct writes (tmpfs, often /tmp, has none).
    let dir = tempfile::Builder::new()
        .prefix("store-crash")
        .tempdir_in("/var/tmp")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let db = dir.path().join("log.redb");

    let first = run_and_kill(&db);
    let after_first = check_after_crash(&db, &first).await;

    let second = run_and_kill(&db);
    for (group_id, last) in &after_first {
        assert!(
            second.last_index[group_id] > *last,
            "round 2 continued group {group_id}"
        );
    }
    let after_second = check_after_crash(&db, &second).await;

    // The recovered store takes appends again, durably.
    {
        let store = LogStore::open(&db, LogStoreOptions::default()).unwrap();
        for (group_id, last) in &after_second {
            let mut group = store.group::<TypeConfig>(*group_id).unwrap();
            let index = last + 1;
            let entry = Entry {
                log_id: LogId::new(CommittedLeaderId::new(99, *group_id), index),
                payload: EntryPayload::Normal(payload(*group_id, index, PAYLOAD_BYTES)),
            };
            group.blocking_append([entry]).await.unwrap();
        }
    }
    let store = LogStore::open(&db, LogStoreOptions::default()).unwrap();
    for (group_id, last) in &after_second {
        let mut group = store.group::<TypeConfig>(*group_id).unwrap();
        let state = group.get_log_state().await.unwrap();
        assert_eq!(
            state.last_log_id.map(|l| (l.index, l.leader_id.term)),
            Some((last + 1, 99))
        );
    }
}
