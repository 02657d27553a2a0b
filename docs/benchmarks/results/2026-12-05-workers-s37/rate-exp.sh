#!/usr/bin/env bash
# rate-exp.sh OUT: fixed-rate runs at several rates, with and without idle spinners
set -euo pipefail
out=$1; bins=/work/bins37/w
cd /work/main
export RAMQP_BIN_DIR=$bins/release RAMQP_BASE_PORT=28672
export RAMQP_CLUSTER_DIR=$(mktemp -d /tmp/prof37r.XXXX)
mkdir -p $out
trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf $RAMQP_CLUSTER_DIR; kill $(jobs -p) 2>/dev/null || true' EXIT
deploy/local-cluster.sh start >/dev/null
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }
$bins/release/latency --client raw --url "$(amqp 1)" --address /quorum/rate --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null 2>&1
leader=""
for _ in $(seq 100); do
  leader=$($bins/release/ramqp-ctl --fabric "$(fabric 1)" status --json | python3 -c "import json,sys
q=[q for q in json.load(sys.stdin)['queues'] if q['address']=='/quorum/rate']
print(q[0]['leader'] if q and q[0]['leader'] is not None else '')")
  [[ -n "$leader" ]] && break; sleep 0.1
done
run() { # name rate
  $bins/release/rig --client raw --url "$(amqp $leader)" --address /quorum/rate --rate $2 --sizes 256 --warmup 2 --duration 6 --trials 1 > $out/$1.json 2>/dev/null
  python3 -c "
import json;r=json.load(open('$out/$1.json'))['results'][0];print('$1', 'p50', r['latency_us']['p50'], 'p99', r['latency_us']['p99'], 'lag p50', r['send_lag_us']['p50'])"
}
closed() {
  $bins/release/latency --client raw --url "$(amqp $leader)" --address /quorum/rate --confirm --lat-n 3000 --warmup 300 --n 0 > $out/$1.json 2>/dev/null
  python3 -c "
import json;r=json.load(open('$out/$1.json'));print('$1', 'closed p50', r['percentiles_us']['p50']['median'])"
}
closed closed1
run r500 500
run r1000 1000
run r2000 2000
run r1000b 1000
for c in 0 1; do taskset -c $c chrt -i 0 bash -c 'while :; do :; done' & done
closed closed-spin
run r1000-spin 1000
run r500-spin 500
kill $(jobs -p) 2>/dev/null || true
wait 2>/dev/null || true
run r1000c 1000
closed closed2
