#!/usr/bin/python3
"""Run the workspace's Rust test binaries, several at once.

`cargo test` runs one test binary after another. Most of ours start
brokers, clusters or processes and then wait on them, so one binary at a
time leaves a 2-core machine half idle while they run (two at a time
they take about 200 s on 2 cores, `.ci/run` of 2026-12-06): this runner
builds them with `cargo test --no-run`, then runs up to
`--jobs` binaries at once, each in its package's directory with
CARGO_MANIFEST_DIR set (as cargo runs them; no test reads any other
cargo variable at run time), and prints each binary's output whole when
it ends (never interleaved). Doc tests run afterwards through cargo.

    scripts/run-rust-tests.py [--jobs N]     # default: RAMQP_TEST_JOBS or 2

Exits non-zero if any binary fails (every binary still runs) or if the
build or the doc tests fail.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def test_binaries():
    """Build every test target and list (name, executable, package dir)."""
    build = subprocess.run(
        ["cargo", "test", "--workspace", "--no-run",
         "--message-format=json-render-diagnostics"],
        stdout=subprocess.PIPE, text=True, check=False)
    if build.returncode != 0:
        sys.exit(f"run-rust-tests: cargo test --no-run failed ({build.returncode})")
    binaries = []
    for line in build.stdout.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact":
            continue
        if not message.get("profile", {}).get("test") or not message.get("executable"):
            continue
        target = message["target"]
        package_dir = os.path.dirname(message["manifest_path"])
        kind = "unittests" if target["kind"] != ["test"] else "tests"
        name = f"{os.path.basename(package_dir)} {kind} {target['name']}"
        binaries.append((name, message["executable"], package_dir))
    return binaries


def package_env(package_dir):
    """The run-time variable of `cargo test` our tests read."""
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = package_dir
    return env


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int,
                        default=int(os.environ.get("RAMQP_TEST_JOBS", "2")))
    args = parser.parse_args()

    binaries = test_binaries()
    print(f"==> {len(binaries)} test binaries, {args.jobs} at a time", flush=True)
    print_lock = threading.Lock()
    failed = []

    def run(entry):
        name, executable, package_dir = entry
        started = time.monotonic()
        result = subprocess.run([executable], cwd=package_dir,
                                env=package_env(package_dir),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", check=False)
        took = time.monotonic() - started
        with print_lock:
            status = "ok" if result.returncode == 0 else f"FAILED ({result.returncode})"
            print(f"---- {name}: {status} in {took:.1f}s ({executable})")
            print(result.stdout, end="", flush=True)
            if result.returncode != 0:
                failed.append(name)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(run, binaries))
    print(f"==> test binaries done in {time.monotonic() - started:.0f}s", flush=True)

    print("==> cargo test --workspace --doc", flush=True)
    doc = subprocess.run(["cargo", "test", "--workspace", "--doc"], check=False)
    if doc.returncode != 0:
        failed.append("doc tests")

    if failed:
        print("run-rust-tests: failed: " + ", ".join(failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
