#!/usr/bin/env bash
# Per-message cost of the broker, independent of machine noise: user-space
# instructions (valgrind --tool=callgrind) and heap allocations (valgrind
# --tool=dhat) per publish+deliver+accept, for a transient and a quorum
# queue (bench-compare/README.md, "Per-message cost").
#
#   bench-compare/permsg.sh                      # N1 2,000 / N2 12,000, 256 B bodies
#   bench-compare/permsg.sh --n1 1000 --n2 5000 --scenarios transient --tools callgrind
#
# Method: the real ramqp-brokerd release binary runs under valgrind; the
# `latency` bin (raw client, its own process, not measured) drives N
# messages through it, closed loop, one in flight, each publish confirmed
# (`accepted`) and each delivery accepted by the consumer (the -batch
# scenarios: the bin's blast, many confirms in flight, then a drain). The broker is
# started, driven with N1 and stopped, then the same with N2; everything that
# does not depend on N (start-up, connections, attaches, shutdown) cancels in
#   per message = (total(N2) - total(N1)) / (N2 - N1).
#
# Results: a table on stdout and docs/benchmarks/results/<UTC>/permsg.json
# (or --out DIR), with the raw totals of every run and the valgrind logs.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bench-compare/permsg.sh [--n1 N] [--n2 N] [--payload BYTES] [--out DIR]
                               [--scenarios LIST] [--tools LIST] [--no-build]
  --n1, --n2     messages of the short and the long run (default 2000, 12000)
  --payload      body bytes (default 256)
  --scenarios    comma-separated subset of transient,quorum,transient-batch,
                 quorum-batch (default transient,quorum: closed loop, one in
                 flight; -batch: N publishes with PERMSG_BATCH_WINDOW (100)
                 confirms in flight while the consumer holds no credit, then
                 drained with credit 1,000)
  --tools        comma-separated subset of callgrind,dhat (default both)
  --idle S       a third run per (scenario, tool): N1 messages, then S
                 seconds idle (default 20; 0: skip), to estimate how much of
                 the per-message figure is time-driven (timers), not per message
  --out DIR      results folder (default docs/benchmarks/results/<UTC date-time>)
  --no-build     use the binaries already in $CARGO_TARGET_DIR/release
Environment: CARGO_TARGET_DIR (build dir), VALGRIND (default /usr/bin/valgrind),
PERMSG_TIMEOUT_MS (the latency bin's limit on every single wait, default 60000),
PERMSG_KEEP_PROFILES=1 (keep the callgrind and dhat outputs under permsg-work/).
EOF
}

N1=2000
N2=12000
PAYLOAD=256
SCENARIOS=transient,quorum
BATCH_WINDOW=${PERMSG_BATCH_WINDOW:-100}
IDLE=20
TOOLS=callgrind,dhat
OUT=
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
    --n1) N1=$2; shift ;;
    --n2) N2=$2; shift ;;
    --payload) PAYLOAD=$2; shift ;;
    --scenarios) SCENARIOS=$2; shift ;;
    --tools) TOOLS=$2; shift ;;
    --idle) IDLE=$2; shift ;;
    --out) OUT=$2; shift ;;
    --no-build) BUILD=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
if ! [ "$N2" -gt "$N1" ] 2>/dev/null; then
    echo "--n2 ($N2) must be larger than --n1 ($N1)" >&2
    exit 2
fi

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
cd "$REPO"
VALGRIND=${VALGRIND:-/usr/bin/valgrind}
WAIT_MS=${PERMSG_TIMEOUT_MS:-60000}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=${OUT:-$REPO/docs/benchmarks/results/$STAMP}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/permsg-work
mkdir -p "$WORK"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
BIN=$TARGET/release

log() { echo "[permsg.sh $(date -u +%H:%M:%S)] $*" >&2; }

if [ ! -x "$VALGRIND" ]; then
    echo "valgrind not found at $VALGRIND (apt-get install valgrind)" >&2
    exit 1
