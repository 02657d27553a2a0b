#!/usr/bin/env bash
# The test command of this repository: build everything, check formatting
# and clippy lints, run the Rust tests, then run the Qpid Proton interop
# suite (tests/interop, its cluster tests twice: once on one current-thread
# worker per broker) and the short nemesis runs (tests/nemesis) against
# the ramqp-brokerd binary that was just built.
#
#   scripts/test.sh              # everything
#   scripts/test.sh -k drain     # extra arguments go to pytest
#
# Needs: cargo with the rustfmt and clippy components, Debian's
# /usr/bin/python3 with python3-qpid-proton and python3-pytest (.ci/run
# installs them on a fresh machine).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# Debian's interpreter on purpose: the python3 first on PATH may be another
# one without the python3-qpid-proton package.
python=/usr/bin/python3
# What the Python suites and the fault tests need, from Debian's packages
# (installed when missing, as root or through sudo).
if ! scripts/test-deps.sh; then
    echo "scripts/test.sh: could not install the test dependencies; as root:" \
         "apt-get install -y python3-qpid-proton python3-pytest python3-pytest-xdist python3-yaml openssl chromium strace e2fsprogs mount iproute2 nftables faketime" >&2
    exit 1
fi

echo "==> cargo build --workspace --all-targets"
cargo build --workspace --all-targets

# Lint gates, before the tests: a formatting difference or a clippy warning
# fails the run as surely as a failing test.
echo "==> cargo fmt --all --check"
cargo fmt --all --check

echo "==> cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# The library crates' API docs, as docs.rs would build them (all features):
# a broken or private intra-doc link fails the run.
echo "==> cargo doc --no-deps (library crates, -D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features \
    -p ramqpd-broker -p ramqpd-fabric -p ramqpd-store-redb

# The same tests `cargo test --workspace` runs, two test binaries at a
# time: most of them start brokers or clusters and wait on them, and run
# one after another they took 8.6 minutes here against 4.6 two at a time.
echo "==> cargo test --workspace (scripts/run-rust-tests.py)"
"$python" scripts/run-rust-tests.py

# Ask cargo where it put the binary, so CARGO_TARGET_DIR and
# .cargo/config.toml settings are honoured.
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | "$python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
brokerd="$target_dir/debug/ramqp-brokerd"
if [[ ! -x "$brokerd" ]]; then
    echo "scripts/test.sh: $brokerd was not built" >&2
    exit 1
fi

# Two workers, each taking whole files (--dist loadfile): every broker a
# test starts listens on an ephemeral port and has its own data directory,
# so files do not meet; most of the suite waits on brokers rather than
# computing, so two at once nearly halve its time on 2 cores.
echo "==> pytest tests/interop on 2 workers (broker: $brokerd)"
RAMQP_BROKERD="$brokerd" "$python" -m pytest tests/interop -q -n 2 --dist loadfile "$@"

# The 3-node local cluster runs each node on one worker, which `auto`
# makes tokio's current-thread scheduler (`[runtime] flavor`); the suite
# above runs its brokers on one worker per core. So the cluster tests
# (kill -9, isolation, rolling restart, forwarding) once more with every
# broker on one current-thread worker (about 100 s here).
echo "==> pytest tests/interop/test_cluster.py, brokers on one current-thread worker"
RAMQP_INTEROP_EXTRA_ARGS="--worker-threads 1" RAMQP_BROKERD="$brokerd" \
    "$python" -m pytest tests/interop/test_cluster.py -q

# Three short fixed-seed fault runs against a 3-node cluster
# (tests/nemesis, about 5 minutes here; root-only faults are skipped with
# a warning).
echo "==> pytest tests/nemesis (broker: $brokerd)"
RAMQP_BROKERD="$brokerd" "$python" -m pytest tests/nemesis -q
