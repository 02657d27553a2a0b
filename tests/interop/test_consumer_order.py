"""Consumer priority and single active consumer through Qpid Proton.

Priority is a receiver's attach property (`rabbitmq:priority`, as RabbitMQ
4 reads it, or `priority`, as Artemis does): the highest-priority consumer
with credit gets every message; a lower one only while the higher ones have
none. Single active consumer is a policy: the first consumer attached gets
every message, the others wait and take over in attach order when it
detaches; on a quorum queue that order and the active consumer stay the
same when the leadership moves (3-process cluster)."""

from proton import int32, symbol
from proton.reactor import LinkOption

from helpers import assert_nothing_arrives, connection, queue_address, receive_all, send_all

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
