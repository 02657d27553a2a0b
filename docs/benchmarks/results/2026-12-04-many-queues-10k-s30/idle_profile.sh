#!/usr/bin/env bash
# 10k queues, no fail-over phases, perf (dwarf call graphs) on node 2 while idle.
set -u
bins="$1"; out="$2"; mkdir -p "$out"
"$bins/many_queues" --bin-dir "$bins" --queues 10000 --idle-secs 40 --no-failover --base-port 9600 > "$out/mq.json" 2> "$out/mq.log" &
bench=$!
until grep -q "every queue served" "$out/mq.log" 2>/dev/null; do
  kill -0 $bench 2>/dev/null || { echo "bench ended early"; exit 1; }
  sleep 0.5
done
sleep 15
p2=$(pgrep -f -- "ramqp-brokerd --node-id 2 ")
perf record -F 999 --call-graph dwarf,16384 -p "$p2" -o "$out/perf-idle.data" -- sleep 15 > "$out/perf.log" 2>&1
wait $bench
