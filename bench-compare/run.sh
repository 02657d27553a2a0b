#!/usr/bin/env bash
# Latency + blast + throughput comparison runner: ramqp in-process, one
# ramqp-brokerd process on loopback, and RabbitMQ 3.10 (AMQP 1.0 plugin):
# the `latency` bin with the raw and the fe2o3 client, the `rig` bin with the
# raw client (BENCH_RIG_CLIENTS), then a summary table
# (bench-compare/README.md, "The runner").
#
#   bench-compare/run.sh                  # full run, 3 trials per scenario
#   bench-compare/run.sh --quick          # small N, 1 trial (< 5 min)
#   bench-compare/run.sh --no-rabbitmq --out /tmp/res
#   bench-compare/run.sh --quick --permsg # + per-message cost under valgrind
#   BENCH_DEPTH=1 bench-compare/run.sh    # + the `depth` bin (one deep queue)
#
# Results: docs/benchmarks/results/<UTC date-time>/ (or --out DIR):
# machine.json, <leg>-<scenario>-<client>.json and
# rig-<leg>-<queue>-<client>.json and rate-<leg>-<queue>-<client>.json (the
# rig's open loop at 1,000 msg/s) (+ .err), summary.md (+ SVG charts when
# built with the `charts` feature), permsg.json with --permsg; with --depth
# depth-<leg>-quorum-raw.json and their charts depth-rss.svg, depth-p999.svg
# (`summarize depth`, tabulated at the end of summary.md).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bench-compare/run.sh [--quick] [--no-rabbitmq] [--no-charts]
                            [--trials N] [--out DIR] [--legs LIST]
                            [--rig-clients LIST] [--no-rig] [--permsg]
                            [--depth]
  --quick        small --n/--lat-n/--warmup, short rig runs at 256 B only,
                 1 trial (also BENCH_QUICK=1)
  --no-rabbitmq  skip the RabbitMQ leg (also BENCH_NO_RABBITMQ=1)
  --no-charts    build without the `charts` feature (no SVG charts)
  --trials N     trials per scenario (default 3; 1 with --quick)
  --out DIR      results folder (default docs/benchmarks/results/<UTC date-time>)
  --legs LIST    comma-separated subset of inproc,brokerd,cluster,rabbitmq
                 (cluster: the 3-node cluster of deploy/local-cluster.sh,
                 quorum queue via its leader and via a follower,
                 bench-compare/cluster.sh)
  --rig-clients LIST  clients of the rig runs: raw (default), fe2o3 or
                 raw,fe2o3 (also BENCH_RIG_CLIENTS)
  --no-rig       skip the rig (throughput) runs
  --permsg       also run bench-compare/permsg.sh (instructions and
                 allocations per message under valgrind; slow, never part
                 of --quick on its own)
  --depth        also run the `depth` bin (one queue filled in stages, then
                 drained) on the inproc, brokerd and rabbitmq legs, quorum
                 queues only (also BENCH_DEPTH=1); --quick: checkpoints
                 0,10k,50k
Environment: CARGO_TARGET_DIR (build dir), BENCH_RMQ_PORT (5699),
BENCH_RMQ_MGMT_PORT (15699), BENCH_RMQ_DIST_PORT (25699), BENCH_KEEP_WORK=1
(keep broker data dirs and logs under <out>/work).
EOF
}

QUICK=${BENCH_QUICK:-0}
NO_RMQ=${BENCH_NO_RABBITMQ:-0}
CHARTS=1
TRIALS=
OUT=
LEGS=inproc,brokerd,cluster,rabbitmq
RIG_CLIENTS=${BENCH_RIG_CLIENTS:-raw}
PERMSG=0
DEPTH=${BENCH_DEPTH:-0}
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --no-rabbitmq) NO_RMQ=1 ;;
    --no-charts) CHARTS=0 ;;
    --trials) TRIALS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --legs) LEGS=$2; shift ;;
    --rig-clients) RIG_CLIENTS=$2; shift ;;
    --no-rig) RIG_CLIENTS= ;;
    --permsg) PERMSG=1 ;;
    --depth) DEPTH=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
cd "$REPO"
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=${OUT:-$REPO/docs/benchmarks/results/$STAMP}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work
mkdir -p "$WORK"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
BIN=$TARGET/release

