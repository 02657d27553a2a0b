#!/usr/bin/env bash
# many_queues 10k; during the kill phase flat perf on nodes 2 and 3.
set -u
bins="$1"; out="$2"; mkdir -p "$out"
"$bins/many_queues" --bin-dir "$bins" --queues 10000 --idle-secs 20 --keep --base-port 9600 > "$out/mq.json" 2> "$out/mq.log" &
bench=$!
until grep -q "node 3 back" "$out/mq.log" 2>/dev/null; do
  kill -0 $bench 2>/dev/null || { echo "bench ended early"; exit 1; }
  sleep 0.2
done
p2=$(pgrep -f -- "ramqp-brokerd --node-id 2 ")
p3=$(pgrep -f -- "ramqp-brokerd --node-id 3 ")
perf record -F 999 -p "$p2" -o "$out/perf2.data" -- sleep 9 > /dev/null 2>&1 &
perf record -F 999 -p "$p3" -o "$out/perf3.data" -- sleep 9 > /dev/null 2>&1 &
wait $bench
wait
