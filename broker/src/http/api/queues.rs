//! The queue endpoints: list and show (what admin's status knows of each
//! queue, plus this node's own figures of the queues it holds), declare
//! (as an attach with auto-create would: the queue directory's prepare,
//! then lookup), delete and purge (admin's, passed on to the node that
//! can do it), and moving a quorum queue's leadership.
//!
//! Permissions as RabbitMQ's: a caller sees the queues it may read or
//! configure; declare, delete and purge need configure on the address;
//! moving leadership needs the administrator tag.

use std::collections::HashMap;

use bytes::Bytes;
use hyper::StatusCode;
use serde::{Deserialize, Serialize};

use super::access::Caller;
use super::reply;
use crate::admin::{AdminRequest, AdminResponse, QueueControlError, QueueStatus};
use crate::auth::Access;
use crate::http::{Answer, QueueSettings, Sources};
use crate::queue::{LookupError, QueueAddress, QueueKind, QueueStats, DYNAMIC_PREFIX};
use crate::quorum::QuorumError;

/// A queue as the API shows it. The figures of this node's own replica
/// or queue are `null` where this node holds none.
#[derive(Debug, Serialize)]
struct QueueView {
    address: String,
    /// `quorum` or `transient`.
    kind: &'static str,
    /// The node serving it (a quorum queue's leader), if known.
    leader: Option<u64>,
    /// A quorum queue's replicas (empty for a transient queue).
    members: Vec<u64>,
    ready: usize,
    unacknowledged: usize,
    consumers: usize,
    bytes: Option<u64>,
    paged_bytes: Option<u64>,
    published_total: Option<u64>,
    delivered_total: Option<u64>,
    acknowledged_total: Option<u64>,
    /// The last Raft log index this node applied (quorum queues).
    applied_index: Option<u64>,
    /// The Raft term this node is in for the queue.
    term: Option<u64>,
    /// The limits the queue runs with.
    settings: Settings,
}

/// A queue's settings, by kind.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Settings {
    Transient {
        max_messages: usize,
        max_bytes: u64,
    },
    Quorum {
        replicas: usize,
        max_inflight_publishes: usize,
        resident_budget_bytes: u64,
        publish_timeout_ms: u64,
    },
}

fn view(status: QueueStatus, own: Option<&QueueStats>, limits: &QueueSettings) -> QueueView {
    let quorum = status.address.starts_with("/quorum/");
    let kind = if quorum { "quorum" } else { "transient" };
    let settings = if quorum {
        Settings::Quorum {
            replicas: status.members.len(),
            max_inflight_publishes: limits.quorum_max_inflight_publishes,
            resident_budget_bytes: limits.quorum_queue_resident_budget_bytes,
            publish_timeout_ms: limits.quorum_publish_timeout_ms,
        }
    } else {
        Settings::Transient {
            max_messages: limits.transient_max_messages,
            max_bytes: limits.transient_max_bytes,
        }
    };
    QueueView {
        settings,
        kind,
        leader: status.leader,
        members: status.members,
        ready: status.ready,
        unacknowledged: status.unsettled,
        consumers: status.consumers,
        bytes: own.map(|s| s.bytes),
        paged_bytes: own.map(|s| s.paged_bytes),
        published_total: own.map(|s| s.published_total),
        delivered_total: own.map(|s| s.delivered_total),
        acknowledged_total: own.map(|s| s.acknowledged_total),
        applied_index: status.applied_index,
        term: status.term,
        address: status.address,
    }
}

/// The queues `caller` may see, sorted by address (gathered on a
/// blocking thread: each queue's lock is taken in turn, many queues take
/// milliseconds).
async fn visible(sources: &std::sync::Arc<Sources>, caller: &Caller) -> Vec<QueueView> {
    let gathering = sources.clone();
    let gathered = tokio::task::spawn_blocking(move || {
        let own: HashMap<String, QueueStats> = gathering
            .queues
            .stats()
            .into_iter()
            .map(|s| (s.address.clone(), s))
            .collect();
        (gathering.admin.queues(), own)
    })
    .await;
    let Ok((statuses, own)) = gathered else {
        return Vec::new();
    };
    statuses
        .into_iter()
        .filter(|q| caller.may_see(&q.address))
        .map(|q| {
            let stats = own.get(&q.address);
            view(q, stats, &sources.queue_settings)
        })
        .collect()
}

/// `GET /api/queues`.
pub(super) async fn list(sources: &std::sync::Arc<Sources>, caller: &Caller) -> Answer {
    reply::json(StatusCode::OK, &visible(sources, caller).await)
}

/// `GET /api/queues/{kind}/{name}`.
pub(super) async fn show(
    sources: &std::sync::Arc<Sources>,
    caller: &Caller,
    address: &QueueAddress,
) -> Answer {
    let address = address.to_string();
    if let Err(refused) = caller.require_sight(&address) {
        return refused.answer();
    }
    match visible(sources, caller)
        .await
        .into_iter()
        .find(|q| q.address == address)
    {
        Some(queue) => reply::json(StatusCode::OK, &queue),
        None => reply::error(
            StatusCode::NOT_FOUND,
            format!("queue {address} does not exist"),
        ),
    }
}

#[derive(Debug, Serialize)]
struct Declared {
    address: String,
    created: bool,
}

