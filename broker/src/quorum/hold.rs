//! [`ProposalHold`]: the switch a leadership hand-off uses to stop a
//! group's log from growing.
//!
//! Setting a flag is not enough: a proposer that looked at the flag just
//! before it was set is still on its way into openraft, and its entry lands
//! after the hand-off has decided the target caught up. The target then
//! campaigns with a shorter log than the old leader's and every voter
//! refuses it (seen: 12 s without a leader). So proposers hold a [`Pass`]
//! from the moment they find the switch open until their entry is handed
//! to openraft, and [`ProposalHold::hold`] returns only once no pass is
//! out.

use std::sync::Mutex;

use tokio::sync::Notify;

#[derive(Default)]
struct State {
    held: bool,
    /// Proposers between "the switch is open" and "submitted to Raft".
    submitting: usize,
    /// The queue is gone: nothing will be proposed any more.
    closed: bool,
}

/// Held or open; see the module documentation.
#[derive(Default)]
pub(crate) struct ProposalHold {
    state: Mutex<State>,
    changed: Notify,
}

/// A proposer's permission to submit one proposal; dropped once the
/// proposal is in openraft's hands.
pub(crate) struct Pass<'a> {
    hold: &'a ProposalHold,
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut state = self.hold.lock();
        state.submitting -= 1;
        if state.submitting == 0 {
            self.hold.changed.notify_waiters();
        }
    }
}

impl ProposalHold {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is two counters and flags, valid after any panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until proposing is allowed; `None` once the queue is closed
    /// (the caller answers its proposal `released`).
    pub(crate) async fn pass(&self) -> Option<Pass<'_>> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if state.closed {
                    return None;
                }
                if !state.held {
                    state.submitting += 1;
                    return Some(Pass { hold: self });
                }
            }
            notified.await;
        }
    }

    /// Stop proposals and wait until every proposal that got past the
    /// switch before has been submitted; the log grows no more after this
    /// returns (once openraft has taken what was submitted).
    pub(crate) async fn hold(&self) {
        self.lock().held = true;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.lock().submitting == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Let proposals go again.
    pub(crate) fn release(&self) {
        self.lock().held = false;
        self.changed.notify_waiters();
    }

    /// The queue is going: waiting proposers give up.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn hold_waits_for_a_pass_already_out() {
        let hold = Arc::new(ProposalHold::default());
        let pass = hold.pass().await.expect("open");
        let holder = {
            let hold = hold.clone();
            tokio::spawn(async move { hold.hold().await })
        };
        // The pass is still out, so the hold does not complete.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), async {
                while !holder.is_finished() {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .is_err(),
            "hold returned while a pass was out"
        );
        drop(pass);
        tokio::time::timeout(Duration::from_secs(5), holder)
            .await
            .expect("hold returns once the pass is back")
            .expect("no panic");
    }

    #[tokio::test]
    async fn held_proposers_wait_and_closed_ones_give_up() {
        let hold = Arc::new(ProposalHold::default());
        hold.hold().await;
        let waiter = {
            let hold = hold.clone();
            tokio::spawn(async move { hold.pass().await.is_some() })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a held proposer went ahead");
        hold.release();
        assert!(waiter.await.expect("no panic"), "released proposer passes");

        hold.hold().await;
        let waiter = {
            let hold = hold.clone();
            tokio::spawn(async move { hold.pass().await.is_some() })
        };
        tokio::task::yield_now().await;
        hold.close();
        assert!(!waiter.await.expect("no panic"), "closed: no pass");
    }
}
