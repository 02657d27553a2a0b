#!/usr/bin/env bash
# One set: the floor, bench-compare/cluster.sh (3 trials), the floor again.
# usage: measure.sh OUTDIR [trials] [dir holding release/] [config file]
# The config file (RAMQP_CONFIG of every ramqp-brokerd) picks the mode:
# depth1.toml = one AppendEntries at a time (as before), pipelined16.toml
# = 16 in flight per group and follower. (The sets here ran the binary of
# 4d7fac32, whose default was 16: its b sets ran without a config file.)
set -euo pipefail
out="$1"; trials="${2:-3}"; tgt="${3:-/work/tgt-raft}"; config="${4:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/../../../.."
export CARGO_TARGET_DIR="$tgt" RAMQP_BASE_PORT=28672
if [[ -n "$config" ]]; then export RAMQP_CONFIG="$config"; fi
mkdir -p "$out"
{ date -u; uptime; git rev-parse HEAD; echo "bins: $tgt/release"; echo "config: ${RAMQP_CONFIG:-none}"; } > "$out/machine.txt"
"$tgt/release/floor" --dir /tmp > "$out/floor-before.json"
CLUSTER_RIG_FLAGS="--sizes 256 --warmup 2 --duration 10" \
  bench-compare/cluster.sh --trials "$trials" --no-build --out "$out" 2>&1 | tee "$out/run.log"
"$tgt/release/floor" --dir /tmp > "$out/floor-after.json"
{ date -u; uptime; } >> "$out/machine.txt"
