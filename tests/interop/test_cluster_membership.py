"""Adding a 4th ramqp-brokerd to a running 3-node cluster and removing a
node again, with ramqp-ctl, while queues hold messages."""

from cluster import cluster3, start_joining_node  # noqa: F401
from proton import Timeout

from helpers import connection, receive_all, send_all, wait_until


def members(cluster, node):
    return sorted(m["id"] for m in cluster.status(node)["members"])


def test_add_a_fourth_node_then_remove_it(cluster3):
    # A queue with messages before the change.
    with connection(cluster3.url(1)) as conn:
        send_all(conn, "/quorum/before", [f"b-{i}" for i in range(50)])

    start_joining_node(cluster3, 4)
    result = cluster3.ctl(1, "--timeout-ms", "90000", "add-node", "4", f"127.0.0.1:{cluster3.fabric_port[4]}", timeout=90)
    print("\nadd-node:", result.stdout.strip())
    for node in (1, 2, 3, 4):
        wait_until(lambda: members(cluster3, node) == [1, 2, 3, 4], 60, f"node {node} sees 4 members")
    cluster3.wait_healthy(nodes=[1, 2, 3, 4])

    # New queues go to the node with the fewest leaderships: node 4.
    with connection(cluster3.url(4)) as conn:
        send_all(conn, "/quorum/after", [f"a-{i}" for i in range(50)])
    queue = cluster3.queue_status(4, "/quorum/after")
    assert 4 in queue["members"], queue
    assert cluster3.leader_of("/quorum/after") == 4

    # Messages of the old queue are reachable through the new node.
    with connection(cluster3.url(4)) as conn:
        receiver = conn.create_receiver("/quorum/before", credit=50)
        got = receive_all(receiver, 50, accept=True)
        assert [m.body for m in got] == [f"b-{i}" for i in range(50)]

    # Remove node 4: the queue it led moves to the other nodes with its messages.
    result = cluster3.ctl(2, "--timeout-ms", "90000", "remove-node", "4", timeout=90)
    print("remove-node:", result.stdout.strip())
    for node in (1, 2, 3):
        wait_until(lambda: members(cluster3, node) == [1, 2, 3], 60, f"node {node} sees 3 members")
    wait_until(
        lambda: (q := cluster3.queue_status(1, "/quorum/after")) is not None
        and 4 not in q["members"]
        and q["leader"] in (1, 2, 3),
        60,
        "/quorum/after re-homed off node 4",
        lambda: [cluster3.queue_status(n, "/quorum/after") for n in (1, 2, 3, 4)],
    )
    assert cluster3.nodes[4].stop() == 0
    with connection(cluster3.url(3)) as conn:
        receiver = conn.create_receiver("/quorum/after", credit=50)
        got = receive_all(receiver, 50, accept=True)
        assert [m.body for m in got] == [f"a-{i}" for i in range(50)]
        try:
            extra = receiver.receive(timeout=1.0)
        except Timeout:
            return
        raise AssertionError(f"unexpected {extra.body!r}")


def test_move_leadership_for_maintenance(cluster3):
    address = "/quorum/maintenance"
    with connection(cluster3.url(2)) as conn:
        send_all(conn, address, [f"m-{i}" for i in range(20)])
    leader = cluster3.leader_of(address)
    target = leader % 3 + 1
    result = cluster3.ctl(leader, "--timeout-ms", "60000", "move-leadership",
                          "--queue", address, "--to", str(target), timeout=70)
    print("\nmove-leadership:", result.stdout.strip())
    wait_until(lambda: cluster3.leader_of(address) == target, 30, f"{target} leads {address}")
    # The preferred leader is recorded, and the messages are all there.
    assert cluster3.queue_status(target, address)["members"][0] == target
    with connection(cluster3.url(leader)) as conn:
        got = receive_all(conn.create_receiver(address, credit=20), 20)
        assert [m.body for m in got] == [f"m-{i}" for i in range(20)]
