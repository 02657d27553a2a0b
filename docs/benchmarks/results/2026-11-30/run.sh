#!/bin/bash
B=/work/target-raw/release/latency
cd /tmp/rawres
for leg in "pre:" "conf:--confirm" "quorum:--confirm --address /quorum/lat"; do
  name=${leg%%:*}; flags=${leg#*:}
  for c in raw fe2o3; do
    timeout 600 $B --trials 3 --client $c $flags > $name-$c.json 2> $name-$c.err; echo "$name $c rc=$?"
  done
done
PID=$(cat /work/rmq-raw/pid)
for c in raw fe2o3; do
  timeout 600 $B --trials 3 --client $c --url amqp://guest:guest@127.0.0.1:5699 --address /amq/queue/lat --pid $PID > rmq-pre-$c.json 2> rmq-pre-$c.err; echo "rmq-pre $c rc=$?"
  timeout 600 $B --trials 3 --client $c --confirm --url amqp://guest:guest@127.0.0.1:5699 --address /amq/queue/lat --pid $PID > rmq-conf-$c.json 2> rmq-conf-$c.err; echo "rmq-conf $c rc=$?"
done