/// `PUT /api/queues/{kind}/{name}`: 201 when it was made, 204 when it
/// existed.
pub(super) async fn declare(sources: &Sources, caller: &Caller, address: &QueueAddress) -> Answer {
    let shown = address.to_string();
    if let Err(refused) = caller.require(Access::Configure, &shown) {
        return refused.answer();
    }
    if address.name().starts_with(DYNAMIC_PREFIX) {
        return reply::error(
            StatusCode::BAD_REQUEST,
            format!("names starting with {DYNAMIC_PREFIX} are kept for dynamic queues"),
        );
    }
    if let Some(owner) = sources.queues.held_elsewhere(address) {
        return reply::error(
            StatusCode::CONFLICT,
            format!("{shown} is held by node {owner}: declare it through that node's API"),
        );
    }
    let existed = sources.queues.exists(address);
    let prepared = match sources.queues.prepare(address).await {
        Ok(()) => sources.queues.lookup(address).map(drop),
        Err(error) => Err(error),
    };
    match prepared {
        Ok(()) if existed => reply::empty(StatusCode::NO_CONTENT),
        Ok(()) => reply::json(
            StatusCode::CREATED,
            &Declared {
                address: shown,
                created: true,
            },
        ),
        Err(LookupError::NotFound(_)) => reply::error(
            StatusCode::CONFLICT,
            format!(
                "{shown} does not exist and this node creates no queue ([queues] auto_create \
                 is off)"
            ),
        ),
        Err(error @ LookupError::QuorumUnavailable(..)) => {
            reply::error(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
        }
    }
}

#[derive(Debug, Serialize)]
struct Changed {
    address: String,
    /// What was done, in the operator's words (as `ramqp-ctl` prints).
    summary: String,
    /// For a purge: the messages dropped (`null` when the node that did
    /// it worded its summary otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    purged: Option<Option<u64>>,
}

fn control_failed(error: QueueControlError) -> Answer {
    let status = match &error {
        QueueControlError::BadAddress(_) => StatusCode::BAD_REQUEST,
        QueueControlError::NotFound(_) => StatusCode::NOT_FOUND,
        QueueControlError::Failed(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    reply::error(status, error.to_string())
}

/// `DELETE /api/queues/{kind}/{name}`: its links are detached with
/// amqp:resource-deleted.
pub(super) async fn delete(sources: &Sources, caller: &Caller, address: &QueueAddress) -> Answer {
    let shown = address.to_string();
    if let Err(refused) = caller.require(Access::Configure, &shown) {
        return refused.answer();
    }
    match sources.admin.delete_queue(&shown).await {
        Ok(summary) => {
            tracing::info!(queue = %shown, user = caller.user.as_deref(), "http: queue deleted");
            reply::json(
                StatusCode::OK,
                &Changed {
                    address: shown,
                    summary,
                    purged: None,
                },
            )
        }
        Err(error) => control_failed(error),
    }
}

/// `POST /api/queues/{kind}/{name}/purge`.
pub(super) async fn purge(sources: &Sources, caller: &Caller, address: &QueueAddress) -> Answer {
    let shown = address.to_string();
    if let Err(refused) = caller.require(Access::Configure, &shown) {
        return refused.answer();
    }
    match sources.admin.purge_queue(&shown).await {
        Ok(summary) => {
            tracing::info!(queue = %shown, user = caller.user.as_deref(), "http: queue purged");
            let purged = Some(crate::admin::purged_messages(&summary));
            reply::json(
                StatusCode::OK,
                &Changed {
                    address: shown,
                    summary,
                    purged,
                },
            )
        }
        Err(error) => control_failed(error),
    }
}

/// The body of a move: the node that should lead (the group chooses
/// without one).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveTo {
    to: Option<u64>,
}

/// `POST /api/queues/quorum/{name}/move-leadership` with an optional
/// `{"to": N}` (administrator). Asked of another node when that one
/// leads the queue.
pub(super) async fn move_leadership(
    sources: &Sources,
    caller: &Caller,
    address: &QueueAddress,
    body: &Bytes,
) -> Answer {
    if let Err(refused) = caller.require_administrator() {
        return refused.answer();
    }
    if address.kind() != QueueKind::Quorum {
        return reply::error(
            StatusCode::BAD_REQUEST,
            format!("{address} is a transient queue: only quorum queues have a leader to move"),
        );
    }
    let body = body.trim_ascii();
    let to = match body.is_empty() {
        true => MoveTo::default(),
        false => match serde_json::from_slice::<MoveTo>(body) {
            Ok(to) => to,
            Err(e) => {
                return reply::error(
                    StatusCode::BAD_REQUEST,
                    format!("body: {e} (expected {{\"to\": <node id>}} or nothing)"),
                )
            }
        },
    };
    let shown = address.to_string();
    let done = match sources.admin.move_leadership(Some(&shown), to.to).await {
        Err(QuorumError::NotLeader(_, Some(leader))) if leader != sources.node_id => {
            let request = AdminRequest::MoveLeadership {
                queue: Some(shown.clone()),
                to: to.to,
            };
            match sources.admin.ask(leader, &request).await {
                AdminResponse::Done(summary) => Ok(summary),
                AdminResponse::Failed(error) => Err((StatusCode::CONFLICT, error)),
                AdminResponse::Status(_) => Err((
                    StatusCode::BAD_GATEWAY,
                    format!("node {leader}: a status instead of an outcome"),
                )),
            }
        }
        Err(error @ QuorumError::NoSuchQueue(_)) => Err((StatusCode::NOT_FOUND, error.to_string())),
        Err(error) => Err((StatusCode::CONFLICT, error.to_string())),
        Ok(summary) => Ok(summary),
    };
    match done {
        Ok(summary) => {
            tracing::info!(queue = %shown, user = caller.user.as_deref(), "http: leadership moved");
            reply::json(
                StatusCode::OK,
                &Changed {
                    address: shown,
                    summary,
                    purged: None,
                },
            )
        }
        Err((status, error)) => reply::error(status, error),
    }
}
