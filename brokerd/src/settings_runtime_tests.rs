//! Tests of `settings.rs` for the `[runtime]` table: worker threads and
//! the scheduler from flags, environment and file (split from
//! `settings_tests.rs`, whose helpers they use).

use super::*;

#[test]
fn worker_threads_from_file_env_and_flag() {
    assert_eq!(parse_file("").unwrap().runtime.worker_threads, 0);
    let file = parse_file("[runtime]\nworker_threads = 3\n").unwrap();
    assert_eq!(file.runtime.worker_threads, 3);
    let env = [("RAMQP_WORKER_THREADS", "2")];
    let from_env = apply_cli(file.clone(), &parse_with_env(&[], &env).unwrap());
    assert_eq!(from_env.runtime.worker_threads, 2);
    let cli = parse_with_env(&["--worker-threads", "1"], &env).unwrap();
    assert_eq!(apply_cli(file, &cli).runtime.worker_threads, 1);
    assert!(parse_file("[runtime]\nthreads = 3\n").is_err());
    assert!(parse_file("[runtime]\nworker_threads = -1\n").is_err());
}

#[test]
fn runtime_flavor_from_file_env_and_flag() {
    let default = parse_file("[runtime]\nworker_threads = 1\n")
        .unwrap()
        .runtime;
    assert_eq!(default.flavor, RuntimeFlavor::Auto);
    assert_eq!(
        default.resolved_flavor().unwrap(),
        RuntimeFlavor::CurrentThread
    );
    let two = parse_file("[runtime]\nworker_threads = 2\n")
        .unwrap()
        .runtime;
    assert_eq!(two.resolved_flavor().unwrap(), RuntimeFlavor::MultiThread);

    let file = parse_file("[runtime]\nworker_threads = 1\nflavor = \"multi-thread\"\n").unwrap();
    assert_eq!(
        file.runtime.resolved_flavor().unwrap(),
        RuntimeFlavor::MultiThread
    );
    let env = [("RAMQP_RUNTIME_FLAVOR", "current-thread")];
    let from_env = apply_cli(file.clone(), &parse_with_env(&[], &env).unwrap());
    assert_eq!(from_env.runtime.flavor, RuntimeFlavor::CurrentThread);
    let cli = parse_with_env(&["--runtime-flavor", "auto"], &env).unwrap();
    assert_eq!(apply_cli(file, &cli).runtime.flavor, RuntimeFlavor::Auto);
    assert!(parse_file("[runtime]\nflavor = \"single\"\n").is_err());

    // One thread cannot run more workers than one.
    let three = parse_file("[runtime]\nworker_threads = 3\nflavor = \"current-thread\"\n").unwrap();
    let refused = three.runtime.resolved_flavor().unwrap_err();
    assert!(refused.0.contains("worker_threads gives 3"), "{refused}");
}
