#!/bin/bash
# scrape.sh OUTDIR: every 2 s, the per-group term and leading series of the three nodes (ports 9620-9622)
out=$1; mkdir -p $out
while true; do
  ts=$(date +%s%3N)
  for p in 0 1 2; do
    curl -s --max-time 3 http://127.0.0.1:962$p/metrics 2>/dev/null | grep -E '^ramqp_raft_(term|leading)\{' > $out/n$((p+1))-$ts.txt &
  done
  wait
  find $out -size 0 -delete
  sleep 2
  pgrep -f "many_queues --bin-dir" > /dev/null || break
done
