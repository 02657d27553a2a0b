//! Benchmark helpers shared by the bins: the fe2o3-amqp client set up for
//! its fastest correct path ([`amqp`]), the bench's self-checking message
//! bodies ([`payload`]), the broker under test ([`target`]) and the result
//! plumbing ([`report`]).

#![forbid(unsafe_code)]

pub mod amqp;
pub mod payload;
pub mod raw;
pub mod report;
pub mod target;