fi
if [ "$BUILD" = 1 ]; then
    log "building (release) into $TARGET"
    cargo build --release -p ramqp-brokerd -p ramqp-bench-compare --bin ramqp-brokerd --bin latency
fi

# The source tree the binaries were built from (taken before the runs).
commit=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=false
if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]; then dirty=true; fi

BROKER_PID=
cleanup() {
    if [ -n "$BROKER_PID" ]; then
        kill -TERM "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

# run_once SCENARIO TOOL N [IDLE_S]: sets RESULT to the tool's total
# (instructions, or "blocks bytes" for dhat) and DRIVE_SECS to the seconds
# the latency bin ran; with IDLE_S the broker then idles that long before
# it is stopped. Logs under $WORK/SCENARIO-TOOL-N[-idle].*
run_once() {
    local scenario=$1 tool=$2 n=$3 idle=${4:-}
    local name=$scenario-$tool-$n${idle:+-idle}
    local t0 t1
    local data=$WORK/$name.data out=$WORK/$name.stdout vlog=$WORK/$name.valgrind.log
    local address addr i flags drive
    # Closed loop, one in flight; or (-batch) the latency bin's blast: N
    # publishes with $BATCH_WINDOW confirms in flight, then drained.
    drive=(--lat-n "$n" --warmup 0 --n 0)
    case "$scenario" in
    transient) address=/queues/permsg ;;
    quorum) address=/quorum/permsg ;;
    transient-batch) address=/queues/permsg drive=(--lat-n 0 --n "$n" --window "$BATCH_WINDOW") ;;
    quorum-batch) address=/quorum/permsg drive=(--lat-n 0 --n "$n" --window "$BATCH_WINDOW") ;;
    *) echo "unknown scenario: $scenario" >&2; return 1 ;;
    esac
    case "$tool" in
    callgrind) flags=(--tool=callgrind "--callgrind-out-file=$WORK/$name.callgrind.out") ;;
    dhat) flags=(--tool=dhat "--dhat-out-file=$WORK/$name.dhat.json") ;;
    *) echo "unknown tool: $tool" >&2; return 1 ;;
    esac
    rm -rf "$data"
    "$VALGRIND" "${flags[@]}" "--log-file=$vlog" \
        "$BIN/ramqp-brokerd" --listen 127.0.0.1:0 --data-dir "$data" \
        >"$out" 2>"$WORK/$name.broker.log" &
    BROKER_PID=$!
    addr=
    for i in $(seq 1 1200); do
        addr=$(sed -n 's/^ramqp-brokerd listening on //p' "$out")
        if [ -n "$addr" ]; then break; fi
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then break; fi
        sleep 0.1
    done
    if [ -z "$addr" ]; then
        log "$name: ramqp-brokerd did not start under valgrind (see $WORK/$name.broker.log, $vlog)"
        return 1
    fi
    t0=$(date +%s.%N)
    if ! timeout 1800 "$BIN/latency" --client raw --url "amqp://$addr" --address "$address" \
        --confirm "${drive[@]}" --trials 1 --payload "$PAYLOAD" \
        --timeout-ms "$WAIT_MS" >"$WORK/$name.latency.json" 2>"$WORK/$name.latency.err"; then
        log "$name: the latency bin failed (see $WORK/$name.latency.err)"
        return 1
    fi
    t1=$(date +%s.%N)
    DRIVE_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    if [ -n "$idle" ]; then sleep "$idle"; fi
    kill -TERM "$BROKER_PID"
    for i in $(seq 1 6000); do
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then break; fi
        sleep 0.1
    done
    if kill -0 "$BROKER_PID" 2>/dev/null; then
        log "$name: ramqp-brokerd did not exit within 600 s of SIGTERM"
        return 1
    fi
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
    rm -rf "$data"
    case "$tool" in
    callgrind)
        # "totals:" (or "summary:") line of the callgrind output: Ir.
        RESULT=$(awk '/^(totals|summary):/ {print $2; exit}' "$WORK/$name.callgrind.out")
        ;;
    dhat)
        # "==pid== Total:     1,234 bytes in 56 blocks"
        RESULT=$(sed -n 's/.*Total: *\([0-9,]*\) bytes in \([0-9,]*\) blocks.*/\2 \1/p' "$vlog" | tr -d , | head -n 1)
        ;;
    esac
}

