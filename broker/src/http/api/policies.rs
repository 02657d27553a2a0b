//! `GET /api/policies` and `PUT /api/policies` (both need the
//! administrator tag): this node's queue policies, and replacing them
//! whole. The body of a PUT is a JSON array of policies with the fields of
//! a `[[policies]]` table of the config file, in order (the first that
//! matches a queue's address applies). A set that does not check out is
//! refused with 400 and changes nothing; the new set is put on every open
//! queue of this node. The set is this node's only (as the config file
//! is): a quorum queue follows its leader's.

use bytes::Bytes;
use hyper::StatusCode;

use super::access::Caller;
use super::reply;
use crate::config::PolicyConfig;
use crate::http::{Answer, Sources};

/// `GET /api/policies`.
pub(super) fn list(sources: &Sources, caller: &Caller) -> Answer {
    if let Err(refused) = caller.require_administrator() {
        return refused.answer();
    }
    reply::json(StatusCode::OK, &sources.node.policies())
}

/// `PUT /api/policies`: 200 with the set now in force.
pub(super) fn replace(sources: &Sources, caller: &Caller, body: &Bytes) -> Answer {
    if let Err(refused) = caller.require_administrator() {
        return refused.answer();
    }
    let policies: Vec<PolicyConfig> = match serde_json::from_slice(body.trim_ascii()) {
        Ok(policies) => policies,
        Err(e) => {
            return reply::error(
                StatusCode::BAD_REQUEST,
                format!("body: {e} (expected a JSON array of policies)"),
            )
        }
    };
    match sources.node.set_policies(&policies) {
        Ok(n) => {
            tracing::info!(
                policies = n,
                user = caller.user.as_deref(),
                "http: queue policies replaced"
            );
            reply::json(StatusCode::OK, &sources.node.policies())
        }
        Err(error) => reply::error(StatusCode::BAD_REQUEST, error.to_string()),
    }
}
