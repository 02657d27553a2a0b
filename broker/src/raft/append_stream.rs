//! The leader's side of a pipelined AppendEntries stream to one follower
//! (openraft 0.10's `RaftNetworkV2::stream_append`), and its wire format.
//!
//! openraft's default sends one AppendEntries, waits for the answer, then
//! sends the next. Here the first request of a stream goes as a plain
//! append-entries call (heartbeats are streams of one request, so they
//! never open a pipeline on the follower) and is awaited; every later one
//! is sent at once as an [`RpcKind::AppendStream`] call tagged with the
//! stream's id and its sequence number, up to `depth` unanswered, and the
//! answers are yielded in request order. The transport hands the calls to
//! the follower's handler in the order they were made; the follower
//! (`append_feed.rs`) feeds one stream's requests to its `Raft` in that
//! order and refuses a sequence gap. Any failed call, and any answer but a
//! full success, ends the stream: openraft then starts a new one.
//!
//! Payload of an `AppendStream` call: the postcard [`StreamHeader`], then
//! the postcard `AppendEntriesRequest`. Answer: postcard
//! `Result<StreamAppendResult, String>` (the text: why the follower's feed
//! failed).

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::stream::FuturesOrdered;
use futures_util::{Stream, StreamExt};
use openraft::alias::LogIdOf;
use openraft::base::BoxStream;
use openraft::entry::RaftEntry;
use openraft::error::{NetworkError, RPCError};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, StreamAppendResult};
use openraft::{OptionalSend, RaftTypeConfig};
use serde::{Deserialize, Serialize};

use super::network::GroupConnection;
use super::RpcKind;
use crate::net::{Envelope, NodeId};

/// Where a pipelined request sits in its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamHeader {
    /// The stream, unique per leader process (a new stream replaces the
    /// follower's previous one of the group).
    pub stream: u64,
    /// 0 for the first pipelined request of the stream, then +1 each.
    pub seq: u64,
}

/// The follower's answer to one pipelined request.
pub type StreamAnswer<C> = Result<StreamAppendResult<C>, String>;

/// The payload of one pipelined request.
pub fn encode_request<C: RaftTypeConfig>(
    header: StreamHeader,
    request: &AppendEntriesRequest<C>,
) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_allocvec(&(header, request))
}

/// Splits a pipelined request's payload into its header and the bytes of
/// the request (decoded later, off the transport's reader).
pub fn split_request(payload: &Bytes) -> Result<(StreamHeader, Bytes), postcard::Error> {
    let (header, rest) = postcard::take_from_bytes::<StreamHeader>(payload)?;
    let offset = payload.len() - rest.len();
    Ok((header, payload.slice(offset..)))
}

/// Stream ids start from the clock so a restarted leader does not reuse
/// the ids its previous run sent.
fn next_stream_id() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seed = SEED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1 << 40)
    });
    seed.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
}

type Answer<C> = Result<StreamAppendResult<C>, RPCError<C>>;

/// One pipelined call: its answer, and the last log id it carried.
type InFlight<'s, C> = std::pin::Pin<
    Box<dyn std::future::Future<Output = (Answer<C>, Option<LogIdOf<C>>)> + Send + 's>,
>;

/// The state of one stream.
struct Pipe<'s, C: RaftTypeConfig, S, SD> {
    conn: &'s GroupConnection<SD>,
    input: S,
    depth: usize,
    /// The first request went (unpipelined).
    started: bool,
    input_done: bool,
    /// An answer ended the stream.
    done: bool,
    stream: u64,
    next_seq: u64,
    inflight: FuturesOrdered<InFlight<'s, C>>,
}

/// The last log id a request carries (its prev when it carries none).
fn last_log_id<C: RaftTypeConfig>(request: &AppendEntriesRequest<C>) -> Option<LogIdOf<C>> {
    request
        .entries
        .last()
        .map(|e| e.log_id())
        .or_else(|| request.prev_log_id.clone())
}

/// Whether `answer` lets the stream go on: a full success only.
fn goes_on<C: RaftTypeConfig>(answer: &Answer<C>, last: &Option<LogIdOf<C>>) -> bool {
    matches!(answer, Ok(Ok(matching)) if matching == last)
}

