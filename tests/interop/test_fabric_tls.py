"""Mutual TLS on the fabric with real ramqp-brokerd processes and ramqp-ctl:
a 3-node cluster whose nodes hold certificates from one cluster CA (made
here with openssl) forms, replicates a quorum queue and answers ramqp-ctl
over TLS; ramqp-ctl with a stranger's certificate or without TLS is refused
before it can remove a node; a node with a stranger's certificate cannot
join."""

import pytest

from cluster import Cluster, free_ports, start_joining_node  # noqa: F401
from conftest import BrokerProcess
from helpers import TIMEOUT, connection, receive_all, send_all, wait_until
from pki import Pki


def tls_args(pki, stem, flag_prefix):
    cert, key = pki.fabric_node(stem)
    return [f"{flag_prefix}-ca", str(pki.ca), f"{flag_prefix}-cert", str(cert), f"{flag_prefix}-key", str(key)]


@pytest.fixture
def tls_cluster(tmp_path):
    pki = Pki(tmp_path / "cluster-ca", name="cluster CA")
    node_args = {n: tls_args(pki, f"node-{n}", "--fabric-tls") for n in (1, 2, 3)}
    ctl_cert, ctl_key = pki.client("ramqp-ctl")
    ctl_args = ["--tls-ca", str(pki.ca), "--tls-cert", str(ctl_cert), "--tls-key", str(ctl_key)]
    cluster = Cluster(3, node_args=node_args, ctl_args=ctl_args)
    try:
        cluster.wait_healthy()
        yield cluster, pki
    finally:
        failures = cluster.cleanup()
    if failures:
        pytest.fail("\n\n".join(failures))


def depth(cluster, node, address):
    """(ready, unsettled) of a queue as `node` reports it."""
    queue = cluster.queue_status(node, address)
    return (queue["ready"], queue["unsettled"]) if queue else None


def members(cluster, node):
    return sorted(m["id"] for m in cluster.status(node)["members"])


def test_a_cluster_over_mutual_tls_replicates_and_refuses_strangers(tls_cluster, tmp_path):
    cluster, pki = tls_cluster
    # Raft traffic flows: a quorum queue published on one node is read on
    # another, and every node reaches the others (health above).
    with connection(cluster.url(1)) as conn:
        send_all(conn, "/quorum/tls", [f"m-{i}" for i in range(20)])
    with connection(cluster.url(3)) as conn:
        got = receive_all(conn.create_receiver("/quorum/tls", credit=20), 20)
        assert [m.body for m in got] == [f"m-{i}" for i in range(20)]
    # The accepts went out right before the close (no round trip); they
    # count all the same, also when node 3 forwards them to the leader.
    wait_until(lambda: all(depth(cluster, n, "/quorum/tls") == (0, 0) for n in (1, 2, 3)),
               TIMEOUT, "the accepted messages leave the queue on every replica",
               lambda: [depth(cluster, n, "/quorum/tls") for n in (1, 2, 3)])
    assert members(cluster, 2) == [1, 2, 3]

    # ramqp-ctl with a certificate another CA issued: refused in the
    # handshake, so its remove-node never reaches the node.
    stranger = Pki(tmp_path / "stranger-ca", name="stranger CA")
    s_cert, s_key = stranger.client("ramqp-ctl")
    saved = cluster.ctl_args
    cluster.ctl_args = ["--tls-ca", str(pki.ca), "--tls-cert", str(s_cert), "--tls-key", str(s_key)]
    result = cluster.ctl(1, "--timeout-ms", "5000", "remove-node", "3", check=False)
    assert result.returncode != 0, result.stdout
    assert "connecting to the fabric" in result.stderr, result.stderr
    # Nor without TLS at all.
    cluster.ctl_args = []
    result = cluster.ctl(1, "--timeout-ms", "5000", "remove-node", "3", check=False)
    assert result.returncode != 0, result.stdout
    # Half the TLS flags is a usage error, not a plaintext attempt.
    cluster.ctl_args = ["--tls-ca", str(pki.ca)]
    result = cluster.ctl(1, "status", check=False)
    assert result.returncode != 0 and "--tls-cert" in result.stderr, result.stderr
    cluster.ctl_args = saved
    assert members(cluster, 1) == [1, 2, 3]

    # A node whose fabric certificate comes from the stranger's CA (and
    # which trusts only that CA) cannot join: adding it fails, and the
    # cluster goes on with its three members.
    port_amqp, port_fabric = free_ports(2)
    cluster.amqp_port[4], cluster.fabric_port[4], cluster.host[4] = port_amqp, port_fabric, "127.0.0.1"
    args = ["--node-id", "4", "--fabric-listen", f"127.0.0.1:{port_fabric}", "--join"]
    args += tls_args(stranger, "node-4", "--fabric-tls")
    for peer in (1, 2, 3):
        args += ["--peer", f"{peer}=127.0.0.1:{cluster.fabric_port[peer]}"]
    cluster.nodes[4] = BrokerProcess(args, listen=f"127.0.0.1:{port_amqp}")
    result = cluster.ctl(1, "--timeout-ms", "40000", "add-node", "4", f"127.0.0.1:{port_fabric}",
                         check=False, timeout=50)
    assert result.returncode != 0, result.stdout
    assert "did not catch up" in result.stderr, result.stderr
    for node in (1, 2, 3):
        assert members(cluster, node) == [1, 2, 3]
    cluster.wait_healthy(nodes=[1, 2, 3])
    with connection(cluster.url(2)) as conn:
        send_all(conn, "/quorum/tls", ["after"])
        got = receive_all(conn.create_receiver("/quorum/tls", credit=1), 1)
        assert got[0].body == "after"