if [ "$QUICK" = 1 ]; then
    TRIALS=${TRIALS:-1}
    SIZE_FLAGS=(--n 2000 --lat-n 500 --warmup 200)
    RIG_FLAGS=(--sizes 256 --warmup 1 --duration 3)
    RATE_FLAGS=(--sizes 256 --warmup 1 --duration 3)
    RUN_TIMEOUT=120
    DEPTH_FLAGS=(--checkpoints 0,10k,50k --probe 500)
else
    TRIALS=${TRIALS:-3}
    SIZE_FLAGS=()
    RIG_FLAGS=(--sizes 64,256,1k,8k --warmup 2 --duration 10)
    RATE_FLAGS=(--sizes 256 --warmup 2 --duration 10)
    RUN_TIMEOUT=1800
    DEPTH_FLAGS=()
fi
IFS=, read -r -a RIG_CLIENT_LIST <<<"$RIG_CLIENTS"
if [ "$NO_RMQ" = 1 ]; then
    LEGS=$(echo ",$LEGS," | sed 's/,rabbitmq,/,/; s/^,//; s/,$//')
fi

log() { echo "[run.sh $(date -u +%H:%M:%S)] $*" >&2; }

# --- cleanup: stop whatever this script started --------------------------
BROKERD_PID=
RMQ_STARTED=0
cleanup() {
    if [ -n "$BROKERD_PID" ]; then
        kill -TERM "$BROKERD_PID" 2>/dev/null || true
        wait "$BROKERD_PID" 2>/dev/null || true
    fi
    if [ "$RMQ_STARTED" = 1 ]; then rmq_stop || true; fi
    if [ "${BENCH_KEEP_WORK:-0}" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

# --- 1. build -------------------------------------------------------------
FEATURES=()
if [ "$CHARTS" = 1 ]; then FEATURES=(--features ramqp-bench-compare/charts); fi
log "building (release) into $TARGET"
cargo build --release -p ramqp-bench-compare -p ramqp-brokerd "${FEATURES[@]}"

# --- 2. machine -----------------------------------------------------------
json_str() {
    # JSON string literal of $1 (control characters become spaces).
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    s=$(printf '%s' "$s" | tr '\n\t\r' '   ')
    printf '"%s"' "$s"
}
json_num() { if [ -n "$1" ]; then printf '%s' "$1"; else printf 'null'; fi; }

# floor_p50 KEY: p50_us of section KEY of floor.json.
floor_p50() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["p50_us"])' "$OUT/floor.json" "$1"
}

record_machine() {
    local cpu cores kernel mem disk dfline commit dirty fsync_us fsync3_us rtt rmq_ver
    cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //' || true)
    cores=$(nproc)
    kernel=$(uname -r)
    mem=$(awk '/MemTotal/ {print $2}' /proc/meminfo)
    disk=$(lsblk -d -n -o NAME,MODEL,ROTA,SIZE,TYPE 2>/dev/null | tr -s ' ' | paste -sd ';' - || true)
    dfline=$(df -hT "$OUT" 2>/dev/null | tail -n 1 | tr -s ' ' || true)
    commit=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
    dirty=false
    if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]; then dirty=true; fi
    # The floor: 256-byte appends + fdatasync on the filesystem that holds
    # the results and the brokers' data dirs (1 writer, and 3 at once as a
    # 3-node cluster on one disk), and 256-byte loopback TCP round trips
    # (bench-compare/src/bin/floor.rs). p50s go into machine.json, the whole
    # report into floor.json.
    "$BIN/floor" --dir "$WORK" >"$OUT/floor.json"
    fsync_us=$(floor_p50 fsync_append_256b)
    fsync3_us=$(floor_p50 fsync_append_256b_3_concurrent)
    rtt=$(floor_p50 loopback_rtt_256b)
    rmq_ver=$(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || true)
    {
        printf '{\n'
        printf '  "timestamp": %s,\n' "$(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"
        printf '  "cpu_model": %s,\n' "$(json_str "$cpu")"
        printf '  "logical_cpus": %s,\n' "$cores"
        printf '  "kernel": %s,\n' "$(json_str "$kernel")"
        printf '  "mem_total_kib": %s,\n' "$(json_num "$mem")"
        printf '  "disks": %s,\n' "$(json_str "$disk")"
        printf '  "results_fs": %s,\n' "$(json_str "$dfline")"
        printf '  "fsync_append_256b_us": %s,\n' "$(json_num "$fsync_us")"
        printf '  "fsync_append_256b_3_concurrent_us": %s,\n' "$(json_num "$fsync3_us")"
        printf '  "fsync_method": %s,\n' "$(json_str "floor.json: 500 x write(256 B) + fdatasync, p50; 3_concurrent: 3 threads on 3 files")"
        printf '  "loopback_rtt_us": %s,\n' "$(json_num "$rtt")"
        printf '  "loopback_rtt_method": %s,\n' "$(json_str "floor.json: 5,000 TCP_NODELAY echoes of 256 B over 127.0.0.1, p50")"
        printf '  "git_commit": %s,\n' "$(json_str "$commit")"
        printf '  "git_dirty": %s,\n' "$dirty"
        printf '  "rabbitmq_server": %s,\n' "$(json_str "$rmq_ver")"
        printf '  "quick": %s,\n' "$([ "$QUICK" = 1 ] && echo true || echo false)"
        printf '  "trials": %s,\n' "$TRIALS"
        printf '  "size_flags": %s,\n' "$(json_str "${SIZE_FLAGS[*]:-defaults}")"
        printf '  "rig_flags": %s,\n' "$(json_str "${RIG_FLAGS[*]}")"
        printf '  "rate_flags": %s,\n' "$(json_str "--rate 1000 ${RATE_FLAGS[*]}")"
        printf '  "rig_clients": %s\n' "$(json_str "$RIG_CLIENTS")"
        printf '}\n'
    } >"$OUT/machine.json"
    log "machine: $cpu, $cores cpus, kernel $kernel, fsync p50 ${fsync_us} us (3 at once: ${fsync3_us} us), loopback rtt p50 ${rtt} us"
}
record_machine

