#!/usr/bin/env bash
# Quorum-queue latency and throughput against the 3-node cluster from
# deploy/local-cluster.sh, through the queue's leader and through a
# follower, with the same client (the latency bin, raw client).
#
#   bench-compare/cluster.sh                 # 3 trials per path
#   bench-compare/cluster.sh --trials 5 --no-build
#
# For each trial and path: closed-loop publish -> deliver -> accept with
# `accepted` awaited (LAT_LAT_N samples after a warm-up), then a blast of
# LAT_N messages with 1,000 confirms in flight. The queue's Raft term is
# read before and after every run: a higher term means the leader changed
# under load, which the summary reports.
#
# Then the rig through each path, on queues of its own (/quorum/rig,
# /quorum/rate), each through that queue's leader and one of its followers
# (rig-nodes.txt says which; until session 37 both paths went to the nodes
# of /quorum/bench, whose leader led neither): throughput
# (1 publisher x 1,000 confirmed in flight, 1 consumer x credit 1,000) and
# the open loop at 1,000 msg/s, as `rig-clusterleader-quorum-raw.json`,
# `rate-clusterfollower-quorum-raw.json` and so on, named the way
# bench-compare/run.sh names its rig runs so `summarize` tables them.
#
# Writes docs/benchmarks/results/<UTC timestamp>-cluster/{leader,follower}-tN.json
# and summary.md (or into --out DIR; bench-compare/run.sh's `cluster` leg),
# the rig files into --rig-out DIR (default: the same folder).
# LAT_LAT_N and LAT_N set the sample and blast sizes; CLUSTER_RIG_FLAGS and
# CLUSTER_RATE_FLAGS the rig's (defaults: the runner's full mode);
# --no-rig skips the rig.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
trials=3
build=1
out=""
rig_out=""
rig=1
while (($#)); do
    case "$1" in
    --trials) trials="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --out) out="$2"; shift 2 ;;
    --rig-out) rig_out="$2"; shift 2 ;;
    --no-rig) rig=0; shift ;;
    *) echo "usage: $0 [--trials N] [--no-build] [--out DIR] [--rig-out DIR] [--no-rig]" >&2; exit 2 ;;
    esac
done

export RAMQP_BASE_PORT="${RAMQP_BASE_PORT:-7672}"
export RAMQP_CLUSTER_DIR
RAMQP_CLUSTER_DIR="$(mktemp -d /tmp/ramqp-bench-cluster.XXXXXX)"
target="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
if ((build)); then
    cargo build --release -p ramqp-brokerd -p ramqp-bench-compare
fi
export RAMQP_BIN_DIR="$target/release"
if [[ -z "$out" ]]; then
    out="docs/benchmarks/results/$(date -u +%Y-%m-%dT%H%M%SZ)-cluster"
fi
mkdir -p "$out"
rig_out="${rig_out:-$out}"
mkdir -p "$rig_out"

cleanup() {
    deploy/local-cluster.sh stop >/dev/null 2>&1 || true
    # How each node's fabric ran (its address and whether TLS was on).
    grep -h '"fabric started"\|fabric started' "$RAMQP_CLUSTER_DIR"/*/log >"$out/fabric.txt" 2>/dev/null || true
    rm -rf "$RAMQP_CLUSTER_DIR"
}
trap cleanup EXIT
deploy/local-cluster.sh start >/dev/null

address=/quorum/bench
# amqp, fabric, queue_field and leader_of.
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

leader="$(leader_of "$address")"
follower=$((leader % 3 + 1))
echo "leader: node $leader, follower used: node $follower"

run() { # path node trial
    local before after
    before="$(queue_field "$2" term "$address")"
    "$RAMQP_BIN_DIR/latency" --client raw --url "$(amqp "$2")" --address "$address" \
        --confirm --lat-n "${LAT_LAT_N:-3000}" --warmup 300 --n "${LAT_N:-50000}" \
        --window 1000 --timeout-ms 30000 >"$out/$1-t$3.json"
    after="$(queue_field "$2" term "$address")"
    echo "$1 trial $3: term $before -> $after"
    echo "$1 $3 $before $after" >>"$out/terms.txt"
}
for t in $(seq "$trials"); do
    run leader "$leader" "$t"
    run follower "$follower" "$t"
done

rig_run() { # kind(rig|rate) path(leader|follower) flags...
    local kind=$1 path=$2 node before after name queue_leader
    shift 2
    name="$kind-cluster$path-quorum-raw"
    queue_leader="$(leader_of "/quorum/$kind")"
    node="$queue_leader"
    [[ "$path" == leader ]] || node=$((queue_leader % 3 + 1))
    echo "$name: /quorum/$kind led by node $queue_leader, client on node $node" | tee -a "$out/rig-nodes.txt"
    before="$(queue_field "$node" term "/quorum/$kind")"
    if ! "$RAMQP_BIN_DIR/rig" --client raw --url "$(amqp "$node")" --address "/quorum/$kind" \
        --trials "$trials" "$@" >"$rig_out/$name.json" 2>"$rig_out/$name.err"; then
        echo "$name FAILED (see $rig_out/$name.err)" >&2
    fi
    after="$(queue_field "$node" term "/quorum/$kind")"
    echo "$name: term $before -> $after"
    echo "$kind-$path 1 $before $after" >>"$out/terms.txt"
}
if ((rig)); then
    read -r -a rig_flags <<<"${CLUSTER_RIG_FLAGS:---sizes 64,256,1k,8k --warmup 2 --duration 10}"
    read -r -a rate_flags <<<"${CLUSTER_RATE_FLAGS:---sizes 256 --warmup 2 --duration 10}"
    rig_run rig leader "${rig_flags[@]}"
    rig_run rig follower "${rig_flags[@]}"
    rig_run rate leader --rate 1000 "${rate_flags[@]}"
    rig_run rate follower --rate 1000 "${rate_flags[@]}"
fi

python3 - "$out" "$leader" "$follower" <<'EOF'
import json, statistics, sys, pathlib
out, leader, follower = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
rows = {}
for path in ("leader", "follower"):
    runs = [json.loads(p.read_text()) for p in sorted(out.glob(f"{path}-t[0-9]*.json"))]
    p50 = [r["percentiles_us"]["p50"]["median"] for r in runs]
    p99 = [r["percentiles_us"]["p99"]["median"] for r in runs]
    pub = [r["throughput_msg_s"]["publish"]["median"] for r in runs]
    tot = [r["throughput_msg_s"]["total"]["median"] for r in runs]
    rows[path] = (p50, p99, pub, tot)
terms = [line.split() for line in (out / "terms.txt").read_text().splitlines()]
changes = sum(1 for _, _, before, after in terms if before != after)
fmt = lambda xs, unit="": f"{statistics.median(xs):,.0f}{unit} ({min(xs):,.0f}-{max(xs):,.0f})"
lines = [
    f"# Quorum queue on the 3-node cluster (leader node {leader}, follower node {follower})",
    "",
    "| path | closed-loop p50 µs | p99 µs | blast publish msg/s (1,000 in flight) | blast total msg/s |",
    "|---|---:|---:|---:|---:|",
]
for path, (p50, p99, pub, tot) in rows.items():
    lines.append(f"| {path} | {fmt(p50)} | {fmt(p99)} | {fmt(pub)} | {fmt(tot)} |")
ratio = statistics.median(rows["follower"][0]) / statistics.median(rows["leader"][0])
lines += ["", f"p50 follower / leader: {ratio:.2f}", f"runs with a leader change (term raised): {changes} of {len(terms)}",
          "", "median (min-max) over the trials; 256 B bodies; raw client (bench-compare/src/raw)."]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
