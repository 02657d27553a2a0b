"""Dead-lettering and the delivery limit through Qpid Proton, against one
ramqp-brokerd whose [[policies]] give the source queues a dead-letter
address and a delivery limit: a rejected message reaches the dead-letter
queue with RabbitMQ's annotations (x-opt-deaths, x-first-death-queue and
-reason); a message modified as delivery-failed up to the limit, or left
unsettled by consumers that went away, arrives with reason delivery_limit;
without a dead-letter address it is dropped."""

import uuid

import pytest
from proton import Delivery, Message

from helpers import TIMEOUT, assert_nothing_arrives, connection, settle_next

POLICIES = """
[[policies]]
pattern = "/{kind}/src-*"
dead_letter_address = "/{kind}/dlq-{tag}"
delivery_limit = 2

[[policies]]
pattern = "/{kind}/drop-*"
delivery_limit = 1
"""


@pytest.fixture(params=["queues", "quorum"])
def setup(request, start_broker, tmp_path):
    kind = request.param
    tag = uuid.uuid4().hex[:8]
    config = tmp_path / "policies.toml"
    config.write_text(POLICIES.format(kind=kind, tag=tag))
    broker = start_broker("--config", str(config))
    return broker.url, kind, tag


def expect_dead_letter(dlq, body, queue, reason):
    message = dlq.receive(timeout=TIMEOUT)
    assert message.body == body
    annotations = message.annotations
    deaths = annotations["x-opt-deaths"]
    assert len(deaths) == 1, deaths
    assert deaths[0]["queue"] == queue
    assert deaths[0]["reason"] == reason
    assert deaths[0]["count"] == 1
    assert annotations["x-first-death-queue"] == queue
    assert annotations["x-first-death-reason"] == reason
    assert annotations["x-last-death-reason"] == reason
    assert not message.delivery_count, "counted from 0 in the dead-letter queue"
    dlq.accept()


def test_rejected_and_over_the_limit_are_dead_lettered(setup):
    url, kind, tag = setup
    src = f"/{kind}/src-{tag}"
    with connection(url) as conn:
        dlq = conn.create_receiver(f"/{kind}/dlq-{tag}", credit=10)
        sender = conn.create_sender(src)

        def publish(body):
            # One at a time: Proton's receiver tops its credit up at once.
            assert sender.send(Message(body=body), timeout=TIMEOUT).remote_state == Delivery.ACCEPTED

        publish("rejected")
        receiver = conn.create_receiver(src, credit=1)
        assert receiver.receive(timeout=TIMEOUT).body == "rejected"
        receiver.reject()
        expect_dead_letter(dlq, "rejected", src, "rejected")

        publish("failed")
        for attempt in range(2):
            message = receiver.receive(timeout=TIMEOUT)
            assert message.body == "failed"
            assert (message.delivery_count or 0) == attempt
            settle_next(receiver, Delivery.MODIFIED, failed=True)
        expect_dead_letter(dlq, "failed", src, "delivery_limit")

        # Two consumers go away without settling: two failed deliveries.
        publish("abandoned")
        for attempt in range(2):
            assert receiver.receive(timeout=TIMEOUT).body == "abandoned"
            receiver.close()
            if attempt == 0:
                receiver = conn.create_receiver(src, credit=1)
        expect_dead_letter(dlq, "abandoned", src, "delivery_limit")
        assert_nothing_arrives(dlq)


def test_without_a_dead_letter_address_the_limit_drops(setup):
    url, kind, tag = setup
    address = f"/{kind}/drop-{tag}"
    with connection(url) as conn:
        sender = conn.create_sender(address)
        for body in ["dropped", "kept"]:
            assert sender.send(Message(body=body), timeout=TIMEOUT).remote_state == Delivery.ACCEPTED
        receiver = conn.create_receiver(address, credit=5)
        assert receiver.receive(timeout=TIMEOUT).body == "dropped"
        settle_next(receiver, Delivery.MODIFIED, failed=True)
        assert receiver.receive(timeout=TIMEOUT).body == "kept"
        receiver.accept()
        assert_nothing_arrives(receiver)
