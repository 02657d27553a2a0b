# Shell functions for scripts that drive a 3-node cluster started by
# deploy/local-cluster.sh: the nodes' addresses, a queue's field from the
# cluster's status, and a queue's leader. Sourced, not run:
#
#   source bench-compare/cluster_lib.sh
#   cluster_start                    # a fresh cluster, stopped at exit
#   leader="$(leader_of /quorum/bench)"
#   "$RAMQP_BIN_DIR/latency" --url "$(amqp "$leader")" ...
#
# Needs RAMQP_BIN_DIR (ramqp-brokerd, ramqp-ctl, latency) and
# RAMQP_BASE_PORT (node N listens for AMQP on RAMQP_BASE_PORT + N - 1 and
# for the fabric 10 ports above, as local-cluster.sh lays them out).
# bench-compare/cluster.sh and the session scripts under
# docs/benchmarks/results/ use it; before it, each carried its own copy.

# The AMQP URL and the fabric address of node $1.
amqp() { echo "amqp://127.0.0.1:$((RAMQP_BASE_PORT + $1 - 1))"; }
fabric() { echo "127.0.0.1:$((RAMQP_BASE_PORT + 10 + $1 - 1))"; }

# Field $2 of queue $3 as node $1's status reports it (empty if none).
queue_field() { # node field address
    "$RAMQP_BIN_DIR/ramqp-ctl" --fabric "$(fabric "$1")" status --json |
        python3 -c "import json, sys
q = [q for q in json.load(sys.stdin)['queues'] if q['address'] == '$3']
print(q[0]['$2'] if q and q[0]['$2'] is not None else '')"
}

# Declare queue $1 (the first attach creates it) and print its leader. The
# metadata group spreads new queues' leaders over the nodes, so every
# queue's leader is looked up, not assumed to be the first one's.
leader_of() { # address
    "$RAMQP_BIN_DIR/latency" --client raw --url "$(amqp 1)" --address "$1" \
        --confirm --lat-n 10 --warmup 0 --n 0 >/dev/null
    local found=""
    for _ in $(seq 100); do
        found="$(queue_field 1 leader "$1")"
        [[ -n "$found" ]] && break
        sleep 0.1
    done
    [[ -n "$found" ]] || { echo "no leader for $1" >&2; exit 1; }
    echo "$found"
}

# Start a 3-node cluster in a fresh directory (RAMQP_CLUSTER_DIR), stopped
# and removed when the calling script exits. For scripts that need no
# cleanup of their own; bench-compare/cluster.sh has its own trap. The
# directory is made under RAMQP_CLUSTER_PARENT (default /tmp); /dev/shm
# puts every log, journal and segment in memory, an experiment that shows
# what the disk costs (nothing there survives a crash of the machine).
cluster_start() {
    export RAMQP_BIN_DIR RAMQP_BASE_PORT RAMQP_CLUSTER_DIR
    RAMQP_CLUSTER_DIR="$(mktemp -d "${RAMQP_CLUSTER_PARENT:-/tmp}/ramqp-cluster.XXXXXX")"
    trap 'deploy/local-cluster.sh stop >/dev/null 2>&1; rm -rf "$RAMQP_CLUSTER_DIR"' EXIT
    deploy/local-cluster.sh start >/dev/null
}
