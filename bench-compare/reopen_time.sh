#!/bin/bash
# reopen_time.sh ROOT BINDIR [ID]: time how long node ID (default 3) of a
# kept `many_queues` data set (ROOT, from `many_queues --keep --base-port
# 9100`) takes to open its groups from disk, started alone with the
# ramqp-brokerd of BINDIR. Prints the open seconds (from the process's
# start to the end of the opening: the start-up hold's log line minus its
# after_ms) and the process's CPU seconds up to the end of the hold, then
# stops the node. Start the other nodes first (same flags) to time it
# with its peers up. Wrap it in `flock /work/big.lock` on a shared machine.
set -euo pipefail
ROOT=$1; BIN=$2; ID=${3:-3}
LOG=$ROOT/node$ID/log
touch "$LOG"
n0=$(wc -l < "$LOG")
peers=()
for p in 1 2 3; do [ "$p" != "$ID" ] && peers+=(--peer "$p=127.0.0.1:$((9110 + p - 1))"); done
t0=$(date +%s.%N)
"$BIN/ramqp-brokerd" --node-id "$ID" --listen "127.0.0.1:$((9100 + ID - 1))" \
    --fabric-listen "127.0.0.1:$((9110 + ID - 1))" --http-listen "127.0.0.1:$((9120 + ID - 1))" \
    --data-dir "$ROOT/node$ID/data" "${peers[@]}" </dev/null >/dev/null 2>>"$LOG" &
pid=$!
line=""
for _ in $(seq 1 3000); do
    line=$(tail -n +$((n0 + 1)) "$LOG" | grep -m1 "start-up hold over" || true)
    [ -n "$line" ] && break
    sleep 0.1
done
[ -z "$line" ] && { echo "no end of the start-up hold within 300 s" >&2; kill -9 $pid; exit 1; }
cpu=$(awk '{print ($14 + $15) / 100}' /proc/$pid/stat)
after=$(echo "$line" | grep -o 'after_ms=[0-9]*' | cut -d= -f2)
tend=$(date -d "$(echo "$line" | awk '{print $1}')" +%s.%N)
echo "open_s=$(echo "$tend - $after / 1000 - $t0" | bc -l | cut -c1-6) cpu_s_to_hold_end=$cpu"
kill -INT $pid 2>/dev/null || true
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
kill -9 $pid 2>/dev/null || true
