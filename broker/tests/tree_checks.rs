//! Checks over the source tree itself: the layer order and file rules, the
//! sleeps baseline, and the README's embedding example.
//!
//! One test binary for these files (each a module, `cargo test -p
//! ramqpd-broker --test tree_checks <module>::` runs one): a binary per file
//! linked the whole broker 60 times over, 6 GB of a CI disk.

mod common;

mod architecture;
mod readme_embedding;
mod tidy_sleeps;
