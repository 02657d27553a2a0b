#!/usr/bin/env bash
# Alternating A/B of builds or settings on the 3-node local cluster.
#
#   bench-compare/ab.sh OUT ROUNDS LABEL=BINDIR[,VAR=VALUE...] LABEL=...
#
# e.g. bench-compare/ab.sh /tmp/ab 2 before=/work/old after=/work/new
#      bench-compare/ab.sh /tmp/ab 2 two=/work/tgt-raft one=/work/tgt-raft,RAMQP_WORKER_THREADS=1
#
# BINDIR holds release/ with ramqp-brokerd, ramqp-ctl, latency, rig and
# floor (nothing is built). Each VAR=VALUE goes into the environment of
# that variant's set (RAMQP_CONFIG=FILE picks a config file). A round runs
# one set per variant, in the order given, so the variants alternate
# through the machine's changing load; OUT/<label>-r<round>/ holds a set:
# machine.txt (time, load, commit), the floor before and after
# (floor-*.json: three concurrent 256 B fdatasyncs and a loopback round
# trip), and bench-compare/cluster.sh's 3 trials (closed loop and blast
# through the leader and a follower) with the rig's throughput and its
# fixed 1,000 msg/s run at 256 B. At the end bench-compare/ab_table.py
# writes OUT/table.md, one row per set.
set -euo pipefail
if (($# < 3)); then
    sed -n '2,9p' "$0" >&2
    exit 2
fi
out="$1"; rounds="$2"; shift 2
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
mkdir -p "$out"
rows=()
for round in $(seq "$rounds"); do
    for variant in "$@"; do
        label="${variant%%=*}"
        IFS=',' read -r -a parts <<<"${variant#*=}"
        bins="${parts[0]}"
        dir="$out/$label-r$round"
        mkdir -p "$dir"
        {
            date -u; uptime; git rev-parse HEAD
            echo "bins: $bins/release"; echo "env: ${parts[*]:1}"
        } >"$dir/machine.txt"
        "$bins/release/floor" --dir /tmp >"$dir/floor-before.json"
        env "${parts[@]:1}" CARGO_TARGET_DIR="$bins" RAMQP_BASE_PORT=28672 \
            CLUSTER_RIG_FLAGS="--sizes 256 --warmup 2 --duration 10" \
            bench-compare/cluster.sh --trials 3 --no-build --out "$dir" >"$dir/run.log" 2>&1
        "$bins/release/floor" --dir /tmp >"$dir/floor-after.json"
        { date -u; uptime; } >>"$dir/machine.txt"
        rows+=("$label-r$round:$label:$dir")
        echo "$(date -u +%T) $label round $round done"
    done
done
python3 bench-compare/ab_table.py "${rows[@]}" | tee "$out/table.md"
