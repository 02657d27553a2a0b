#!/bin/sh
# Broker instructions per message over TCP and WebSocket: ramqp-brokerd
# (release) under callgrind, driven by the latency bin (not measured);
# per message = (Ir(N2) - Ir(N1)) / (N2 - N1). Run from the repository root.
set -eu
one() { # transport args... -> total Ir of one broker run
    transport=$1; shift
    dir=$(mktemp -d)
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
        target/release/ramqp-brokerd --listen 127.0.0.1:5811 --ws-listen 127.0.0.1:5812 \
        --data-dir "$dir/data" >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        if python3 -c 'import socket;[socket.create_connection(("127.0.0.1",p),0.2).close() for p in (5811,5812)]' 2>/dev/null; then break; fi
        sleep 0.1
    done
    if [ "$transport" = tcp ]; then url=amqp://127.0.0.1:5811; else url=ws://127.0.0.1:5812; fi
    target/release/latency --url $url --timeout-ms 60000 "$@" >/dev/null
    kill -TERM $pid; wait $pid || true
    grep '^summary:' "$dir/cg.out" | awk '{print $2}'
    rm -rf "$dir"
}
per() { # label transport n1 n2 args(with N) ...
    label=$1 transport=$2 n1=$3 n2=$4; shift 4
    a=$(one $transport $(echo "$@" | sed "s/NN/$n1/"))
    b=$(one $transport $(echo "$@" | sed "s/NN/$n2/"))
    echo "$label $transport $a -> $b = $(( (b - a) / (n2 - n1) )) per message"
}
per closed-loop tcp 1000 4000 --confirm --lat-n NN --warmup 0 --n 0
per closed-loop ws  1000 4000 --confirm --lat-n NN --warmup 0 --n 0
per blast tcp 5000 20000 --lat-n 0 --warmup 0 --n NN
per blast ws  5000 20000 --lat-n 0 --warmup 0 --n NN
