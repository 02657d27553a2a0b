#!/usr/bin/env bash
# Closed-loop latency (publish confirmed + delivered, one in flight) of
# ramqp-brokerd builds against the reference broker (ramqp-broker 0.9.5's
# ramqp-brokerd, `cargo install ramqp-broker --features store-redb`): the
# same latency bin (raw client, --confirm, 256 B) against each, a fresh
# daemon per trial, the order rotated every round.
# usage: vsref.sh OUTDIR ROUNDS LABEL=BINDIR [LABEL=BINDIR ...]
# (the latency bin of the first BINDIR drives every daemon)
set -euo pipefail
OUT=$1 ROUNDS=$2; shift 2
REF=${REF:-/work/ref-broker/bin/ramqp-brokerd}
LAT_N=${LAT_N:-5000} WARM=${WARM:-500}
declare -A DIR; KINDS=()
for kv in "$@"; do DIR[${kv%%=*}]=${kv#*=}; KINDS+=("${kv%%=*}"); done
LAT=${DIR[${KINDS[0]}]}/latency
mkdir -p "$OUT"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
run() {
    local kind=$1 r=$2 port data pid bin
    port=$(free_port); data=$(mktemp -d)
    if [ "$kind" = ref ]; then bin=$REF; else bin=${DIR[$kind]}/ramqp-brokerd; fi
    "$bin" --listen 127.0.0.1:$port --data-dir "$data" >"$OUT/$kind-$r.log" 2>&1 & pid=$!
    for i in $(seq 1 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
    "$LAT" --client raw --url amqp://127.0.0.1:$port --address /queues/lat --confirm \
        --n 0 --warmup "$WARM" --lat-n "$LAT_N" --trials 1 --pid $pid \
        >"$OUT/$kind-$r.json" 2>"$OUT/$kind-$r.err" || echo "$kind round $r failed" >&2
    kill -TERM $pid; wait $pid 2>/dev/null || true; rm -rf "$data"
}
n=${#KINDS[@]}
for r in $(seq 1 "$ROUNDS"); do
    for i in $(seq 0 $((n - 1))); do run "${KINDS[$(((i + r) % n))]}" "$r"; done
done
python3 - "$OUT" "${KINDS[@]}" <<'PY' | tee "$OUT/summary.txt"
import json, sys, glob, statistics
out, kinds = sys.argv[1], sys.argv[2:]
p50 = {}
for k in kinds:
    v = []
    for f in sorted(glob.glob(f"{out}/{k}-*.json")):
        try: v.append(json.load(open(f))["trials"][0]["latency_us"]["p50"])
        except Exception: pass
    p50[k] = v
    if v: print(f"{k:6s} p50 us median {statistics.median(v):.1f} min {min(v):.1f} max {max(v):.1f} trials {v}")
for k in []:
    if p50[k] and p50["ref"]:
        ratios = [a / b for a, b in zip(p50[k], p50["ref"])]
        print(f"{k}/ref per round: {[round(x, 3) for x in ratios]}, median {statistics.median(ratios):.3f}")
PY
