#!/usr/bin/env bash
# What mutual TLS on the fabric costs quorum queues: bench-compare/cluster.sh
# (3 ramqp-brokerd processes from deploy/local-cluster.sh, the latency bin's
# raw client through the leader and through a follower) twice, alternating
# plain and TLS per round. For TLS every node and ramqp-ctl get the cluster
# CA and one node certificate (SAN DNS:ramqp-fabric) through the
# RAMQP_FABRIC_TLS_* variables, which both binaries read. Run from the
# repository root after
#   cargo build --release -p ramqp-brokerd -p ramqp-bench-compare
set -euo pipefail
out=docs/benchmarks/results/2026-12-03-fabric-tls
rounds="${ROUNDS:-4}"
pki=$(mktemp -d)
trap 'rm -rf "$pki"' EXIT
(
    cd "$pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench cluster CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout node.key -out node.csr -subj "/CN=node"
    printf 'subjectAltName=DNS:ramqp-fabric\nextendedKeyUsage=serverAuth,clientAuth\n' > node.ext
    openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out node.pem -days 2 -extfile node.ext
) >/dev/null 2>&1
for r in $(seq "$rounds"); do
    bench-compare/cluster.sh --trials 1 --no-build --no-rig --out "$out/plain-r$r"
    RAMQP_FABRIC_TLS_CA="$pki/ca.pem" RAMQP_FABRIC_TLS_CERT="$pki/node.pem" \
        RAMQP_FABRIC_TLS_KEY="$pki/node.key" \
        bench-compare/cluster.sh --trials 1 --no-build --no-rig --out "$out/tls-r$r"
done