# --- 3. legs --------------------------------------------------------------
FAILED=()
# run_bin NAME BIN ARGS...: one run of a bench bin -> NAME.json/.err
run_bin() {
    local name=$1 bin=$2
    shift 2
    log "$name: $bin $*"
    if ! timeout "$RUN_TIMEOUT" "$BIN/$bin" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
        log "$name FAILED (see $OUT/$name.err)"
        FAILED+=("$name")
    fi
}
# run_one LEG SCENARIO CLIENT ARGS...: one latency run -> LEG-SCENARIO-CLIENT.json/.err
run_one() {
    local leg=$1 scenario=$2 client=$3
    shift 3
    run_bin "$leg-$scenario-$client" latency --client "$client" --trials "$TRIALS" \
        "${SIZE_FLAGS[@]}" "$@"
}
# rig_one LEG QUEUE CLIENT ARGS...: one rig run -> rig-LEG-QUEUE-CLIENT.json/.err
# (1 publisher x window 1,000 confirmed, 1 consumer x credit 1,000)
rig_one() {
    local leg=$1 queue=$2 client=$3
    shift 3
    run_bin "rig-$leg-$queue-$client" rig --client "$client" --trials "$TRIALS" \
        "${RIG_FLAGS[@]}" "$@"
}

# rate_one LEG QUEUE CLIENT ARGS...: the rig's open loop at 1,000 msg/s
# (latency from the intended send time) -> rate-LEG-QUEUE-CLIENT.json/.err
rate_one() {
    local leg=$1 queue=$2 client=$3
    shift 3
    run_bin "rate-$leg-$queue-$client" rig --client "$client" --trials "$TRIALS" \
        --rate 1000 "${RATE_FLAGS[@]}" "$@"
}

# depth_one LEG QUEUE ARGS...: one `depth` run (--depth) -> depth-LEG-QUEUE-raw.json/.err
depth_one() {
    local leg=$1 queue=$2
    shift 2
    if [ "$DEPTH" = 1 ]; then
        run_bin "depth-$leg-$queue-raw" depth "${DEPTH_FLAGS[@]}" "$@"
    fi
}

scenario_flags() {
    # scenario_flags SCENARIO CLASSIC_ADDR QUORUM_ADDR -> flags on stdout
    case "$1" in
    pre) echo "--address $2" ;;
    confirm) echo "--confirm --address $2" ;;
    quorum) echo "--confirm --address $3" ;;
    esac
}

SCENARIOS=(pre confirm quorum)
CLIENTS=(raw fe2o3)

leg_inproc() {
    local s c flags
    for s in "${SCENARIOS[@]}"; do
        for c in "${CLIENTS[@]}"; do
            read -r -a flags <<<"$(scenario_flags "$s" /queues/lat /quorum/lat)"
            run_one inproc "$s" "$c" "${flags[@]}"
        done
    done
    for c in "${RIG_CLIENT_LIST[@]}"; do
        rig_one inproc transient "$c" --address /queues/rig
        rig_one inproc quorum "$c" --address /quorum/rig
        rate_one inproc transient "$c" --address /queues/rate
        rate_one inproc quorum "$c" --address /quorum/rate
    done
    depth_one inproc quorum --address /quorum/depth
}

