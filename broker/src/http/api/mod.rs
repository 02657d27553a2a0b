//! The JSON management API under `/api/`: nodes, queues (list, show,
//! declare, delete, purge, move leadership), AMQP connections (list,
//! close) and the node's queue policies (show, replace), for the users of the users file with their permissions.
//!
//! - `access.rs`: the listener rule (loopback or TLS), HTTP basic auth
//!   against the stored SCRAM credentials, the login throttle, and what
//!   a caller may do;
//! - `route.rs`: method and path to a closed [`route::Route`];
//! - `dispatch.rs`: one request, from its caller to its answer;
//! - `cluster.rs`, `queues.rs`, `connections.rs`, `policies.rs`: the answers;
//! - `reply.rs`: JSON bodies and `{"error": ...}` refusals.
//!
//! It does nothing itself: admin's service, the queue directory and the
//! engine's table of connections do, as for `ramqp-ctl` and AMQP clients.

mod access;
mod cluster;
mod connections;
mod dispatch;
mod policies;
mod queues;
mod reply;
mod route;

pub(super) use access::HttpPeer;
pub(super) use dispatch::answer;
