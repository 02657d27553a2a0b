#!/usr/bin/env bash
# blasts through the leader; after each, which nodes wrote a queue snapshot meanwhile
set -euo pipefail
bins=${1:-/work/bins37/w}
cd /work/main
export RAMQP_BIN_DIR=$bins/release RAMQP_BASE_PORT=28672
export RAMQP_CLUSTER_DIR=$(mktemp -d /tmp/prof37s.XXXX)
trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf $RAMQP_CLUSTER_DIR' EXIT
deploy/local-cluster.sh start >/dev/null
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }
$bins/release/latency --client raw --url "$(amqp 1)" --address /quorum/bench --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null 2>&1
sleep 1
for i in $(seq 6); do
  touch /tmp/snapmark
  r=$($bins/release/latency --client raw --url "$(amqp 1)" --address /quorum/bench --confirm --lat-n 3000 --warmup 300 --n 50000 --window 1000 2>&1 >/dev/null | grep "blast publish" | awk '{print $4}')
  echo "run $i blast $r snapshots written: $(find $RAMQP_CLUSTER_DIR -newer /tmp/snapmark -iname '*snapshot*' -type f | sed 's|.*/\(node[0-9]\)/.*|\1|' | sort | uniq -c | tr '\n' ' ')"
done
find $RAMQP_CLUSTER_DIR/node1 -iname '*snapshot*' | head -3