IFS=, read -r -a SCENARIO_LIST <<<"$SCENARIOS"
IFS=, read -r -a TOOL_LIST <<<"$TOOLS"
declare -A TOTAL DRIVE
for scenario in "${SCENARIO_LIST[@]}"; do
    for tool in "${TOOL_LIST[@]}"; do
        runs=("$N1" "$N2")
        if [ "$IDLE" != 0 ]; then runs+=(idle); fi
        for run in "${runs[@]}"; do
            t0=$(date +%s)
            RESULT=
            if [ "$run" = idle ]; then
                log "$scenario, $tool, $N1 messages + $IDLE s idle"
                run_once "$scenario" "$tool" "$N1" "$IDLE" || exit 1
            else
                log "$scenario, $tool, $run messages"
                run_once "$scenario" "$tool" "$run" || exit 1
            fi
            value=$RESULT
            if [ -z "$value" ]; then
                log "$scenario $tool $run: no total found"
                exit 1
            fi
            TOTAL[$scenario.$tool.$run]=$value
            DRIVE[$scenario.$tool.$run]=$DRIVE_SECS
            log "$scenario, $tool, $run: total $value, driven for $DRIVE_SECS s ($(($(date +%s) - t0)) s)"
        done
    done
done

# per_msg A B -> (B - A) / (N2 - N1), one decimal
per_msg() { awk -v a="$1" -v b="$2" -v d=$((N2 - N1)) 'BEGIN { printf "%.1f", (b - a) / d }'; }
# time_share A IDLE D1 D2 -> the idle rate (IDLE - A) / $IDLE s times the
# extra seconds the N2 run was driven, per extra message: the estimated
# time-driven (timer) part of the per-message figure
time_share() {
    awk -v a="$1" -v i="$2" -v d1="$3" -v d2="$4" -v s="$IDLE" -v d=$((N2 - N1)) \
        'BEGIN { printf "%.1f", (i - a) / s * (d2 - d1) / d }'
}

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //' || true)