brokerd_start() {
    local dir=$WORK/brokerd-$1 out=$WORK/brokerd-$1.out i
    rm -rf "$dir"
    BROKERD_DIR=$dir
    "$BIN/ramqp-brokerd" --listen 127.0.0.1:0 --data-dir "$dir" >"$out" 2>"$WORK/brokerd-$1.log" &
    BROKERD_PID=$!
    BROKERD_ADDR=
    for i in $(seq 1 200); do
        BROKERD_ADDR=$(sed -n 's/^ramqp-brokerd listening on //p' "$out")
        if [ -n "$BROKERD_ADDR" ]; then return 0; fi
        if ! kill -0 "$BROKERD_PID" 2>/dev/null; then break; fi
        sleep 0.1
    done
    log "ramqp-brokerd did not start: $(tail -n 5 "$WORK/brokerd-$1.log")"
    return 1
}
brokerd_stop() {
    kill -TERM "$BROKERD_PID" 2>/dev/null || true
    wait "$BROKERD_PID" 2>/dev/null || true
    BROKERD_PID=
    # A leg's data can be GBs (rig runs of quorum queues): drop it now
    # rather than at the end of the pass, unless asked to keep it.
    if [ "${BENCH_KEEP_WORK:-0}" != 1 ] && [ -n "${BROKERD_DIR:-}" ]; then rm -rf "$BROKERD_DIR"; fi
    BROKERD_DIR=
}

leg_brokerd() {
    # A fresh process and data dir for every (scenario, client) run.
    local s c flags
    for s in "${SCENARIOS[@]}"; do
        for c in "${CLIENTS[@]}"; do
            if ! brokerd_start "$s-$c"; then FAILED+=("brokerd-$s-$c"); continue; fi
            read -r -a flags <<<"$(scenario_flags "$s" /queues/lat /quorum/lat)"
            run_one brokerd "$s" "$c" --url "amqp://$BROKERD_ADDR" --pid "$BROKERD_PID" "${flags[@]}"
            brokerd_stop
        done
    done
    local q
    for c in "${RIG_CLIENT_LIST[@]}"; do
        for q in transient quorum; do
            if ! brokerd_start "rig-$q-$c"; then FAILED+=("rig-brokerd-$q-$c"); continue; fi
            rig_one brokerd "$q" "$c" --url "amqp://$BROKERD_ADDR" --pid "$BROKERD_PID" \
                --address "$([ "$q" = quorum ] && echo /quorum/rig || echo /queues/rig)"
            brokerd_stop
            # A fresh process again: its RSS is the open loop's own.
            if ! brokerd_start "rate-$q-$c"; then FAILED+=("rate-brokerd-$q-$c"); continue; fi
            rate_one brokerd "$q" "$c" --url "amqp://$BROKERD_ADDR" --pid "$BROKERD_PID" \
                --address "$([ "$q" = quorum ] && echo /quorum/rate || echo /queues/rate)"
            brokerd_stop
        done
    done
    if [ "$DEPTH" = 1 ]; then
        if brokerd_start depth-quorum; then
            depth_one brokerd quorum --url "amqp://$BROKERD_ADDR" --pid "$BROKERD_PID" \
                --data-dir "$BROKERD_DIR" --address /quorum/depth
            brokerd_stop
        else
            FAILED+=(depth-brokerd-quorum)
        fi
    fi
}

