#!/usr/bin/env bash
# A ramqp cluster of ramqp-brokerd processes on this machine, over loopback.
#
#   deploy/local-cluster.sh start          # build (release), start 3 nodes, wait until healthy
#   deploy/local-cluster.sh status         # members, queue leaders and depths
#   deploy/local-cluster.sh stop           # stop exactly the nodes this script started
#   deploy/local-cluster.sh add 4          # start node 4 and join it to the running cluster
#   deploy/local-cluster.sh remove 4       # move node 4's queues away, stop it, forget it
#
# Node N (1-based) serves AMQP on BASE_PORT+N-1 (5672, 5673, 5674 by
# default) and its fabric (inter-node gRPC) on BASE_PORT+10+N-1. Settings
# come from the environment:
#
#   RAMQP_BASE_PORT     first AMQP port                      (default 5672)
#   RAMQP_CLUSTER_DIR   data, logs and pid files of the nodes (default ./ramqp-cluster)
#   RAMQP_NODES         nodes started by `start`              (default 3)
#   RAMQP_PROFILE       cargo profile to build and run        (default release)
#   RAMQP_BIN_DIR       use binaries from here instead of building
#   RAMQP_EXTRA_ARGS    extra flags for every ramqp-brokerd
#   RAMQP_WORKER_THREADS  async-runtime workers per node (default: the
#                       machine's cores shared among the RAMQP_NODES, at least 1)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base_port="${RAMQP_BASE_PORT:-5672}"
cluster_dir="${RAMQP_CLUSTER_DIR:-$PWD/ramqp-cluster}"
nodes="${RAMQP_NODES:-3}"
profile="${RAMQP_PROFILE:-release}"
health_timeout="${RAMQP_HEALTH_TIMEOUT:-60}"
# The nodes share this machine's cores: more workers than cores only adds
# thread wake-ups to the hand-offs between a node's tasks (on 2 cores, one
# worker per node took a fifth off the closed-loop quorum publish,
# docs/benchmarks.md, "One runtime worker per node").
if [[ -n "${RAMQP_WORKER_THREADS:-}" ]]; then
    workers="$RAMQP_WORKER_THREADS" # 0: one per core, as the daemon takes it
else
    workers=$(($(nproc) / nodes))
    ((workers >= 1)) || workers=1
fi

amqp_port() { echo $((base_port + $1 - 1)); }
fabric_port() { echo $((base_port + 10 + $1 - 1)); }
node_dir() { echo "$cluster_dir/node$1"; }
pid_file() { echo "$(node_dir "$1")/pid"; }

die() {
    echo "local-cluster: $*" >&2
    exit 1
}

bin_dir() {
    if [[ -n "${RAMQP_BIN_DIR:-}" ]]; then
        echo "$RAMQP_BIN_DIR"
        return
    fi
    local target
    target="$(cd "$repo_root" && cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    if [[ "$profile" == dev || "$profile" == debug ]]; then
        echo "$target/debug"
    else
        echo "$target/$profile"
    fi
}

build() {
    [[ -n "${RAMQP_BIN_DIR:-}" ]] && return
    echo "==> building ramqp-brokerd and ramqp-ctl ($profile)"
    (cd "$repo_root" && cargo build --profile "$profile" -p ramqp-brokerd --bins)
}

# The ids of the nodes with a data directory here, in order.
known_nodes() {
    [[ -d "$cluster_dir" ]] || return 0
    local dir
    for dir in "$cluster_dir"/node*; do
        [[ -d "$dir" ]] && echo "${dir##*/node}"
    done | sort -n
}

