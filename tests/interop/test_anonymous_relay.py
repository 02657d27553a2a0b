"""Anonymous relay through Qpid Proton: the broker offers ANONYMOUS-RELAY;
a sender with a null target address (Proton's `create_sender(None)`) has
each message routed by its `to` to a transient or quorum queue; a message
to an address that cannot exist is rejected with amqp:not-found, that
delivery alone; on a 3-node cluster a relay through a follower reaches the
quorum queue's leader."""

from proton import Delivery, Message

from cluster import cluster3  # noqa: F401
from helpers import TIMEOUT, connection, queue_address, receive_all


def relay(sender, to, body):
    """Send `body` to `to` and return the settled delivery, whatever its outcome."""
    return sender.send(Message(address=to, body=body), timeout=TIMEOUT, error_states=[])


def assert_not_found(delivery, what):
    assert delivery.remote_state == Delivery.REJECTED, f"{what}: state {delivery.remote_state}"
    condition = delivery.remote.condition
    assert condition is not None and condition.name == "amqp:not-found", f"{what}: {condition}"


def test_open_offers_anonymous_relay(url):
    with connection(url) as conn:
        offered = conn.conn.remote_offered_capabilities
        assert offered is not None and "ANONYMOUS-RELAY" in [str(c) for c in offered], offered


def test_relays_by_to_and_rejects_only_the_unroutable(url):
    first, second = queue_address("relay-a"), queue_address("relay-b")
    with connection(url) as conn:
        sender = conn.create_sender(None)
        assert relay(sender, first, "a1").remote_state == Delivery.ACCEPTED
        assert relay(sender, second, "b1").remote_state == Delivery.ACCEPTED
        for bad in ["/topics/x", "no-prefix", "/queues/a/b"]:
            assert_not_found(relay(sender, bad, "lost"), bad)
        # The link is still attached and routes the next message.
        assert relay(sender, first, "a2").remote_state == Delivery.ACCEPTED
        assert relay(sender, "/quorum/relay-q", "q1").remote_state == Delivery.ACCEPTED
        sender.close()
        got = receive_all(conn.create_receiver(first, credit=10), 2)
        assert [m.body for m in got] == ["a1", "a2"]
        got = receive_all(conn.create_receiver(second, credit=10), 1)
        assert [m.body for m in got] == ["b1"]
        got = receive_all(conn.create_receiver("/quorum/relay-q", credit=10), 1)
        assert [m.body for m in got] == ["q1"]


def test_unknown_is_not_found_without_auto_create(start_broker, tmp_path):
    config = tmp_path / "ramqp.toml"
    config.write_text('[queues]\nauto_create = false\ndeclare = ["known"]\n')
    broker = start_broker("--config", str(config))
    with connection(broker.url) as conn:
        sender = conn.create_sender(None)
        assert_not_found(relay(sender, "/queues/unknown", "x"), "transient")
        assert_not_found(relay(sender, "/quorum/unknown", "x"), "quorum")
        assert relay(sender, "/queues/known", "kept").remote_state == Delivery.ACCEPTED
        got = receive_all(conn.create_receiver("/queues/known", credit=10), 1)
        assert [m.body for m in got] == ["kept"]


def test_relay_through_a_follower_reaches_the_quorum_leader(cluster3):
    address = "/quorum/relayed-fwd"
    with connection(cluster3.url(1)) as conn:
        conn.create_sender(address).close()
    leader = cluster3.leader_of(address)
    follower = next(n for n in cluster3.nodes if n != leader)
    bodies = [f"r-{i:03d}" for i in range(100)]
    with connection(cluster3.url(follower)) as conn:
        sender = conn.create_sender(None)
        for body in bodies:
            assert relay(sender, address, body).remote_state == Delivery.ACCEPTED, body
    with connection(cluster3.url(leader)) as conn:
        got = receive_all(conn.create_receiver(address, credit=50), len(bodies))
        assert [m.body for m in got] == bodies
