mod pending_read;
mod pending_read_deadline_key;
mod pending_read_deadline_notifier;
mod pending_read_key;
mod pending_read_queue;

pub(crate) use pending_read::PendingRead;
pub(crate) use pending_read_deadline_notifier::PendingReadDeadlineNotifier;
pub(crate) use pending_read_queue::PendingReadQueue;

#[cfg(test)]
mod pending_read_queue_test;
