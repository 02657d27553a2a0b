#!/usr/bin/env bash
# threads2.sh BINS N "WINDOWS": per-thread CPU ticks (1/100 s) of every node and the client per blast of N
# (BINS holds ramqp-brokerd, ramqp-ctl and latency; TRACE=1, TRACEL=1, PERFL=1, SCHED=1 write
# trace.txt, tracel.txt, perfl.data, sched.data into $OUT, default /tmp)
set -euo pipefail
bins=$1; n=$2; wins=$3
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
source bench-compare/cluster_lib.sh
export RAMQP_BIN_DIR=$bins RAMQP_BASE_PORT=28672
cluster_start
if [[ -n "${IONICE_SPEC:-}" ]]; then
  for i in 1 2 3; do p=$(cat $RAMQP_CLUSTER_DIR/node$i/pid); for t in /proc/$p/task/*; do c=$(cat $t/comm)
    for spec in $IONICE_SPEC; do name=${spec%%=*}; val=${spec#*=}; [[ "$c" == "$name"* ]] && ionice -c ${val%%:*} -n ${val##*:} -p $(basename $t); done; done; done
fi
if [[ -n "${NICE_SPEC:-}" ]]; then
  for i in 1 2 3; do p=$(cat $RAMQP_CLUSTER_DIR/node$i/pid); for t in /proc/$p/task/*; do c=$(cat $t/comm)
    for spec in $NICE_SPEC; do name=${spec%%=*}; val=${spec#*=}; [[ "$c" == "$name"* ]] && renice -n $val -p $(basename $t) >/dev/null; done; done; done
fi
leader="$(leader_of /quorum/bench)"
snap() { for i in 1 2 3; do p=$(cat $RAMQP_CLUSTER_DIR/node$i/pid); r=F; [[ $i == $leader ]] && r=L; for t in /proc/$p/task/*; do echo "$r$i $(cat $t/comm | tr ' ' '_') $(awk '{print $14+$15}' $t/stat) $(awk '/^wchar/{print $2}' $t/io)"; done; done; }
$bins/latency --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n 20000 --window 1000 >/dev/null 2>&1
for w in $wins; do
snap > /tmp/t0
grep " vda " /proc/diskstats > /tmp/d0
[[ -n "${PERFL:-}" ]] && { (sleep 0.4; perf record -F 1500 --call-graph dwarf,16384 -p $(cat $RAMQP_CLUSTER_DIR/node$leader/pid) -o ${OUT:-/tmp}/perfl.data -- sleep 1.5 >/dev/null 2>&1) & sp=$!; }
[[ -n "${TRACEL:-}" ]] && { perf trace -p $(cat $RAMQP_CLUSTER_DIR/node$leader/pid) -e "openat,pwrite64,write,writev,pwritev,close,rename,renameat2,unlinkat" -o ${OUT:-/tmp}/tracel.txt -- sleep 3 >/dev/null 2>&1 & sp=$!; sleep 0.3; }
[[ -n "${TRACE:-}" ]] && { perf trace -a -e "writev,sendmsg,sendto,write,fdatasync,fsync,read,recvfrom,recvmsg,readv,pwrite64,pwritev" -o ${OUT:-/tmp}/trace.txt -- sleep 1.6 >/dev/null 2>&1 & sp=$!; sleep 0.3; }
[[ -n "${SCHED:-}" ]] && { perf sched record -a -o ${OUT:-/tmp}/sched.data -- sleep 1.2 >/dev/null 2>&1 & sp=$!; sleep 0.2; }
s=$(date +%s.%N)
/usr/bin/time -f "client %U %S" -o /tmp/tc $bins/latency --client raw --url "$(amqp $leader)" --address /quorum/bench --confirm --lat-n 0 --warmup 0 --n $n --window $w 2>/dev/null | python3 -c "import json,sys
d=json.load(sys.stdin); t=d['throughput_msg_s']; print('window $w publish', round(t['publish']['median']), 'drain', round(t['drain']['median']))"
e=$(date +%s.%N)
snap > /tmp/t1
grep " vda " /proc/diskstats > /tmp/d1
python3 -c "a=open('/tmp/d0').read().split();b=open('/tmp/d1').read().split();print('disk MB written',(int(b[9])-int(a[9]))*512/1e6,'writes',int(b[7])-int(a[7]),'flushes',int(b[18])-int(a[18]) if len(b)>18 else '?','ms writing',int(b[10])-int(a[10]))"
[[ -n "${SCHED:-}${TRACE:-}${TRACEL:-}${PERFL:-}" ]] && wait $sp || true
echo "elapsed $(python3 -c "print(round($e-$s,2))") $(cat /tmp/tc)"
python3 - <<'P'
import collections
a={};b={};W={}
for f,d in (('/tmp/t0',a),('/tmp/t1',b)):
    for l in open(f):
        n,c,t,w=l.split(); c=c.rstrip('0123456789-_'); d.setdefault((n,c),0); d[(n,c)]+=int(t); W.setdefault(f,{}); W[f][(n,c)]=W[f].get((n,c),0)+int(w)
tot=collections.Counter()
out=[]
for k in sorted(b):
    dt=b[k]-a.get(k,0)
    if dt>0: out.append('%s/%s=%d'%(k[0],k[1],dt)); tot[k[0]]+=dt
print(' '.join(out)); print('per node', dict(tot), 'sum', sum(tot.values()))
print('MB written by thread', ' '.join('%s/%s=%.1f'%(k[0],k[1],(W['/tmp/t1'][k]-W['/tmp/t0'].get(k,0))/1e6) for k in sorted(W['/tmp/t1']) if W['/tmp/t1'][k]-W['/tmp/t0'].get(k,0)>1e5))
P
done
