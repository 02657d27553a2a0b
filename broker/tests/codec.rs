//! The broker's AMQP codec: round trips, property tests, the spec's own
//! bytes, malicious input, and the checked-in fuzz corpus replayed.
//!
//! One test binary for these files (each a module, `cargo test -p
//! ramqpd-broker --test codec <module>::` runs one): a binary per file
//! linked the whole broker 60 times over, 6 GB of a CI disk.

mod common;

mod codec_malicious;
mod codec_proptest;
mod codec_roundtrip;
mod codec_spec_bytes;
mod fuzz_corpus_replay;
