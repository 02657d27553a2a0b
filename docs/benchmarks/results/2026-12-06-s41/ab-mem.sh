#!/usr/bin/env bash
# Memory per idle group: before (a) and after (b), alternating.
set -u
A=$1; B=$2; OUT=$3; N=$4; ROUNDS=$5
mkdir -p $OUT
for r in $(seq 1 $ROUNDS); do
  for set in a b; do
    bins=$A; [ $set = b ] && bins=$B
    $bins/many_queues --bin-dir $bins --queues $N --idle-secs 5 --no-failover --base-port 9600 > $OUT/$set$r.json 2> $OUT/$set$r.log
    python3 -c "import json; d=json.load(open('$OUT/$set$r.json')); print('$set$r', d['rss_kib_per_group'], 'idle%', d['idle_cpu_pct_of_core_total'], 'create', d['create_s'])"
  done
done
