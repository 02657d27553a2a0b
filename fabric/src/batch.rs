//! The batching writer shared by both directions of a stream: turns a bounded
//! queue of frames into a stream of `Batch` messages, each holding everything
//! queued at the moment the transport asked for more (up to a soft size cap and the hard size limit).

use std::sync::Arc;

use futures_util::Stream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::proto::{Batch, Frame};
use crate::stats::Counters;

/// A batch stops taking more frames once it holds this many bytes, so a
/// backlog is written in pieces the transport can start sending early
/// instead of one huge message. (A single bigger frame still goes alone.)
pub(crate) const SOFT_BATCH_BYTES: usize = 1024 * 1024;

/// Writer state carried between polls.
struct Writer {
    rx: mpsc::Receiver<Frame>,
    /// A frame that did not fit in the previous batch.
    held: Option<Frame>,
    max_batch_bytes: usize,
    counters: Arc<Counters>,
    cancel: CancellationToken,
}

/// The stream of batches drained from `rx`. It ends when `cancel` fires or
/// every sender is gone; the receiver (and any frames still queued) is dropped
/// with it. A batch never exceeds `max_batch_bytes` unless a single frame does
/// (which the senders refuse before queueing).
pub(crate) fn batches(
    rx: mpsc::Receiver<Frame>,
    max_batch_bytes: usize,
    counters: Arc<Counters>,
    cancel: CancellationToken,
) -> impl Stream<Item = Batch> + Send + 'static {
    let writer = Writer {
        rx,
        held: None,
        max_batch_bytes,
        counters,
        cancel,
    };
    futures_util::stream::unfold(writer, |mut w| async move {
        let first = match w.held.take() {
            Some(frame) => frame,
            None => tokio::select! {
                biased;
                () = w.cancel.cancelled() => return None,
                frame = w.rx.recv() => frame?,
            },
        };
        if w.cancel.is_cancelled() {
            return None;
        }
        let mut size = first.batch_size();
        let mut frames = vec![first];
        while size < SOFT_BATCH_BYTES {
            let Ok(frame) = w.rx.try_recv() else { break };
            let more = frame.batch_size();
            if size + more > w.max_batch_bytes {
                w.held = Some(frame);
                break;
            }
            size += more;
            frames.push(frame);
        }
        Counters::add(&w.counters.batches_sent, 1);
        Counters::add(&w.counters.frames_sent, frames.len() as u64);
        let bytes: usize = frames.iter().map(|f| f.body_size()).sum();
        Counters::add(&w.counters.bytes_sent, bytes as u64);
        Some((Batch { frames }, w))
    })
}
