//! openraft log, vote and metadata storage on redb, one database for all
//! Raft groups of a node, with group commit (one fsync for many groups).
//!
//! Not built yet: this crate arrives with the quorum-queue issue. It is in
//! the workspace now so the layout matches the product brief.