RMQ_PORT=${BENCH_RMQ_PORT:-5699}
RMQ_MGMT=${BENCH_RMQ_MGMT_PORT:-15699}
RMQ_DIST=${BENCH_RMQ_DIST_PORT:-25699}
RMQ_DIR=$WORK/rabbitmq
RMQ_NODE=ramqpbench@localhost
rmq_env() {
    env RABBITMQ_CONFIG_FILE="$RMQ_DIR/rabbitmq.conf" \
        RABBITMQ_ADVANCED_CONFIG_FILE="$RMQ_DIR/advanced.config" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ_DIR/enabled_plugins" \
        RABBITMQ_MNESIA_BASE="$RMQ_DIR/mnesia" RABBITMQ_LOG_BASE="$RMQ_DIR/log" \
        RABBITMQ_PID_FILE="$RMQ_DIR/pid" RABBITMQ_NODENAME="$RMQ_NODE" \
        RABBITMQ_DIST_PORT="$RMQ_DIST" HOME="$RMQ_DIR/home" "$@"
}
rmq_stop() {
    if ! rmq_env timeout 60 /usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RMQ_NODE" stop "$RMQ_DIR/pid" >/dev/null 2>&1; then
        # Fallback: the node's own pid (it was started by this script).
        if [ -s "$RMQ_DIR/pid" ]; then kill -KILL "$(cat "$RMQ_DIR/pid")" 2>/dev/null || true; fi
    fi
    RMQ_STARTED=0
}
rmq_start() {
    if ! command -v rabbitmq-server >/dev/null 2>&1; then
        log "installing rabbitmq-server"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q rabbitmq-server >&2 || return 1
    fi
    if [ "$(id -u)" != 0 ]; then log "RabbitMQ leg needs root"; return 1; fi
    rm -rf "$RMQ_DIR"
    mkdir -p "$RMQ_DIR/home" "$RMQ_DIR/log" "$RMQ_DIR/mnesia"
    cat >"$RMQ_DIR/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$RMQ_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $RMQ_MGMT
amqp1_0.default_user = guest
loopback_users = none
EOF
    echo '[].' >"$RMQ_DIR/advanced.config"
    echo '[rabbitmq_amqp1_0,rabbitmq_management].' >"$RMQ_DIR/enabled_plugins"
    log "starting RabbitMQ ($RMQ_NODE, amqp 127.0.0.1:$RMQ_PORT, management :$RMQ_MGMT)"
    rmq_env /usr/lib/rabbitmq/bin/rabbitmq-server -detached >&2 || return 1
    RMQ_STARTED=1
    rmq_env timeout 200 /usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RMQ_NODE" wait --timeout 180 "$RMQ_DIR/pid" >&2 || return 1
    rmq_env timeout 100 /usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RMQ_NODE" await_startup --timeout 90 >&2 || return 1
    local i
    for i in $(seq 1 60); do
        if curl -fsS -u guest:guest "http://127.0.0.1:$RMQ_MGMT/api/overview" >/dev/null 2>&1; then break; fi
        sleep 1
    done
    curl -fsS -u guest:guest -X PUT -H 'content-type: application/json' \
        -d '{"durable":true,"arguments":{"x-queue-type":"classic"}}' \
        "http://127.0.0.1:$RMQ_MGMT/api/queues/%2F/lat" >&2 || return 1
    curl -fsS -u guest:guest -X PUT -H 'content-type: application/json' \
        -d '{"durable":true,"arguments":{"x-queue-type":"quorum"}}' \
        "http://127.0.0.1:$RMQ_MGMT/api/queues/%2F/qlat" >&2 || return 1
    curl -fsS -u guest:guest -X PUT -H 'content-type: application/json' \
        -d '{"durable":true,"arguments":{"x-queue-type":"quorum"}}' \
        "http://127.0.0.1:$RMQ_MGMT/api/queues/%2F/qdepth" >&2 || return 1
    RMQ_PID=$(cat "$RMQ_DIR/pid")
}

leg_rabbitmq() {
    # One RabbitMQ node for the whole leg (started fresh, stopped after);
    # the bin purges the queue before every trial.
    local t0 s c flags
    t0=$(date +%s)
    if ! rmq_start; then
        log "RabbitMQ did not start; skipping its leg"
        FAILED+=(rabbitmq-start)
        rmq_stop
        return 0
    fi
    log "RabbitMQ up in $(($(date +%s) - t0)) s, beam pid $RMQ_PID"
    for s in "${SCENARIOS[@]}"; do
        for c in "${CLIENTS[@]}"; do
            read -r -a flags <<<"$(scenario_flags "$s" /amq/queue/lat /amq/queue/qlat)"
            run_one rabbitmq "$s" "$c" --url "amqp://guest:guest@127.0.0.1:$RMQ_PORT" \
                --pid "$RMQ_PID" "${flags[@]}"
        done
    done
    for c in "${RIG_CLIENT_LIST[@]}"; do
        rig_one rabbitmq transient "$c" --url "amqp://guest:guest@127.0.0.1:$RMQ_PORT" \
            --pid "$RMQ_PID" --address /amq/queue/lat
        rig_one rabbitmq quorum "$c" --url "amqp://guest:guest@127.0.0.1:$RMQ_PORT" \
            --pid "$RMQ_PID" --address /amq/queue/qlat
        rate_one rabbitmq transient "$c" --url "amqp://guest:guest@127.0.0.1:$RMQ_PORT" \
            --pid "$RMQ_PID" --address /amq/queue/lat
        rate_one rabbitmq quorum "$c" --url "amqp://guest:guest@127.0.0.1:$RMQ_PORT" \
            --pid "$RMQ_PID" --address /amq/queue/qlat
    done
    depth_one rabbitmq quorum --url "amqp://guest:guest@127.0.0.1:$RMQ_PORT" \
        --pid "$RMQ_PID" --data-dir "$RMQ_DIR/mnesia" --address /amq/queue/qdepth
    rmq_stop
}

