//! The serving side of a forwarded transaction part (`ToServer::Commit`):
//! the messages are split out of the payload and checked, the settlements'
//! link ids become this node's consumer ids, and the local queue applies
//! the part at once, reporting to the origin as for a publish.
//!
//! It knows nothing of the coordinator or of other queues of the
//! transaction.

use bytes::Bytes;

use super::server::Server;
use crate::codec::MessageView;
use crate::net::NodeId;
use crate::queue::{
    Message, MessageId, Outcome, PublishConfirm, PublishStatus, QueueEventKind, Sink, TxnPart,
};

impl Server {
    /// Apply one transaction part from `origin` to the queue of its
    /// publishing link `link`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_commit(
        &self,
        origin: NodeId,
        sink: &Sink,
        link: u64,
        token: u64,
        lens: &[u32],
        settles: Vec<(u64, MessageId, Outcome)>,
        payload: Bytes,
    ) {
        let report = |outcome: Outcome| {
            sink.send(link, QueueEventKind::Published { token, outcome });
        };
        let Some((queue, _)) = self.link_queue(origin, link) else {
            report(Outcome::Released);
            return Self::closed(sink, link, format!("unknown link {link}"));
        };
        let Some(messages) = split(lens, payload) else {
            // A peer of this version never sends this: refuse the part.
            return report(Outcome::Rejected);
        };
        let settles = settles
            .into_iter()
            .filter_map(|(consumer_link, message, outcome)| {
                let (_, consumer) = self.link_queue(origin, consumer_link)?;
                Some((consumer?, message, outcome))
            })
            .collect();
        let confirm = PublishConfirm {
            sink: sink.clone(),
            tag: link,
            token,
        };
        match queue.commit(TxnPart { messages, settles }, confirm) {
            Ok(PublishStatus::Accepted) => report(Outcome::Accepted),
            Ok(PublishStatus::Pending) => {}
            Err(error) => {
                tracing::debug!(%error, "forwarded transaction part refused");
                report(Outcome::Released);
            }
        }
    }
}

/// The messages of a commit's payload, each scanned; `None` if the lengths
/// do not add up or a message is malformed.
fn split(lens: &[u32], mut payload: Bytes) -> Option<Vec<Message>> {
    let mut messages = Vec::with_capacity(lens.len());
    for &len in lens {
        let len = len as usize;
        if len > payload.len() {
            return None;
        }
        let bytes = payload.split_to(len);
        let view = MessageView::scan(&bytes).ok()?;
        messages.push(Message {
            header: view.header,
            header_len: view.header_len as u32,
            bytes,
        });
    }
    payload.is_empty().then_some(messages)
}
