//! [`DeadLetterPublisher`]: the queues' [`DeadLetterRouter`], over the
//! node's registry. A dead-lettered message goes the way a client's
//! publish goes: the address is prepared (created under the auto-create
//! rules, its leader or owner found, bounded by the leader wait), looked
//! up, and published to the queue the engine would get, which forwards it
//! when another node serves the queue. No permission is checked: the
//! policy that names the address was the operator's decision.
//!
//! One task publishes them in the order they were handed in; a queue's
//! lock is never held across it (the dead-letter queue may be the queue
//! itself). It holds the registry weakly: the registry holds the queues,
//! which hold this.

use std::sync::{Arc, Weak};

use tokio::sync::mpsc;

use super::registry::Registry;
use crate::queue::dead_letter::DeadLetterRouter;
use crate::queue::{Message, Outcome, PublishConfirm, PublishStatus, QueueAddress, QueueDirectory};

struct Job {
    address: QueueAddress,
    message: Message,
    confirm: Option<PublishConfirm>,
}

/// Publishes dead-lettered messages through the registry.
#[derive(Debug)]
pub(crate) struct DeadLetterPublisher {
    jobs: mpsc::UnboundedSender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dead letter to {}", self.address)
    }
}

impl DeadLetterPublisher {
    /// The publisher, and what [`DeadLetterPublisher::serve`] needs once
    /// the registry exists (the registry's queues need the publisher).
    pub(crate) fn new() -> (Arc<DeadLetterPublisher>, PublisherTask) {
        let (jobs, rx) = mpsc::unbounded_channel();
        (Arc::new(DeadLetterPublisher { jobs }), PublisherTask(rx))
    }
}

/// The receiving end, to be served once the registry is made.
pub(crate) struct PublisherTask(mpsc::UnboundedReceiver<Job>);

impl PublisherTask {
    /// Publish every job as it comes, until the node stops.
    pub(crate) fn serve(self, registry: Weak<Registry>) {
        let mut rx = self.0;
        tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let Some(registry) = registry.upgrade() else {
                    release(job.confirm);
                    continue;
                };
                publish(&registry, job).await;
            }
        });
    }
}

fn release(confirm: Option<PublishConfirm>) {
    if let Some(confirm) = confirm {
        confirm.report(Outcome::Released);
    }
}

async fn publish(registry: &Registry, job: Job) {
    let Job {
        address,
        message,
        confirm,
    } = job;
    let queue = match registry.prepare(&address).await {
        Ok(()) => registry.lookup(&address),
        Err(error) => Err(error),
    };
    let queue = match queue {
        Ok(queue) => queue,
        Err(error) => {
            tracing::warn!(%address, %error, "dead-lettering: the dead-letter queue is not available");
            release(confirm);
            return;
        }
    };
    match queue.publish(message, confirm.clone()) {
        Ok(PublishStatus::Accepted) => {
            if let Some(confirm) = confirm {
                confirm.report(Outcome::Accepted);
            }
        }
        // Reported on the confirm when the queue knows.
        Ok(PublishStatus::Pending) => {}
        Err(error) => {
            tracing::warn!(%address, %error, "dead-lettering: publish refused");
            release(confirm);
        }
    }
}

impl DeadLetterRouter for DeadLetterPublisher {
    fn publish(&self, address: QueueAddress, message: Message, confirm: Option<PublishConfirm>) {
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(Job {
            address,
            message,
            confirm,
        }) {
            release(job.confirm);
        }
    }
}
