//! Opt-in logs for diagnosing a test: `RAMQP_TEST_LOG=broker=debug cargo
//! test ...` prints the broker's tracing events (with their thread and
//! time) into the captured output of the test that calls [`trace_from_env`].
//! Without the variable nothing is installed and nothing is printed.

/// Installs a tracing subscriber filtered by `RAMQP_TEST_LOG`, once per
/// test binary; later calls (other tests in the same binary) do nothing.
pub fn trace_from_env() {
    let Ok(filter) = std::env::var("RAMQP_TEST_LOG") else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_test_writer()
        .with_thread_names(true)
        .try_init();
}
