"""Filters through Qpid Proton: a JMS selector (proton.reactor.Selector,
apache.org:selector-filter:string) and an amqp:application-properties-filter
are applied at dispatch on transient and quorum queues: the filtered
receiver gets only what matches, the rest stays, in order, for others. The
attach reply echoes exactly the filters applied (AMQP 1.0 section 3.5.3);
unknown filter types are left out; a selector that does not parse refuses
the attach with amqp:invalid-field."""

import uuid

import pytest
from proton import Described, Message, symbol, ulong
from proton.reactor import Filter, Selector
from proton.utils import LinkDetached

from helpers import TIMEOUT, assert_nothing_arrives, connection, queue_address, receive_all

SELECTOR_CODE = 0x0000468C00000004


def filter_entries(data):
    """The filter map of a terminus's filter `Data` ({} if none)."""
    data.rewind()
    if data.next() is None:
        return {}
    return data.get_object()


def send_coloured(conn, address, pairs):
    sender = conn.create_sender(address)
    for colour, body in pairs:
        sender.send(Message(body=body, properties={"colour": colour}), timeout=TIMEOUT)
    sender.close()


def only_matches_and_the_rest_stays(url, address, options):
    with connection(url) as conn:
        send_coloured(conn, address, [("blue", "b1"), ("red", "r1"), ("blue", "b2"), ("red", "r2")])
        picky = conn.create_receiver(address, credit=10, name="picky", options=options)
        local = filter_entries(picky.link.source.filter)
        remote = filter_entries(picky.link.remote_source.filter)
        assert local and remote == local, f"echo {remote} differs from {local}"
        assert [m.body for m in receive_all(picky, 2)] == ["r1", "r2"]
        assert_nothing_arrives(picky)
        plain = conn.create_receiver(address, credit=2, name="plain")
        assert [m.body for m in receive_all(plain, 2)] == ["b1", "b2"]
        plain.close()
        picky.close()


@pytest.mark.parametrize("kind", ["queues", "quorum"])
def test_selector_takes_only_matches(url, kind):
    address = f"/{kind}/sel-{uuid.uuid4().hex[:10]}"
    only_matches_and_the_rest_stays(url, address, Selector("colour IN ('red') AND JMSPriority = 4"))


@pytest.mark.parametrize("kind", ["queues", "quorum"])
def test_application_properties_filter_takes_only_matches(url, kind):
    address = f"/{kind}/eq-{uuid.uuid4().hex[:10]}"
    described = Described(symbol("amqp:application-properties-filter"), {"colour": "red"})
    only_matches_and_the_rest_stays(url, address, Filter({symbol("eq"): described}))


def test_unknown_filters_are_not_echoed(url):
    address = queue_address("unknown")
    with connection(url) as conn:
        filters = {
            symbol("s"): Described(ulong(SELECTOR_CODE), "colour = 'red'"),
            symbol("u"): Described(symbol("example:unknown-filter"), "x"),
        }
        receiver = conn.create_receiver(address, credit=1, options=Filter(filters))
        remote = filter_entries(receiver.link.remote_source.filter)
        assert list(remote.keys()) == [symbol("s")], remote
        receiver.close()


def test_a_bad_selector_refuses_the_attach(url):
    with connection(url) as conn:
        with pytest.raises(LinkDetached) as failure:
            conn.create_receiver(queue_address("bad"), credit=1, options=Selector("colour = "))
        assert failure.value.condition == "amqp:invalid-field"


def test_link_without_filter_keeps_its_address(url):
    address = queue_address("plain")
    with connection(url) as conn:
        receiver = conn.create_receiver(address, credit=1)
        assert receiver.link.remote_source.address == address
        assert filter_entries(receiver.link.remote_source.filter) == {}
        send_coloured(conn, address, [("any", "hello")])
        assert receiver.receive(timeout=TIMEOUT).body == "hello"
        receiver.accept()
