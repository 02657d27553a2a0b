//! Our AMQP 1.0 codec (`broker::codec`) against serde_amqp 0.18 with the
//! fe2o3-amqp-types 0.18 types (the stack fe2o3-amqp 0.18 is built on), on
//! the same frames: what each does per transfer and per disposition, for
//! the `codec` bin to time and count allocations of, and the check that
//! both decoders read the same values (`agree.rs`), which the bin and the
//! tests run before trusting any figure.

pub mod agree;
pub mod canonical;
pub mod cases;
pub mod fixture;
pub mod ours;
pub mod theirs;
