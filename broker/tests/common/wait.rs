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
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("condition not reached within {limit:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