{
    printf '| queue | instructions / msg | allocations / msg | allocated bytes / msg | instructions: (N1 + %s s idle) - N1 | allocations: (N1 + %s s idle) - N1 |\n' "$IDLE" "$IDLE"
    printf '|---|---:|---:|---:|---:|---:|\n'
} >"$WORK/table.md"
json_rows=()
for scenario in "${SCENARIO_LIST[@]}"; do
    ir='n/a' blocks='n/a' bytes='n/a' ir_time='n/a' blocks_time='n/a' ir_idle='n/a' blocks_idle='n/a'
    row="\"queue\": \"$scenario\""
    if [ -n "${TOTAL[$scenario.callgrind.$N1]:-}" ]; then
        a=${TOTAL[$scenario.callgrind.$N1]} b=${TOTAL[$scenario.callgrind.$N2]}
        ir=$(per_msg "$a" "$b")
        row+=", \"instructions_per_msg\": $ir, \"instructions_total\": {\"n1\": $a, \"n2\": $b"
        if [ -n "${TOTAL[$scenario.callgrind.idle]:-}" ]; then
            i=${TOTAL[$scenario.callgrind.idle]}
            ir_time=$(time_share "$a" "$i" "${DRIVE[$scenario.callgrind.$N1]}" "${DRIVE[$scenario.callgrind.$N2]}")
            row+=", \"n1_then_idle\": $i"
            ir_idle=$((i - a))
        fi
        row+="}, \"instructions_per_msg_time_driven_est\": $([ "$ir_time" = n/a ] && echo null || echo "$ir_time")"
        row+=", \"drive_secs\": {\"n1\": ${DRIVE[$scenario.callgrind.$N1]}, \"n2\": ${DRIVE[$scenario.callgrind.$N2]}}"
    fi
    if [ -n "${TOTAL[$scenario.dhat.$N1]:-}" ]; then
        read -r a_blocks a_bytes <<<"${TOTAL[$scenario.dhat.$N1]}"
        read -r b_blocks b_bytes <<<"${TOTAL[$scenario.dhat.$N2]}"
        blocks=$(per_msg "$a_blocks" "$b_blocks")
        bytes=$(per_msg "$a_bytes" "$b_bytes")
        row+=", \"allocations_per_msg\": $blocks, \"allocated_bytes_per_msg\": $bytes"
        row+=", \"allocations_total\": {\"n1\": $a_blocks, \"n2\": $b_blocks}"
        row+=", \"allocated_bytes_total\": {\"n1\": $a_bytes, \"n2\": $b_bytes}"
        if [ -n "${TOTAL[$scenario.dhat.idle]:-}" ]; then
            read -r i_blocks i_bytes <<<"${TOTAL[$scenario.dhat.idle]}"
            blocks_time=$(time_share "$a_blocks" "$i_blocks" "${DRIVE[$scenario.dhat.$N1]}" "${DRIVE[$scenario.dhat.$N2]}")
            row+=", \"allocations_n1_then_idle\": $i_blocks"
            blocks_idle=$((i_blocks - a_blocks))
        fi
        row+=", \"allocations_per_msg_time_driven_est\": $([ "$blocks_time" = n/a ] && echo null || echo "$blocks_time")"
        row+=", \"dhat_drive_secs\": {\"n1\": ${DRIVE[$scenario.dhat.$N1]}, \"n2\": ${DRIVE[$scenario.dhat.$N2]}}"
    fi
    printf '| %s | %s | %s | %s | %s | %s |\n' "$scenario" "$ir" "$blocks" "$bytes" "$ir_idle" "$blocks_idle" >>"$WORK/table.md"
    json_rows+=("{$row}")
done

rows=$(IFS=,; echo "${json_rows[*]}")
cat >"$OUT/permsg.json" <<EOF
{
  "bench": "permsg",
  "what": "broker-side cost per publish+deliver+accept: (total(N2) - total(N1)) / (N2 - N1), ramqp-brokerd under valgrind, driven by the latency bin (raw client, closed loop, 1 in flight, --confirm)",
  "timestamp": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "git_commit": "$commit",
  "git_dirty": $dirty,
  "cpu": "$cpu",
  "valgrind": "$("$VALGRIND" --version)",
  "instructions": "callgrind Ir (user space, all threads of the broker process)",
  "allocations": "dhat Total blocks: heap blocks allocated over the broker process's life",
  "n1": $N1,
  "n2": $N2,
  "payload_bytes": $PAYLOAD,
  "client": "latency --client raw --confirm: closed loop --n 0 --warmup 0 --lat-n N; -batch scenarios --lat-n 0 --n N --window $BATCH_WINDOW",
  "batch_window": $BATCH_WINDOW,
  "idle_secs": $IDLE,
  "time_driven_est": "*_time_driven_est fields: idle rate of the broker after N1 messages ((total(N1 + idle) - total(N1)) / idle_secs) times (drive_secs(N2) - drive_secs(N1)) / (N2 - N1): the part of the per-message figure that timers would account for",
  "results": [$rows]
}
EOF
cp "$WORK/table.md" "$OUT/permsg.md"
# Keep the small logs; drop the large profiles (unless PERMSG_KEEP_PROFILES=1,
# for callgrind_annotate and the dhat json) and the data dirs.
if [ "${PERMSG_KEEP_PROFILES:-0}" != 1 ]; then
    rm -f "$WORK"/*.callgrind.out "$WORK"/*.dhat.json
fi
rm -rf "$WORK"/*.data
log "wrote $OUT/permsg.json"
dirty_note=
if [ "$dirty" = true ]; then dirty_note=", uncommitted changes"; fi
echo "Per message (N1 $N1, N2 $N2, $PAYLOAD B bodies, commit ${commit:0:7}$dirty_note):"
cat "$WORK/table.md"
