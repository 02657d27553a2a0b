//! Bounded waits: a hung broker fails a test, never hangs it.

use std::future::Future;
use std::time::Duration;

/// Default bound for one protocol step.
pub const STEP: Duration = Duration::from_secs(10);

/// Await `fut`, failing the test if it takes longer than `limit`.
pub async fn within<F: Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(limit, fut).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {limit:?}: {what}"),
    }
}

/// Await `fut` with the default step bound.
pub async fn step<F: Future>(what: &str, fut: F) -> F::Output {
    within(STEP, what, fut).await
}

/// Poll `check` every 20 ms until it holds; fail after `limit`.
pub async fn eventually(limit: Duration, what: &str, check: impl FnMut() -> bool) {
    eventually_or(limit, check, || what.to_string()).await
}

/// [`eventually`], failing with what `explain` says then (what the test
/// saw while it waited).
pub async fn eventually_or(
    limit: Duration,
    mut check: impl FnMut() -> bool,
    explain: impl FnOnce() -> String,
) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("condition not reached within {limit:?}: {}", explain());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Assert that `check` holds throughout `quiet` (polled every 20 ms), then
/// once more at the end.
///
/// Why a window and not a condition: this is for negative checks ("no
/// further send completes", "nothing is delivered without credit"). Nothing
/// observable happens when the broker correctly does nothing, so there is no
/// event to await; the window is how long the test gives a wrong broker to
/// show itself. Keep it short: it is pure waiting on every passing run.
pub async fn holds_for(quiet: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + quiet;
    loop {
        if !check() {
            panic!("stopped holding within {quiet:?}: {what}");
        }
        if tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A publisher counting its accepted messages in `accepted` (of `total`)
/// stops once a resource alarm is up: no accept for a whole second (one
/// publish still in credit can take longer than a poll on a loaded
/// machine), at most `credit` accepts after the alarm was seen, fewer than
/// `total` in all, and then none for 2 s. Returns the count it stopped at.
pub async fn publishing_is_held_back(
    accepted: &std::sync::atomic::AtomicUsize,
    total: usize,
    credit: usize,
    why: &str,
) -> usize {
    use std::sync::atomic::Ordering;
    let at_alarm = accepted.load(Ordering::SeqCst);
    let mut held = usize::MAX;
    let mut since = std::time::Instant::now();
    eventually(Duration::from_secs(20), "publishing stops", || {
        let now = accepted.load(Ordering::SeqCst);
        if now != held {
            held = now;
            since = std::time::Instant::now();
        }
        since.elapsed() >= Duration::from_secs(1)
    })
    .await;
    assert!(held < total, "held back: {held} of {total}");
    assert!(
        held <= at_alarm + credit,
        "no credit past the alarm: {at_alarm} -> {held}"
    );
    holds_for(
        Duration::from_secs(2),
        &format!("no publish completes while {why}"),
        || accepted.load(Ordering::SeqCst) == held,
    )
    .await;
    held
}
