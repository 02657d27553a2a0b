#!/usr/bin/env bash
# many_queues at N queues; perf record (frame-pointer call graphs) of the whole machine for S s
# from the quiet kill (phase 7) on: the moment the brokerd count drops to 2 after phase 6's line.
set -u
N=$1; OUT=$2; BINS=$3; S=${4:-8}
mkdir -p $OUT
$BINS/many_queues --bin-dir $BINS --queues $N --idle-secs 10 --base-port 9600 > $OUT/many.json 2> $OUT/many.log &
mq=$!
until grep -q "node 1 killed: all led again" $OUT/many.log 2>/dev/null; do
  kill -0 $mq 2>/dev/null || { echo "many_queues ended early"; exit 1; }
  sleep 0.5
done
until [ "$(pgrep -xc ramqp-brokerd)" -ge 3 ]; do sleep 0.05; done
until [ "$(pgrep -xc ramqp-brokerd)" -le 2 ]; do sleep 0.02; done
date +%s.%N > $OUT/kill-seen
perf record -e cpu-clock -F 997 -a --call-graph fp -o $OUT/perf.data -- sleep $S 2> $OUT/perf.err
wait $mq
echo done
