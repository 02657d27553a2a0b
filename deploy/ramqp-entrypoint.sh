#!/bin/sh
# Entrypoint of the ramqp container image (deploy/Dockerfile).
#
# Without CLUSTER_SIZE it runs ramqp-brokerd with the arguments given.
#
# With CLUSTER_SIZE=N (a Kubernetes StatefulSet of N replicas) it adds what
# differs per pod, because every pod of a StatefulSet gets the same
# template: the pod's ordinal comes from its host name <set>-<ordinal>,
#
#   --node-id  ordinal + 1 (node ids start at 1; 0 is reserved)
#   --peer     <i+1>=<host of ordinal i>:FABRIC_PORT for every other ordinal
#
# where the host of ordinal i is `printf PEER_HOST_FORMAT i`
# (default "<set>-%d"). The broker resolves peer names once, at start, and
# dials the addresses it got from then on, so the names must resolve to
# addresses that outlive a pod: deploy/kubernetes/statefulset.yaml gives
# every ordinal its own ClusterIP Service for that reason.
#
#   CLUSTER_SIZE       nodes that bootstrap the cluster (= replicas)
#   PEER_HOST_FORMAT   printf format of a peer's host from its ordinal
#   FABRIC_PORT        the peers' fabric port (default 5682)
#
# An explicit RAMQP_NODE_ID turns the derivation off.
set -eu

if [ -n "${CLUSTER_SIZE:-}" ] && [ -z "${RAMQP_NODE_ID:-}" ]; then
    # shellcheck disable=SC3028 # container runtimes export HOSTNAME
    host="${HOSTNAME:-$(cat /proc/sys/kernel/hostname)}"
    ordinal="${host##*-}"
    case "$ordinal" in
    "" | *[!0-9]*)
        echo "ramqp-entrypoint: no StatefulSet ordinal at the end of host name '$host'" >&2
        exit 2
        ;;
    esac
    case "$CLUSTER_SIZE" in
    "" | *[!0-9]*)
        echo "ramqp-entrypoint: CLUSTER_SIZE '$CLUSTER_SIZE' is not a number" >&2
        exit 2
        ;;
    esac
    # A pod past the bootstrap size would have to join (--join, then
    # `ramqp-ctl add-node` on a member); that is an operator's step, not
    # something to guess at start (docs/operations.md, "Deploying").
    if [ "$ordinal" -ge "$CLUSTER_SIZE" ]; then
        echo "ramqp-entrypoint: pod ordinal $ordinal is not below CLUSTER_SIZE $CLUSTER_SIZE;" \
            "adding nodes is done by hand (docs/operations.md)" >&2
        exit 2
    fi
    format="${PEER_HOST_FORMAT:-${host%-*}-%d}"
    port="${FABRIC_PORT:-5682}"
    i=0
    while [ "$i" -lt "$CLUSTER_SIZE" ]; do
        if [ "$i" -ne "$ordinal" ]; then
            # shellcheck disable=SC2059 # the format is the configuration
            set -- "$@" --peer "$((i + 1))=$(printf "$format" "$i"):$port"
        fi
        i=$((i + 1))
    done
    set -- --node-id "$((ordinal + 1))" "$@"
fi

# exec: the broker is PID 1 of the container and gets SIGTERM itself.
exec ramqp-brokerd "$@"
