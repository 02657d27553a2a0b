"""Consumer priority and single active consumer through Qpid Proton.

Priority is a receiver's attach property (`rabbitmq:priority`, as RabbitMQ
4 reads it, or `priority`, as Artemis does): the highest-priority consumer
with credit gets every message; a lower one only while the higher ones have
none. Single active consumer is a policy: the first consumer attached gets
every message, the others wait and take over in attach order when it
detaches; on a quorum queue that order and the active consumer stay the
same when the leadership moves (3-process cluster, one move)."""

from proton import int32, symbol
from proton.reactor import LinkOption

from cluster import Cluster
from helpers import assert_nothing_arrives, connection, queue_address, receive_all, send_all, wait_until

POLICIES = """
[[policies]]
pattern = "/queues/sac-*"
single_active_consumer = true

[[policies]]
pattern = "/quorum/sac-*"
single_active_consumer = true
"""


class Priority(LinkOption):
    """Set a receiver's attach properties to one priority entry."""

    def __init__(self, priority, key="rabbitmq:priority"):
        self.priority = priority
        self.key = key

    def apply(self, link):
        link.properties = {symbol(self.key): int32(self.priority)}

    def test(self, link):
        return link.is_receiver


def manual_credit(conn, address, name, credit, options=None):
    """A blocking receiver whose credit is granted once, not topped up
    (a blocking receiver with credit=N keeps N outstanding)."""
    receiver = conn.create_receiver(address, credit=0, name=name, options=options)
    receiver.link.flow(credit)
    return receiver


def receive_new(receiver, count, earlier):
    """`count` bodies not in `earlier`, skipping redeliveries of those."""
    got = []
    while len(got) < count:
        body = receive_all(receiver, 1)[0].body
        if body not in earlier:
            got.append(body)
    return got


def bodies(messages):
    return [m.body for m in messages]


def test_priority_consumer_gets_everything_while_it_has_credit(url):
    for address in (queue_address("prio"), "/quorum/prio"):
        priority_order(url, address)


def priority_order(url, address):
    with connection(url) as conn:
        low = manual_credit(conn, address, "low", 20)
        high = manual_credit(conn, address, "high", 3, Priority(10))
        # receive() flows 1 when the link has no credit, so everything is
        # sent before anything is received: the high one takes its 3, the
        # low one the rest.
        send_all(conn, address, ["a", "b", "c", "d", "e"])
        assert bodies(receive_all(low, 2)) == ["d", "e"]
        assert bodies(receive_all(high, 3)) == ["a", "b", "c"]
        high.close()
        # An Artemis-style key, negative: below the plain (0) consumer.
        lowest = manual_credit(conn, address, "lowest", 5, Priority(-2, key="priority"))
        send_all(conn, address, ["f"])
        assert bodies(receive_all(low, 1)) == ["f"]
        assert_nothing_arrives(lowest)


def single_active_in_order(url, address):
    with connection(url) as conn:
        first = conn.create_receiver(address, credit=10, name="first")
        second = conn.create_receiver(address, credit=10, name="second")
        third = conn.create_receiver(address, credit=10, name="third")
        send_all(conn, address, ["1", "2", "3"])
        assert bodies(receive_all(first, 3)) == ["1", "2", "3"]
        assert_nothing_arrives(second)
        first.close()
        send_all(conn, address, ["4"])
        assert bodies(receive_all(second, 1)) == ["4"]
        assert_nothing_arrives(third)
        second.close()
        send_all(conn, address, ["5"])
        assert bodies(receive_all(third, 1)) == ["5"]


def test_single_active_consumer_on_transient_and_quorum_queues(start_broker, tmp_path):
    config = tmp_path / "ramqp.toml"
    config.write_text(POLICIES)
    broker = start_broker("--config", str(config))
    single_active_in_order(broker.url, queue_address("sac"))
    single_active_in_order(broker.url, "/quorum/sac-single")


def test_active_consumer_and_order_survive_a_leader_move(tmp_path):
    config = tmp_path / "ramqp.toml"
    config.write_text(POLICIES)
    cluster = Cluster(3, extra_args=["--config", str(config)])
    try:
        cluster.wait_healthy()
        address = "/quorum/sac-moving"
        with connection(cluster.url(1)) as conn:
            send_all(conn, address, [])
        leader = cluster.leader_of(address)
        via = leader % 3 + 1
        with connection(cluster.url(via)) as conn:
            first = conn.create_receiver(address, credit=20, name="first")
            second = conn.create_receiver(address, credit=20, name="second")
            third = conn.create_receiver(address, credit=20, name="third")
            send_all(conn, address, ["m-0", "m-1"])
            assert bodies(receive_all(first, 2)) == ["m-0", "m-1"]
            target = next(n for n in (1, 2, 3) if n != leader)
            cluster.ctl(leader, "--timeout-ms", "60000", "move-leadership",
                        "--queue", address, "--to", str(target), timeout=70)
            wait_until(lambda: cluster.leader_of(address) == target, 30, f"{target} leads {address}")
            send_all(conn, address, ["m-2", "m-3"])
            # Earlier ones may come again first (their settlement was not
            # replicated yet when the leadership moved: at least once).
            assert receive_new(first, 2, earlier=["m-0", "m-1"]) == ["m-2", "m-3"]
            assert_nothing_arrives(second)
            first.close()
            send_all(conn, address, ["m-4"])
            assert bodies(receive_all(second, 1)) == ["m-4"]
            assert_nothing_arrives(third)
    finally:
        failures = cluster.cleanup()
    assert not failures, "\n\n".join(failures)
