#!/bin/bash
# The first publish after a quiet spell vs. back-to-back, through the leader,
# 3-node local cluster; s52e (leaders keep their streams) vs s54a.
set -euo pipefail
cd /work/main
for round in 1 2; do
  for b in s52e s54a; do
    (
      export RAMQP_BIN_DIR=/work/qpbins-$b RAMQP_BASE_PORT=28672
      source bench-compare/cluster_lib.sh
      cluster_start
      leader="$(leader_of /quorum/qp)"
      "$RAMQP_BIN_DIR/latency" --client raw --url "$(amqp "$leader")" --address /quorum/qp \
          --confirm --n 0 --warmup 50 --lat-n 20 --gap-ms 3000 > /work/qp/$b-r$round-gap3000.json 2> /work/qp/$b-r$round-gap3000.err
      "$RAMQP_BIN_DIR/latency" --client raw --url "$(amqp "$leader")" --address /quorum/qp \
          --confirm --n 0 --warmup 200 --lat-n 2000 > /work/qp/$b-r$round-gap0.json 2> /work/qp/$b-r$round-gap0.err
      echo "$b r$round leader $leader" >> /work/qp/log
    )
  done
done
echo ALLDONE >> /work/qp/log
