#!/usr/bin/env bash
# usage: measure.sh OUTDIR [trials] [bin target dir holding release/]
set -euo pipefail
out="$1"; trials="${2:-3}"; tgt="${3:-/work/tgt}"
cd /work/wt-commit
export CARGO_TARGET_DIR="$tgt" RAMQP_BASE_PORT=27672
mkdir -p "$out"
{ date -u; uptime; git rev-parse HEAD; echo "bins: $tgt/release"; } > "$out/machine.txt"
"$tgt/release/floor" --dir /tmp > "$out/floor-before.json"
CLUSTER_RIG_FLAGS="--sizes 256 --warmup 2 --duration 10" \
  bench-compare/cluster.sh --trials "$trials" --no-build --out "$out" 2>&1 | tee "$out/run.log"
"$tgt/release/floor" --dir /tmp > "$out/floor-after.json"
{ date -u; uptime; } >> "$out/machine.txt"
