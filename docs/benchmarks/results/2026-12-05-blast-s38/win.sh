#!/usr/bin/env bash
# win.sh BINS "WINDOWS" N: blast throughput through the leader of /quorum/bench by window size
set -euo pipefail
bins="$1"; wins="$2"; n="${3:-50000}"
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
source bench-compare/cluster_lib.sh
export RAMQP_BIN_DIR=$bins RAMQP_BASE_PORT=28672
cluster_start
leader="$(leader_of /quorum/bench)"
for w in $wins; do
  "$bins/latency" --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n "$n" --window $w --trials ${TRIALS:-3} 2>/dev/null | python3 -c "import json,sys
d=json.load(sys.stdin); t=d['throughput_msg_s']['publish']; print('window $w publish', round(t['min']), round(t['median']), round(t['max']))"
done
