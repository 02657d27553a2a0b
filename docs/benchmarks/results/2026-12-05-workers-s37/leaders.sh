#!/usr/bin/env bash
set -euo pipefail
bins=/work/bins37/w
cd /work/main
export RAMQP_BIN_DIR=$bins/release RAMQP_BASE_PORT=28672
export RAMQP_CLUSTER_DIR=$(mktemp -d /tmp/prof37l.XXXX)
trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf $RAMQP_CLUSTER_DIR' EXIT
deploy/local-cluster.sh start >/dev/null
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }
lead() { $bins/release/ramqp-ctl --fabric "$(fabric 1)" status --json | python3 -c "import json,sys
q=[q for q in json.load(sys.stdin)['queues'] if q['address']=='$1']
print(q[0]['leader'] if q and q[0]['leader'] is not None else '')"; }
$bins/release/latency --client raw --url "$(amqp 1)" --address /quorum/bench --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null 2>&1
sleep 1; L=$(lead /quorum/bench); echo "bench leader $L"
for q in rig rate; do
  $bins/release/latency --client raw --url "$(amqp $L)" --address /quorum/$q --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null 2>&1
  sleep 1; echo "$q leader $(lead /quorum/$q)"
done
