"""Accepts sent just before a link or connection closes, on a node that
forwards the queue to its leader on another node: every accept must be
applied. The client's node forwards the settlements and then the close;
the leader must apply the settlements before it drops the link (and
returns what is still unsettled to the queue).

The leader audits each origin's links once a second (the first time a few
milliseconds after that origin's first link there), asking the origin which
links it still has. A link the origin has just closed is not its own any more, yet its last
settlements and its close may still be on the way: if the audit drops the
link first, those settlements are lost and the accepted messages come back.
These tests close links as fast as a client can, for several audit periods,
and fail on any message that comes back (without the fix, the first failed
in 4 of 8 runs on a 2-core machine under load)."""

import time

from proton.utils import BlockingConnection

from cluster import cluster3  # noqa: F401
from helpers import TIMEOUT, assert_nothing_arrives, connection, send_all

# Long enough for several audits (one a second) to land while links close.
CYCLING_S = 8.0


def leader_and_follower(cluster, address):
    with connection(cluster.url(1)) as conn:
        conn.create_sender(address).close()
    leader = cluster.leader_of(address)
    follower = next(n for n in sorted(cluster.nodes) if n != leader)
    return leader, follower


def test_accepts_just_before_a_detach_are_kept(cluster3):
    """Receive a few, accept them, detach at once: again and again, from
    both followers of queues led by different nodes (every leader audits
    every follower, and a leader's first audit of a follower comes a few
    milliseconds after that follower's first link: just when a quick
    client detaches). No accepted message may come back."""
    queues = [f"/quorum/settle-then-detach-{i}" for i in range(3)]
    leaders = {}
    for address in queues:
        leaders[address], _ = leader_and_follower(cluster3, address)
    seen = set()
    batch = 3
    n = 0
    conns = {node: BlockingConnection(cluster3.url(node), timeout=TIMEOUT) for node in cluster3.nodes}
    try:
        deadline = time.monotonic() + CYCLING_S
        while time.monotonic() < deadline:
            for address in queues:
                leader = leaders[address]
                for follower in (f for f in sorted(cluster3.nodes) if f != leader):
                    bodies = [f"d-{n + i}" for i in range(batch)]
                    n += batch
                    send_all(conns[leader], address, bodies)
                    receiver = conns[follower].create_receiver(address, credit=batch)
                    for _ in range(batch):
                        message = receiver.receive(timeout=TIMEOUT)
                        assert message.body not in seen, f"{message.body} came back after it was accepted"
                        seen.add(message.body)
                        receiver.accept()
                    # No round trip: the detach follows the accepts at once.
                    receiver.close()
    finally:
        for conn in conns.values():
            conn.close()
    assert len(seen) == n
    for address in queues:
        with connection(cluster3.url(leaders[address])) as conn:
            assert_nothing_arrives(conn.create_receiver(address, credit=10))


def test_accepts_just_before_a_connection_close_are_kept(cluster3):
    """As above, closing the whole connection (no detach first) right after
    the accepts, as test_fabric_tls did when it failed: a new queue and a
    new connection to a follower each round."""
    for rounds in range(3):
        address = f"/quorum/settle-then-close-{rounds}"
        leader, follower = leader_and_follower(cluster3, address)
        bodies = [f"c-{i}" for i in range(10)]
        with connection(cluster3.url(leader)) as conn:
            send_all(conn, address, bodies)
        with connection(cluster3.url(follower)) as conn:
            receiver = conn.create_receiver(address, credit=len(bodies))
            for _ in bodies:
                receiver.receive(timeout=TIMEOUT)
                receiver.accept()
        other = next(n for n in sorted(cluster3.nodes) if n not in (leader, follower))
        with connection(cluster3.url(other)) as conn:
            send_all(conn, address, ["after"])
            message = conn.create_receiver(address, credit=1).receive(timeout=TIMEOUT)
            assert message.body == "after", f"round {rounds}: {message.body} came back after it was accepted"
