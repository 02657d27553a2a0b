#!/usr/bin/env bash
# Kill fail-over timeline: 20 quorum queues, quiet, node 1 SIGKILLed; survivors' logs with openraft at debug.
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
source bench-compare/cluster_lib.sh
export RAMQP_BIN_DIR=${BINS:?BINS: a folder with ramqp-brokerd, ramqp-ctl, latency} RAMQP_BASE_PORT=29672
export RAMQP_LOG_LEVEL="${LOGL:-info,openraft=debug,openraft::replication=off}"
cluster_start
for i in $(seq 1 20); do
  "$RAMQP_BIN_DIR/latency" --client raw --url "$(amqp $(( (i % 3) + 1 )))" --address /quorum/fo$i --confirm --lat-n 5 --warmup 0 --n 0 >/dev/null
done
sleep 6
for i in $(seq 1 20); do echo "fo$i $(queue_field 2 leader /quorum/fo$i)"; done > ${OUT:-/tmp}/leaders.txt
p=$(cat $RAMQP_CLUSTER_DIR/node1/pid)
date -u +%H:%M:%S.%N > ${OUT:-/tmp}/killed_at
kill -9 $p
sleep 9
for n in 1 2 3; do cp $RAMQP_CLUSTER_DIR/node$n/log ${OUT:-/tmp}/log$n; done
ls $RAMQP_CLUSTER_DIR/node2
for i in $(seq 1 20); do echo "fo$i $(queue_field 2 leader /quorum/fo$i)"; done > ${OUT:-/tmp}/leaders_after.txt
