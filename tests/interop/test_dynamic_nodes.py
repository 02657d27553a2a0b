"""Dynamic nodes through Qpid Proton: a receiver with a dynamic source
(`create_receiver(None, dynamic=True)`) gets a temporary queue whose
generated address comes back in the attach; request/reply through
`reply-to` works with the responder answering through anonymous relay or
through a sender attached to the reply address, with requests on a
transient or a quorum queue; once the receiver closes (or its connection
goes), its queue is gone: a reply to it is rejected with amqp:not-found."""

import pytest
from proton import Delivery, Message

from helpers import TIMEOUT, connection, queue_address, receive_all


def not_found(sender, to):
    delivery = sender.send(Message(address=to, body="late"), timeout=TIMEOUT, error_states=[])
    return (
        delivery.remote_state == Delivery.REJECTED
        and delivery.remote.condition is not None
        and delivery.remote.condition.name == "amqp:not-found"
    )


@pytest.mark.parametrize("answer", ["relay", "attached"])
@pytest.mark.parametrize("requests", ["transient", "quorum"])
def test_request_reply_through_a_dynamic_reply_queue(url, answer, requests):
    address = queue_address("requests") if requests == "transient" else f"/quorum/requests-{answer}"
    with connection(url) as requester, connection(url) as responder:
        replies = requester.create_receiver(None, dynamic=True, credit=10)
        reply_to = replies.link.remote_source.address
        assert reply_to and reply_to.startswith("/queues/"), reply_to
        assert replies.link.remote_source.dynamic
        ask = requester.create_sender(address)
        ask.send(Message(body="ping", reply_to=reply_to), timeout=TIMEOUT)

        incoming = responder.create_receiver(address, credit=10)
        request = incoming.receive(timeout=TIMEOUT)
        incoming.accept()
        assert request.body == "ping" and request.reply_to == reply_to
        if answer == "relay":
            out = responder.create_sender(None)
            delivery = out.send(Message(address=request.reply_to, body="pong"), timeout=TIMEOUT)
        else:
            out = responder.create_sender(request.reply_to)
            delivery = out.send(Message(body="pong"), timeout=TIMEOUT)
        assert delivery.remote_state == Delivery.ACCEPTED
        assert [m.body for m in receive_all(replies, 1)] == ["pong"]

        replies.close()
        relay = responder.create_sender(None)
        assert not_found(relay, reply_to), "the reply queue went with its link"


def test_dynamic_queue_goes_with_its_connection(url):
    with connection(url) as requester:
        receiver = requester.create_receiver(None, dynamic=True, credit=1)
        reply_to = receiver.link.remote_source.address
        with connection(url) as other:
            # Alive while the requester is connected.
            out = other.create_sender(None)
            delivery = out.send(Message(address=reply_to, body="x"), timeout=TIMEOUT)
            assert delivery.remote_state == Delivery.ACCEPTED
    with connection(url) as other:
        relay = other.create_sender(None)
        assert not_found(relay, reply_to), "deleted when its connection closed"