IFS=, read -r -a LEG_LIST <<<"$LEGS"
for leg in "${LEG_LIST[@]}"; do
    case "$leg" in
    inproc) leg_inproc ;;
    brokerd) leg_brokerd ;;
    rabbitmq) leg_rabbitmq ;;
    cluster)
        log "cluster leg (bench-compare/cluster.sh)"
        cluster_env=(CLUSTER_RIG_FLAGS="${RIG_FLAGS[*]}" CLUSTER_RATE_FLAGS="${RATE_FLAGS[*]}")
        if [ "$QUICK" = 1 ]; then cluster_env+=(LAT_LAT_N=1000 LAT_N=20000); fi
        if [ -z "$RIG_CLIENTS" ]; then cluster_rig=(--no-rig); else cluster_rig=(); fi
        if ! env "${cluster_env[@]}" "$SCRIPT_DIR/cluster.sh" --no-build --trials "${TRIALS:-3}" \
            --out "$OUT/cluster" --rig-out "$OUT" "${cluster_rig[@]}" \
            >"$OUT/cluster.out" 2>"$OUT/cluster.err"; then
            log "cluster leg FAILED (see $OUT/cluster.err)"
            FAILED+=(cluster)
        fi
        ;;
    *) echo "unknown leg: $leg" >&2; exit 2 ;;
    esac
done

# --- 4. per-message cost (--permsg) -------------------------------------
if [ "$PERMSG" = 1 ]; then
    log "per-message cost under valgrind (bench-compare/permsg.sh)"
    if ! "$SCRIPT_DIR/permsg.sh" --no-build --out "$OUT" >"$OUT/permsg.out" 2>"$OUT/permsg.err"; then
        log "permsg FAILED (see $OUT/permsg.err)"
        FAILED+=(permsg)
    fi
fi

# --- 5. summary -----------------------------------------------------------
# Empty .json files of failed runs are removed (their .err stays).
find "$OUT" -maxdepth 1 -name '*.json' -empty -delete
"$BIN/summarize" "$OUT" >"$OUT/summary.md"
if [ -s "$OUT/permsg.md" ]; then
    {
        printf '## Per-message cost (broker under valgrind, bench-compare/permsg.sh)\n\n'
        head -n 1 "$OUT/permsg.out"
        echo
        cat "$OUT/permsg.md"
        printf '\nRaw totals: permsg.json.\n'
    } >>"$OUT/summary.md"
fi
if [ -s "$OUT/cluster/summary.md" ]; then
    { echo; cat "$OUT/cluster/summary.md"; } >>"$OUT/summary.md"
fi
# The depth runs: RSS and p99.9 against depth (depth-rss.svg, depth-p999.svg).
DEPTH_FILES=()
if [ "$DEPTH" = 1 ]; then
    for f in "$OUT"/depth-*-raw.json; do
        if [ -s "$f" ]; then DEPTH_FILES+=("$f"); fi
    done
fi
if [ "${#DEPTH_FILES[@]}" -gt 0 ]; then
    if ! "$BIN/summarize" depth --out-dir "$OUT" "${DEPTH_FILES[@]}" >"$OUT/depth.md" 2>"$OUT/depth-charts.err"; then
        log "depth charts FAILED (see $OUT/depth-charts.err)"
        FAILED+=(depth-charts)
    fi
    if [ -s "$OUT/depth.md" ]; then { echo; cat "$OUT/depth.md"; } >>"$OUT/summary.md"; fi
fi
log "summary: $OUT/summary.md"
if [ "${#FAILED[@]}" -gt 0 ]; then
    log "failed: ${FAILED[*]}"
fi
cat "$OUT/summary.md"