running() {
    local pid_path
    pid_path="$(pid_file "$1")"
    [[ -f "$pid_path" ]] || return 1
    local pid
    pid="$(cat "$pid_path")"
    # The pid must still be a ramqp-brokerd: after a reboot or a crash the
    # number may belong to anything.
    [[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q ramqp-brokerd
}

ctl() {
    "$(bin_dir)/ramqp-ctl" --fabric "127.0.0.1:$(fabric_port "$1")" "${@:2}"
}

# Start node $1 with peers $2.. (node ids). Returns once it listens.
start_node() {
    local id="$1"
    shift
    local dir peers=()
    dir="$(node_dir "$id")"
    mkdir -p "$dir"
    if running "$id"; then
        echo "node $id already runs (pid $(cat "$(pid_file "$id")"))"
        return
    fi
    local peer
    for peer in "$@"; do
        [[ "$peer" == "$id" ]] && continue
        peers+=(--peer "$peer=127.0.0.1:$(fabric_port "$peer")")
    done
    local brokerd
    brokerd="$(bin_dir)/ramqp-brokerd"
    [[ -x "$brokerd" ]] || die "$brokerd is missing (build failed?)"
    # shellcheck disable=SC2086 # RAMQP_EXTRA_ARGS is a list of flags
    setsid "$brokerd" \
        --node-id "$id" \
        --listen "127.0.0.1:$(amqp_port "$id")" \
        --fabric-listen "127.0.0.1:$(fabric_port "$id")" \
        "${peers[@]}" \
        --data-dir "$dir/data" \
        --worker-threads "$workers" \
        ${RAMQP_EXTRA_ARGS:-} \
        >"$dir/stdout" 2>"$dir/log" </dev/null &
    local pid=$!
    echo "$pid" >"$(pid_file "$id")"
    local deadline=$((SECONDS + health_timeout))
    until grep -q "listening on" "$dir/stdout" 2>/dev/null; do
        # kill -0, not `running`: right after the fork the child may not
        # have exec'd ramqp-brokerd yet.
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$dir/log" >&2
            die "node $id exited during start-up (log: $dir/log)"
        fi
        ((SECONDS < deadline)) || die "node $id did not start within ${health_timeout}s (log: $dir/log)"
        sleep 0.1
    done
    echo "node $id: amqp://127.0.0.1:$(amqp_port "$id")  fabric 127.0.0.1:$(fabric_port "$id")  pid $(cat "$(pid_file "$id")")"
}

# Wait until every node in $@ sees all of them reachable.
wait_healthy() {
    local deadline=$((SECONDS + health_timeout)) id
    for id in "$@"; do
        until ctl "$id" health --expect-members "$#" >/dev/null 2>&1; do
            ((SECONDS < deadline)) || {
                ctl "$id" health --expect-members "$#" || true
                die "node $id is not healthy after ${health_timeout}s (log: $(node_dir "$id")/log)"
            }
            sleep 0.2
        done
    done
}

stop_node() {
    local id="$1"
    running "$id" || {
        rm -f "$(pid_file "$id")"
        return 0
    }
    local pid
    pid="$(cat "$(pid_file "$id")")"
    kill -TERM "$pid"
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            echo "node $id (pid $pid) ignored SIGTERM for 30s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    rm -f "$(pid_file "$id")"
    echo "node $id stopped"
}

cmd_start() {
    build
    local ids=()
    for ((i = 1; i <= nodes; i++)); do ids+=("$i"); done
    for id in "${ids[@]}"; do
        start_node "$id" "${ids[@]}"
    done
    echo "==> waiting until the cluster is healthy"
    wait_healthy "${ids[@]}"
    echo
    echo "ramqp cluster of ${#ids[@]} nodes is up (data and logs in $cluster_dir)."
    echo "Connect any AMQP 1.0 client to any node, e.g. amqp://127.0.0.1:$(amqp_port 1),"
    echo "and use /quorum/<name> (replicated) or /queues/<name> (transient) addresses."
    echo "  $0 status    members, leaders, depths"
    echo "  $0 stop      stop these nodes"
}

cmd_stop() {
    local id any=0
    for id in $(known_nodes); do
        stop_node "$id"
        any=1
    done
    ((any)) || echo "no nodes under $cluster_dir"
}

cmd_status() {
    local id
    for id in $(known_nodes); do
        if running "$id"; then
            ctl "$id" status "$@"
            return
        fi
    done
    die "no node of $cluster_dir is running"
}

cmd_add() {
    local new="${1:?usage: $0 add NODE_ID}"
    local members=() id
    for id in $(known_nodes); do
        running "$id" && members+=("$id")
    done
    ((${#members[@]})) || die "no running node to join"
    build
    RAMQP_EXTRA_ARGS="${RAMQP_EXTRA_ARGS:-} --join" start_node "$new" "${members[@]}" "$new"
    # Every running node learns the new peer, then the cluster adds it.
    ctl "${members[0]}" add-node "$new" "127.0.0.1:$(fabric_port "$new")"
    wait_healthy "${members[@]}" "$new"
    echo "node $new joined"
}

cmd_remove() {
    local old="${1:?usage: $0 remove NODE_ID}"
    local other="" id
    for id in $(known_nodes); do
        if [[ "$id" != "$old" ]] && running "$id"; then
            other="$id"
            break
        fi
    done
    [[ -n "$other" ]] || die "no other running node to ask"
    ctl "$other" remove-node "$old"
    stop_node "$old"
    rm -rf "$(node_dir "$old")"
    echo "node $old removed"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) shift; cmd_status "$@" ;;
add) cmd_add "${2:-}" ;;
remove) cmd_remove "${2:-}" ;;
*)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
