#!/bin/sh
# Issue 16's no-policy goal: the transient closed loop and the blast before
# (BASE: the release binaries of a5883c5, copied aside) and after (NEW: this
# commit's), one broker process each, ROUNDS (8) rounds alternating base/new, 256 B,
# the bench's fe2o3 client. Run from the repository root after
#   cargo build --release -p ramqp-brokerd -p ramqp-bench-compare
# with BASE=<dir holding the old ramqp-brokerd and latency>.
set -eu
out=${OUT:-docs/benchmarks/results/2026-12-03-policies}
base=${BASE:?set BASE to the directory of the baseline binaries}
mkdir -p "$out"
run() { # name brokerd latency port
    dir=$(mktemp -d)
    "$2" --listen 127.0.0.1:$4 --data-dir "$dir/data" >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        if python3 -c "import socket;socket.create_connection(('127.0.0.1',$4),0.2).close()" 2>/dev/null; then break; fi
        sleep 0.1
    done
    "$3" --url amqp://127.0.0.1:$4 --pid $pid --address /queues/lat >"$out/$1.json"
    kill $pid; wait $pid 2>/dev/null || true; rm -rf "$dir"
}
for t in $(seq "${ROUNDS:-8}"); do
    run base-$t "$base/ramqp-brokerd" "$base/latency" 5821
    run new-$t target/release/ramqp-brokerd target/release/latency 5822
done
