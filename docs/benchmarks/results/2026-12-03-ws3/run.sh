#!/bin/sh
# WebSocket against TCP on one broker, after our own RFC 6455 framing.
# Three rounds, each TCP, WebSocket (the bench's client on broker::ws,
# the default) and WebSocket with fe2o3-amqp-ws (tungstenite, tuned read
# buffer). Run from the repository root after
#   cargo build --release -p ramqp-brokerd -p ramqp-bench-compare
# PIN=1 pins the broker to CPU 0 and the client to CPU 1 (taskset), so
# the two do not trade places on the two cores from trial to trial.
set -eu
out=docs/benchmarks/results/2026-12-03-ws3
b=""; c=""
if [ "${PIN:-0}" = 1 ]; then b="taskset -c 0"; c="taskset -c 1"; fi
dir=$(mktemp -d)
$b target/release/ramqp-brokerd --listen 127.0.0.1:5801 --ws-listen 127.0.0.1:5802 \
    --data-dir "$dir" >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
# Wait for both listeners.
for _ in $(seq 100); do
    if python3 -c 'import socket;[socket.create_connection(("127.0.0.1",p),0.2).close() for p in (5801,5802)]' 2>/dev/null; then break; fi
    sleep 0.1
done
for t in 1 2 3; do
    $c target/release/latency --url amqp://127.0.0.1:5801 --pid $pid --address /queues/lat-tcp >"$out/transient-tcp-$t.json"
    $c target/release/latency --url ws://127.0.0.1:5802 --pid $pid --address /queues/lat-ws >"$out/transient-ws-$t.json"
    RAMQP_BENCH_WS_CLIENT=tungstenite $c target/release/latency --url ws://127.0.0.1:5802 --pid $pid \
        --address /queues/lat-wst >"$out/transient-wstung-$t.json"
done
