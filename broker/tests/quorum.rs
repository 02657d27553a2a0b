//! Quorum queues on a node or an embedded cluster: publish, consume, drain,
//! ordering, paging, compaction, pipelining, disk alarms, faults of one
//! group, reopening.
//!
//! One test binary for these files (each a module, `cargo test -p
//! ramqpd-broker --test quorum <module>::` runs one): a binary per file
//! linked the whole broker 60 times over, 6 GB of a CI disk.

mod common;

mod paging_segments;
mod quorum_compaction;
mod quorum_consumer_order;
mod quorum_disk_alarm;
mod quorum_drain;
mod quorum_first_acquirer;
mod quorum_group_fault;
mod quorum_lost_writes;
mod quorum_paging;
mod quorum_pipeline;
mod quorum_queues;
mod quorum_reopen;
mod quorum_window_credit;
