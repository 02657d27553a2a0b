"""Filters through Qpid Proton: the broker applies none, so its attach reply
must carry none (AMQP 1.0 section 3.5.3, the source's `filter` field is set
by the sender to the filters actually in place).

Guards against the filter echo: the reply used to copy the receiver's
source, selector included, so a JMS client believed its selector active
while it received every message."""

from proton import Message
from proton.reactor import Selector

from helpers import TIMEOUT, connection, queue_address, receive_all, send_all


def filter_entries(data):
    """The top-level values of a terminus's filter `Data` (empty if none)."""
    data.rewind()
    entries = []
    while data.next() is not None:
        entries.append(data.get_object())
    return entries


def test_selector_is_not_echoed_in_the_attach_reply(url):
    address = queue_address("selector")
    with connection(url) as conn:
        send_all(conn, address, ["red", "blue"])
        receiver = conn.create_receiver(address, credit=2, options=Selector("colour = 'red'"))
        # The receiver did ask for a filter: the test means something.
        assert filter_entries(receiver.link.source.filter), "local source has the selector"
        remote_filter = filter_entries(receiver.link.remote_source.filter)
        assert remote_filter == [], f"the broker claims a filter it does not apply: {remote_filter}"
        # And indeed none is applied: a client that went on would get both.
        received = receive_all(receiver, 2, accept=True)
        assert [m.body for m in received] == ["red", "blue"]
        receiver.close()


def test_link_without_filter_keeps_its_address(url):
    address = queue_address("plain")
    with connection(url) as conn:
        receiver = conn.create_receiver(address, credit=1)
        assert receiver.link.remote_source.address == address
        assert filter_entries(receiver.link.remote_source.filter) == []
        sender = conn.create_sender(address)
        sender.send(Message(body="hello"), timeout=TIMEOUT)
        assert receiver.receive(timeout=TIMEOUT).body == "hello"
        receiver.accept()
