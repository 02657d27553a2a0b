#!/usr/bin/env bash
# per-thread CPU of each node during one blast through the leader
set -euo pipefail
bins=${1:-/work/bins37/p4}; n=${2:-300000}
cd /work/main
export RAMQP_BIN_DIR=$bins/release RAMQP_BASE_PORT=28672
export RAMQP_CLUSTER_DIR=$(mktemp -d /tmp/prof37t.XXXX)
trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf $RAMQP_CLUSTER_DIR' EXIT
deploy/local-cluster.sh start >/dev/null
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }
$bins/release/latency --client raw --url "$(amqp 1)" --address /quorum/bench --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null 2>&1
leader=""
for _ in $(seq 100); do
  leader=$($bins/release/ramqp-ctl --fabric "$(fabric 1)" status --json | python3 -c "import json,sys
q=[q for q in json.load(sys.stdin)['queues'] if q['address']=='/quorum/bench']
print(q[0]['leader'] if q and q[0]['leader'] is not None else '')")
  [[ -n "$leader" ]] && break; sleep 0.1
done
snap() { for i in 1 2 3; do p=$(cat $RAMQP_CLUSTER_DIR/node$i/pid); for t in /proc/$p/task/*; do echo "$i $(cat $t/comm | tr ' ' '_') $(awk '{print $14+$15}' $t/stat)"; done; done; }
$bins/release/latency --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n 50000 --window 1000 >/dev/null 2>&1
snap > /tmp/t0
s=$(date +%s.%N)
$bins/release/latency --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n $n --window 1000 2>&1 >/dev/null | grep "blast publish" || true
e=$(date +%s.%N)
snap > /tmp/t1
echo "leader $leader elapsed $(python3 -c "print(round($e-$s,2))")"
python3 - <<'P'
a={};b={}
for f,d in (('/tmp/t0',a),('/tmp/t1',b)):
    for l in open(f):
        n,c,t=l.split(); d.setdefault((n,c),0); d[(n,c)]+=int(t)
for k in sorted(b):
    dt=b[k]-a.get(k,0)
    if dt>0: print(k, dt, 'ticks')
P
