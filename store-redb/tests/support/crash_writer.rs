//! Test-support binary for `tests/store_crash.rs`: appends entries to several
//! Raft groups concurrently, forever (bounded by a time limit), and prints
//! one line per append that the store reported durable:
//!
//! ```text
//! ready
//! vote <group> <term>
//! ack <group> <index>
//! ```
//!
//! The test kills it with SIGKILL mid-stream and checks that every printed
//! ack survived. Usage: `crash_writer <db path> <n groups> <payload bytes>`.
//! On an existing database each group continues after its last entry.

#![forbid(unsafe_code)]

use std::io::Write;
use std::time::{Duration, Instant};

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{Entry, EntryPayload, LogId, RaftLogReader, Vote};
use ramqpd_store_redb::{LogStore, LogStoreOptions};

mod payload;

use payload::payload;

openraft::declare_raft_types!(TypeConfig);

/// The writer stops by itself after this long, if nobody kills it.
const RUN_TIME_MAX: Duration = Duration::from_secs(60);

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means the test is gone: stop.
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, n_groups, payload_bytes] = args.as_slice() else {
        return Err("usage: crash_writer <db path> <n groups> <payload bytes>".into());
    };
    let n_groups: u64 = n_groups.parse()?;
    let payload_bytes: usize = payload_bytes.parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let store = LogStore::open(path, LogStoreOptions::default())?;
        let mut tasks = Vec::new();
        for group_id in 0..n_groups {
            let mut group = store.group::<TypeConfig>(group_id)?;
            tasks.push(tokio::spawn(async move {
                let state = group.get_log_state().await?;
                let mut index = state.last_log_id.map_or(0, |l| l.index + 1);
                let term = RaftLogReader::read_vote(&mut group)
                    .await?
                    .map_or(1, |v| v.leader_id.term + 1);
                group.save_vote(&Vote::new(term, group_id)).await?;
                print_line(&format!("vote {group_id} {term}"));
                let started = Instant::now();
                while started.elapsed() < RUN_TIME_MAX {
                    let entry = Entry {
                        log_id: LogId::new(CommittedLeaderId::new(term, group_id), index),
                        payload: EntryPayload::Normal(payload(group_id, index, payload_bytes)),
                    };
                    group.blocking_append([entry]).await?;
                    print_line(&format!("ack {group_id} {index}"));
                    index += 1;
                }
                Ok::<(), std::io::Error>(())
            }));
        }
        print_line("ready");
        for task in tasks {
            task.await??;
        }
        Ok(())
    })
}
