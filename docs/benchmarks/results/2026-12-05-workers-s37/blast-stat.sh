#!/usr/bin/env bash
# perf stat per process during one blast through the leader.
set -euo pipefail
bins="${1:-/work/tgt-raft/release}"; out="${2:-/work/prof37/stat}"; n="${3:-200000}"
cd /work/main
export RAMQP_BIN_DIR="$bins" RAMQP_BASE_PORT=28672
export RAMQP_CLUSTER_DIR=$(mktemp -d /tmp/prof37.XXXX)
mkdir -p "$out"
trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf $RAMQP_CLUSTER_DIR' EXIT
deploy/local-cluster.sh start >/dev/null
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }
"$bins/latency" --client raw --url "$(amqp 1)" --address /quorum/bench --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null
leader=""
for _ in $(seq 100); do
  leader=$("$bins/ramqp-ctl" --fabric "$(fabric 1)" status --json | python3 -c "import json,sys
q=[q for q in json.load(sys.stdin)['queues'] if q['address']=='/quorum/bench']
print(q[0]['leader'] if q and q[0]['leader'] is not None else '')")
  [[ -n "$leader" ]] && break; sleep 0.1
done
echo "leader $leader"
# warm
"$bins/latency" --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n 50000 --window 1000 >/dev/null
pids=""
for i in 1 2 3; do pids="$pids $(cat $RAMQP_CLUSTER_DIR/node$i/pid 2>/dev/null || cat $RAMQP_CLUSTER_DIR/*$i/pid)"; done
echo "pids $pids"
stats=()
for i in 1 2 3; do
  p=$(echo $pids | cut -d' ' -f$i)
  perf stat -I 200 -e task-clock,context-switches -p $p -o "$out/node$i.txt" & stats+=($!)
done
perf stat -e task-clock,instructions,context-switches -o "$out/client.txt" \
  "$bins/latency" --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n "$n" --window 1000 > "$out/blast.json"
for s in "${stats[@]}"; do kill -INT $s; done
wait
echo "leader=$leader" > "$out/leader.txt"
