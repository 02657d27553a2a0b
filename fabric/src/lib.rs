//! The inter-node fabric (tonic/prost): Raft RPCs of every group multiplexed
//! over one channel per peer, and forwarding of client traffic to queue
//! leaders.
//!
//! Not built yet: this crate arrives with the cluster issue. It is in the
//! workspace now so the layout matches the product brief.
