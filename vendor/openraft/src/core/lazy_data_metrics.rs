//! ramqp: the data-metrics channel, made by the first `Raft::data_metrics()` call.
//!
//! Nothing in ramqp reads a group's data metrics, and the channel holding them (its shared
//! state, the metrics and a leader's replication and heartbeat maps) cost every group ~0.5
//! KiB. The core does not keep a copy to start a late channel from, so the first subscriber
//! gets a channel holding the defaults and asks the core for a pass
//! (`ExternalCommand::FlushMetrics`), whose metrics flush fills it in and wakes it.

use std::sync::Mutex;

use crate::RaftTypeConfig;
use crate::async_runtime::watch::WatchSender;
use crate::metrics::RaftDataMetrics;
use crate::type_config::TypeConfigExt;
use crate::type_config::alias::WatchReceiverOf;
use crate::type_config::alias::WatchSenderOf;

/// The data-metrics channel once someone asked for it.
pub(crate) struct LazyDataMetrics<C>
where C: RaftTypeConfig
{
    tx: Mutex<Option<WatchSenderOf<C, RaftDataMetrics<C>>>>,
}

impl<C> LazyDataMetrics<C>
where C: RaftTypeConfig
{
    pub(crate) fn new() -> Self {
        Self { tx: Mutex::new(None) }
    }

    /// A receiver, and whether the channel was made by this call: it then holds the defaults
    /// until the core's next metrics flush.
    pub(crate) fn subscribe(&self) -> (WatchReceiverOf<C, RaftDataMetrics<C>>, bool) {
        let mut tx = self.tx.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match tx.as_ref() {
            Some(tx) => (tx.subscribe(), false),
            None => {
                let (new_tx, rx) = C::watch_channel(RaftDataMetrics::default());
                *tx = Some(new_tx);
                (rx, true)
            }
        }
    }

    /// The core's data metrics now: the receivers are woken if they changed. Nothing to do
    /// while nobody asked for them.
    pub(crate) fn send(&self, data: &RaftDataMetrics<C>) {
        let tx = self.tx.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(tx) = tx.as_ref() {
            tx.send_if_modified(|metrics| {
                if data.ne(metrics) {
                    *metrics = data.clone();
                    return true;
                }
                false
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::async_runtime::watch::WatchReceiver;
    use crate::engine::testing::UTConfig;
    use crate::engine::testing::log_id;

    /// No channel until the first subscriber, which gets the defaults and is woken by the
    /// next flush; a later subscriber shares the channel and reads the current value.
    #[test]
    fn the_first_subscriber_makes_the_channel_and_the_next_flush_fills_it() {
        UTConfig::<()>::run(async {
            let lazy = LazyDataMetrics::<UTConfig>::new();
            let data = RaftDataMetrics::<UTConfig> {
                last_log: Some(log_id(1, 0, 5)),
                ..Default::default()
            };
            lazy.send(&data);
            assert!(lazy.tx.lock().unwrap().is_none(), "nobody asked: no channel");

            let (mut first, made) = lazy.subscribe();
            assert!(made);
            assert_eq!(first.borrow_watched().last_log, None, "the defaults until a flush");
            lazy.send(&data);
            first.changed().await.unwrap();
            assert_eq!(first.borrow_and_update().last_log, Some(log_id(1, 0, 5)));

            let (second, made) = lazy.subscribe();
            assert!(!made);
            assert_eq!(second.borrow_watched().last_log, Some(log_id(1, 0, 5)));
        });
    }
}
