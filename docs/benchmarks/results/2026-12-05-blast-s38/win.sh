#!/usr/bin/env bash
# win.sh BINS "WINDOWS" N: blast throughput through the leader of /quorum/bench by window size
set -euo pipefail
bins="$1"; wins="$2"; n="${3:-50000}"
cd /work/main
export RAMQP_BIN_DIR="$bins" RAMQP_BASE_PORT=28672
export RAMQP_CLUSTER_DIR=$(mktemp -d /tmp/prof38.XXXX)
trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf $RAMQP_CLUSTER_DIR' EXIT
deploy/local-cluster.sh start >/dev/null
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }
"$bins/latency" --client raw --url "$(amqp 1)" --address /quorum/bench --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null 2>&1
leader=""
for _ in $(seq 100); do
  leader=$("$bins/ramqp-ctl" --fabric "$(fabric 1)" status --json | python3 -c "import json,sys
q=[q for q in json.load(sys.stdin)['queues'] if q['address']=='/quorum/bench']
print(q[0]['leader'] if q and q[0]['leader'] is not None else '')")
  [[ -n "$leader" ]] && break; sleep 0.1
done
for w in $wins; do
  "$bins/latency" --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n "$n" --window $w --trials ${TRIALS:-3} 2>/dev/null | python3 -c "import json,sys
d=json.load(sys.stdin); t=d['throughput_msg_s']['publish']; print('window $w publish', round(t['min']), round(t['median']), round(t['max']))"
done
