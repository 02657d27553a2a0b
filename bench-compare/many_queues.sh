#!/usr/bin/env bash
# N quorum queues on a 3-process ramqp-brokerd cluster (release build, data
# in /tmp): creation by attaches, every queue serving, leader balance, idle
# CPU and memory per group, graceful stop, restart and fail-over of a
# killed node. See the `many_queues` bin's header for the phases.
#
#   bench-compare/many_queues.sh                      # 1,000 queues, 3 trials
#   bench-compare/many_queues.sh --queues 10000 --trials 1 --idle-secs 60
#   bench-compare/many_queues.sh --no-build --out DIR
#
# Writes DIR/many-<N>-tK.json (default DIR:
# docs/benchmarks/results/<UTC timestamp>-many-queues). Flags other than
# --trials, --no-build and --out go to the bin (--queues, --idle-secs,
# --connections, --extra-args, --no-failover, --base-port).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
trials=3
build=1
out=""
queues=1000
pass=()
while (($#)); do
    case "$1" in
    --trials) trials="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --out) out="$2"; shift 2 ;;
    --queues) queues="$2"; shift 2 ;;
    *) pass+=("$1"); shift ;;
    esac
done
target="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
if ((build)); then
    cargo build --release -p ramqp-brokerd --bin ramqp-brokerd
    cargo build --release -p ramqp-bench-compare --bin many_queues
fi
out="${out:-docs/benchmarks/results/$(date -u +%Y-%m-%dT%H%M%SZ)-many-queues}"
mkdir -p "$out"
for ((t = 1; t <= trials; t++)); do
    echo "==> trial $t of $trials: $queues queues" >&2
    "$target/release/many_queues" --bin-dir "$target/release" --queues "$queues" \
        ${pass[@]+"${pass[@]}"} >"$out/many-$queues-t$t.json"
done
echo "results in $out" >&2
