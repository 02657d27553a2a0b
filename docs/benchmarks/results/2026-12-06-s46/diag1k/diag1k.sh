#!/bin/bash
# 1,000-queue runs with the vote guard's refusals logged; per run, the refusals after the quiet kill's loss.
B=$1; shift
for i in "$@"; do
  RAMQP_LOG_LEVEL="info,openraft=error,openraft::replication=off,ramqpd_broker::quorum::vote_guard=debug" \
    /work/bins-$B/many_queues --bin-dir /work/bins-$B --queues 1000 --idle-secs 5 --base-port 9600 --keep > /work/s46/diag1k-$i.json 2> /work/s46/diag1k-$i.log
  dir=$(grep -o "/tmp/ramqp-many-[0-9]*" /work/s46/diag1k-$i.log | head -1)
  victim=$(python3 -c "import json;print(json.load(open('/work/s46/diag1k-$i.json'))['quiet_kill']['node'])")
  t0=$(grep -h "peer node lost peer=$victim" $dir/node*/log | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-26 | sort | tail -n 2 | head -n 1)
  echo "run $i victim $victim quiet kill $(python3 -c "import json;print(json.load(open('/work/s46/diag1k-$i.json'))['quiet_kill']['failover_all_led_s'])") s, loss seen $t0"
  for n in 1 2 3; do
    [ $n = $victim ] && continue
    sed 's/\x1b\[[0-9;]*m//g' $dir/node$n/log | awk -v t="$t0" '$1 >= t' | grep "vote refused" | grep -c "leader=$victim" | sed "s/^/  node $n refusals naming the dead leader: /"
  done
  rm -rf $dir
done
