#!/usr/bin/env bash
# one cluster, blast through the leader, then the leader's commit-latency histogram
set -euo pipefail
bins=${1:-/work/bins37/w}; cfg=${2:-}
cd /work/main
export RAMQP_BIN_DIR=$bins/release RAMQP_BASE_PORT=28672
export RAMQP_CLUSTER_DIR=$(mktemp -d /tmp/prof37m.XXXX)
[[ -n "$cfg" ]] && export RAMQP_CONFIG=$cfg
trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf $RAMQP_CLUSTER_DIR' EXIT
for i in 1 2 3; do :; done
RAMQP_EXTRA_ARGS="--http-listen 127.0.0.1:0" deploy/local-cluster.sh start >/dev/null
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }
$bins/release/latency --client raw --url "$(amqp 1)" --address /quorum/bench --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null 2>&1
leader=""
for _ in $(seq 100); do
  leader=$($bins/release/ramqp-ctl --fabric "$(fabric 1)" status --json | python3 -c "import json,sys
q=[q for q in json.load(sys.stdin)['queues'] if q['address']=='/quorum/bench']
print(q[0]['leader'] if q and q[0]['leader'] is not None else '')")
  [[ -n "$leader" ]] && break; sleep 0.1
done
http=$(grep -ho 'http listening on [0-9.:]*' $RAMQP_CLUSTER_DIR/node$leader/stdout | awk '{print $4}')
echo "leader $leader http $http"
$bins/release/latency --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n 200000 --window 1000 2>&1 >/dev/null | grep "blast publish"
curl -s http://$http/metrics | grep "commit_latency" | head -40
