#!/usr/bin/env bash
# Run many_queues at 10k with BINS, and during the kill phase record perf on node 2 and
# CPU of nodes 2/3 every 0.5 s. usage: failover_profile.sh BINS OUTDIR
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
perf record -F 300 --call-graph dwarf,16384 -p "$p2" -o "$out/perf2.data" -- sleep 8 > /dev/null 2>&1 &
tick=$(getconf CLK_TCK)
for i in $(seq 1 20); do
  for p in $p2 $p3; do
    echo "$(date +%s.%N) $p $(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null)"
  done
  sleep 0.5
done > "$out/cpu.txt"
wait $bench
echo "tick $tick p2 $p2 p3 $p3" >> "$out/cpu.txt"
