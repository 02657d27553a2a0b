//! Benchmark helpers shared by the bins: the fe2o3-amqp client set up for
//! its fastest correct path ([`amqp`]), the bench's self-checking message
//! bodies ([`payload`]), the broker under test ([`target`]), the result
//! plumbing ([`report`]) and the codec comparison of the `codec` bin
//! ([`codec_compare`]).

#![forbid(unsafe_code)]

pub mod amqp;
pub mod codec_compare;
pub mod payload;
pub mod raw;
pub mod report;
pub mod target;
pub mod tls_client;
