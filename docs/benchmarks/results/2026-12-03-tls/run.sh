#!/bin/sh
# What TLS costs the transient closed loop and the blast: one broker with a
# plain and a TLS listener, three rounds, each TCP then TLS (amqps://, the
# bench's rustls client verifying a CA made here with openssl). Run from the
# repository root after
#   cargo build --release -p ramqp-brokerd -p ramqp-bench-compare
# PIN=1 pins the broker to CPU 0 and the client to CPU 1 (taskset).
set -eu
out=docs/benchmarks/results/2026-12-03-tls
b=""; c=""
if [ "${PIN:-0}" = 1 ]; then b="taskset -c 0"; c="taskset -c 1"; out="$out/pinned"; fi
mkdir -p "$out"
dir=$(mktemp -d)
(
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout server.key -out server.csr -subj "/CN=localhost"
    printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out server.pem -days 2 -extfile server.ext
) >/dev/null 2>&1
$b target/release/ramqp-brokerd --listen 127.0.0.1:5811 --tls-listen 127.0.0.1:5812 \
    --tls-cert "$dir/server.pem" --tls-key "$dir/server.key" \
    --data-dir "$dir/data" >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
    if python3 -c 'import socket;[socket.create_connection(("127.0.0.1",p),0.2).close() for p in (5811,5812)]' 2>/dev/null; then break; fi
    sleep 0.1
done
for t in 1 2 3; do
    $c target/release/latency --url amqp://127.0.0.1:5811 --pid $pid --address /queues/lat-tcp >"$out/transient-tcp-$t.json"
    RAMQP_BENCH_TLS_CA="$dir/ca.pem" $c target/release/latency --url amqps://localhost:5812 --pid $pid \
        --address /queues/lat-tls >"$out/transient-tls-$t.json"
done