/// openraft's stream of answers for `input`, pipelined up to `depth`.
pub(super) fn pipelined<'s, C, S, SD>(
    conn: &'s GroupConnection<SD>,
    input: S,
    depth: usize,
) -> BoxStream<'s, Answer<C>>
where
    C: RaftTypeConfig<NodeId = NodeId>,
    S: Stream<Item = AppendEntriesRequest<C>> + OptionalSend + Unpin + 'static,
    SD: 's,
{
    let pipe = Pipe {
        conn,
        input,
        depth: depth.max(1),
        started: false,
        input_done: false,
        done: false,
        stream: next_stream_id(),
        next_seq: 0,
        inflight: FuturesOrdered::new(),
    };
    Box::pin(futures_util::stream::unfold(pipe, Pipe::next_answer))
}

impl<'s, C, S, SD> Pipe<'s, C, S, SD>
where
    C: RaftTypeConfig<NodeId = NodeId>,
    S: Stream<Item = AppendEntriesRequest<C>> + OptionalSend + Unpin + 'static,
    SD: 's,
{
    /// A plain function returning an `async move` block: an `async fn`
    /// would keep `self` twice in the state each stream holds.
    #[allow(clippy::manual_async_fn)] // on purpose, see above
    fn next_answer(
        mut self,
    ) -> impl std::future::Future<Output = Option<(Answer<C>, Self)>> + Send + 's
    where
        Self: Send + 's,
    {
        async move {
            if self.done {
                return None;
            }
            if !self.started {
                self.started = true;
                let request = self.input.next().await?;
                let prev = request.prev_log_id.clone();
                let last = last_log_id(&request);
                // Boxed with its request, one allocation a stream: inline, they
                // made the state a leader keeps per follower while its stream
                // waits for entries ~500 bytes instead of ~290.
                let conn = self.conn;
                let answer = Box::pin(async move {
                    conn.raft_call::<C, _, AppendEntriesResponse<C>>(
                        RpcKind::AppendEntries,
                        &request,
                    )
                    .await
                })
                .await
                .map(|response| response.into_stream_result(prev, last.clone()));
                self.done = !goes_on(&answer, &last);
                return Some((answer, self));
            }
            loop {
                let can_send = !self.input_done && self.inflight.len() < self.depth;
                if !can_send && self.inflight.is_empty() {
                    return None;
                }
                tokio::select! {
                    biased;
                    Some((answer, last)) = self.inflight.next(), if !self.inflight.is_empty() => {
                        self.done = !goes_on(&answer, &last);
                        if self.done {
                            tracing::debug!(target = self.conn.target, group = self.conn.group, stream = self.stream, ?answer, "append stream ends");
                        }
                        return Some((answer, self));
                    }
                    request = self.input.next(), if can_send => match request {
                        Some(request) => self.send(request),
                        None => self.input_done = true,
                    },
                }
            }
        }
    }

    /// Makes the call now (so calls leave in request order) and queues the
    /// wait for its answer.
    fn send(&mut self, request: AppendEntriesRequest<C>) {
        let last = last_log_id(&request);
        let header = StreamHeader {
            stream: self.stream,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let conn = self.conn;
        let call = encode_request(header, &request)
            .map_err(|e| e.to_string())
            .map(|payload| {
                conn.transport.call(
                    conn.node_id,
                    conn.target,
                    Envelope {
                        channel: conn.group,
                        kind: RpcKind::AppendStream.code(),
                        meta: Bytes::copy_from_slice(conn.queue.as_bytes()),
                        payload: Bytes::from(payload),
                    },
                )
            });
        let target = conn.target;
        self.inflight.push_back(Box::pin(async move {
            let answer = match call {
                Err(e) => Err(RPCError::Network(NetworkError::from_string(e))),
                Ok(call) => match call.await {
                    Err(e) => Err(super::network::transport_error(e)),
                    Ok(reply) => match postcard::from_bytes::<StreamAnswer<C>>(&reply) {
                        Err(e) => Err(RPCError::Network(NetworkError::from_string(format!(
                            "node {target}: bad answer: {e}"
                        )))),
                        Ok(Err(message)) => Err(RPCError::Network(NetworkError::from_string(
                            format!("node {target}: {message}"),
                        ))),
                        Ok(Ok(result)) => Ok(result),
                    },
                },
            };
            (answer, last)
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_are_distinct_and_not_small() {
        let a = next_stream_id();
        let b = next_stream_id();
        assert_ne!(a, b);
        assert!(a > 1_000_000 && b > 1_000_000, "{a} {b}");
    }

    #[test]
    fn a_request_splits_into_its_header_and_body() {
        let header = StreamHeader {
            stream: 7,
            seq: 300,
        };
        let mut payload = postcard::to_allocvec(&header).expect("encodes");
        payload.extend_from_slice(b"body");
        let (h, body) = split_request(&Bytes::from(payload)).expect("splits");
        assert_eq!((h, &body[..]), (header, &b"body"[..]));
    }
}
