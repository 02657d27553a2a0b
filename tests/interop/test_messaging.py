"""Publish/consume semantics through Qpid Proton: settlement modes, outcomes
and redelivery, competing consumers, drain."""

import os
import signal
import subprocess
import sys
import textwrap

from proton import Delivery, Link, Message, Timeout
from proton.reactor import AtMostOnce

from helpers import (
    TIMEOUT,
    assert_nothing_arrives,
    assert_queue_empty,
    connection,
    queue_address,
    receive_all,
    send_all,
    settle_next,
)


def test_unsettled_publish_is_accepted_and_consumed_once(url):
    address = queue_address("unsettled")
    bodies = [f"message {i}" for i in range(5)]
    with connection(url) as conn:
        sender = conn.create_sender(address)
        for body in bodies:
            delivery = sender.send(Message(body=body), timeout=TIMEOUT)
            # The broker must answer with a disposition carrying `accepted`,
            # not merely settle.
            assert delivery.remote_state == Delivery.ACCEPTED
            assert delivery.settled, "the broker settled it"
        receiver = conn.create_receiver(address, credit=5)
        received = receive_all(receiver, len(bodies), accept=True)
        assert [m.body for m in received] == bodies, "FIFO order"
        assert all(m.delivery_count == 0 for m in received)
        receiver.close()
    # Accepted means gone: a new consumer sees nothing.
    assert_queue_empty(url, address)


def test_presettled_send_and_at_most_once_receiver(url):
    address = queue_address("presettled")
    bodies = [f"fire-and-forget {i}" for i in range(5)]
    with connection(url) as conn:
        sender = conn.create_sender(address, options=AtMostOnce())
        for body in bodies:
            # Proton settles these locally as it sends them (settled=true on
            # the transfer); send() returns without waiting for the broker.
            sender.send(Message(body=body), timeout=TIMEOUT)

        receiver = conn.create_receiver(address, credit=5, options=AtMostOnce())
        # The broker (as sender) agrees to send pre-settled.
        assert receiver.link.remote_snd_settle_mode == Link.SND_SETTLED
        received = []
        for _ in bodies:
            received.append(receiver.receive(timeout=TIMEOUT).body)
            # Fetcher keeps only unsettled deliveries: these arrived settled.
            assert len(receiver.fetcher.unsettled) == 0, "delivery arrived unsettled"
        assert received == bodies
        receiver.close()
    # Pre-settled deliveries are consumed on sending: nothing to redeliver.
    assert_queue_empty(url, address)


def test_released_and_modified_redelivery_counts(url):
    address = queue_address("outcomes")
    with connection(url) as conn:
        send_all(conn, address, ["again"])
        receiver = conn.create_receiver(address, credit=1)

        message = receiver.receive(timeout=TIMEOUT)
        assert (message.body, message.delivery_count) == ("again", 0)

        # released: redelivered, delivery-count unchanged.
        settle_next(receiver, Delivery.RELEASED)
        message = receiver.receive(timeout=TIMEOUT)
        assert (message.body, message.delivery_count) == ("again", 0)

        # modified + delivery-failed: delivery-count + 1, each time.
        settle_next(receiver, Delivery.MODIFIED, failed=True)
        message = receiver.receive(timeout=TIMEOUT)
        assert (message.body, message.delivery_count) == ("again", 1)
        settle_next(receiver, Delivery.MODIFIED, failed=True)
        message = receiver.receive(timeout=TIMEOUT)
        assert (message.body, message.delivery_count) == ("again", 2)

        # modified without delivery-failed: redelivered, count unchanged.
        settle_next(receiver, Delivery.MODIFIED, failed=False)
        message = receiver.receive(timeout=TIMEOUT)
        assert (message.body, message.delivery_count) == ("again", 2)

        receiver.accept()
        assert_nothing_arrives(receiver)


def test_rejected_message_is_not_redelivered(url):
    address = queue_address("rejected")
    with connection(url) as conn:
        send_all(conn, address, ["poison", "fine"])
        receiver = conn.create_receiver(address, credit=1)
        assert receiver.receive(timeout=TIMEOUT).body == "poison"
        receiver.reject()
        assert receiver.receive(timeout=TIMEOUT).body == "fine"
        receiver.accept()
        assert_nothing_arrives(receiver)


def test_competing_consumers_share_all_messages_exactly_once(url):
    address = queue_address("competing")
    total = 60
    bodies = [f"work {i}" for i in range(total)]
    with connection(url) as conn_a, connection(url) as conn_b:
        # Both consumers attach (with credit) before anything is published,
        # so the broker has two consumers to choose from for every message.
        consumers = {
            "a": conn_a.create_receiver(address, credit=5),
            "b": conn_b.create_receiver(address, credit=5),
        }
        with connection(url) as producer:
            send_all(producer, address, bodies)

        got = {"a": [], "b": []}
        idle_rounds = 0
        while len(got["a"]) + len(got["b"]) < total:
            progressed = False
            for name, receiver in consumers.items():
                # Each connection is driven only while we wait on it, so poll
                # both in turn with a short bound each.
                try:
                    message = receiver.receive(timeout=0.2)
                except Timeout:
                    continue
                receiver.accept()
                got[name].append(message.body)
                progressed = True
            idle_rounds = 0 if progressed else idle_rounds + 1
            assert idle_rounds * 0.4 < TIMEOUT, f"stalled: a={len(got['a'])} b={len(got['b'])}"

        assert got["a"] and got["b"], f"one consumer starved: a={len(got['a'])} b={len(got['b'])}"
        everything = got["a"] + got["b"]
        assert sorted(everything) == sorted(bodies), "each message exactly once"
        for receiver in consumers.values():
            assert_nothing_arrives(receiver)


def test_unsettled_deliveries_of_a_detached_link_are_redelivered(url):
    address = queue_address("detach")
    bodies = [f"unacked {i}" for i in range(6)]
    with connection(url) as conn:
        send_all(conn, address, bodies)
        first = conn.create_receiver(address, credit=3)
        held = receive_all(first, 3, accept=False)
        assert [m.body for m in held] == bodies[:3]
        first.close()  # detach with three deliveries unsettled

        second = conn.create_receiver(address, credit=10)
        redelivered = receive_all(second, len(bodies), accept=True)
        assert sorted(m.body for m in redelivered) == sorted(bodies), "none lost, none doubled"
        assert_nothing_arrives(second)


def test_unsettled_deliveries_of_a_closed_connection_are_redelivered(url):
    address = queue_address("conn-close")
    bodies = [f"unacked {i}" for i in range(6)]
    with connection(url) as producer:
        send_all(producer, address, bodies)
    with connection(url) as conn:
        held = receive_all(conn.create_receiver(address, credit=4), 4, accept=False)
        assert len(held) == 4
    # connection closed with four deliveries unsettled
    with connection(url) as conn:
        receiver = conn.create_receiver(address, credit=10)
        got = receive_all(receiver, len(bodies), accept=True)
        assert sorted(m.body for m in got) == sorted(bodies)
        assert_nothing_arrives(receiver)


# A consumer in its own process, so that it can be killed with SIGKILL: the
# broker sees the TCP connection die with no close, detach or disposition.
CONSUMER_SCRIPT = textwrap.dedent(
    """
    import sys
    from proton.utils import BlockingConnection
    url, address, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    conn = BlockingConnection(url, timeout=30)
    receiver = conn.create_receiver(address, credit=count)
    for _ in range(count):
        receiver.receive(timeout=30)
    print("holding", flush=True)
    sys.stdin.read()  # wait to be killed, deliveries unsettled
    """
)


def test_unsettled_deliveries_of_a_killed_consumer_are_redelivered(url):
    address = queue_address("killed")
    bodies = [f"unacked {i}" for i in range(5)]
    with connection(url) as producer:
        send_all(producer, address, bodies)

    consumer = subprocess.Popen(
        [sys.executable, "-c", CONSUMER_SCRIPT, url, address, "3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # readline() is bounded: the script's own receives time out in 30 s
        # and exit, closing stdout.
        assert consumer.stdout.readline().strip() == "holding"
        os.kill(consumer.pid, signal.SIGKILL)
        consumer.wait(timeout=TIMEOUT)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(timeout=TIMEOUT)
        consumer.stdin.close()
        consumer.stdout.close()

    with connection(url) as conn:
        receiver = conn.create_receiver(address, credit=10)
        got = receive_all(receiver, len(bodies), accept=True)
        assert sorted(m.body for m in got) == sorted(bodies)
        assert_nothing_arrives(receiver)


def test_drain_delivers_what_is_there_then_zeroes_credit(url):
    address = queue_address("drain")
    with connection(url) as conn:
        send_all(conn, address, ["d1", "d2", "d3"])
        # credit=None: the Fetcher gets no flow controller, so the only
        # credit on this link is what this test issues.
        receiver = conn.create_receiver(address, credit=None)
        link = receiver.link
        assert link.credit == 0

        link.drain(10)
        # The broker must send the three messages and then a flow with
        # drain=true that advances delivery-count over the unused credit.
        conn.wait(
            lambda: receiver.fetcher.has_message == 3 and link.credit == 0,
            timeout=TIMEOUT,
            msg="drain not completed by the broker",
        )
        assert not link.draining()
        # Pop straight from the fetcher: BlockingReceiver.receive() would
        # first grant one credit of its own when the link has none.
        assert [receiver.fetcher.pop().body for _ in range(3)] == ["d1", "d2", "d3"]
        for _ in range(3):
            receiver.accept()

        # Drain on an empty queue completes at once with no message.
        link.drain(5)
        conn.wait(lambda: link.credit == 0, timeout=TIMEOUT, msg="empty drain not completed")
        assert receiver.fetcher.has_message == 0

        # Credit really is gone: a new message waits until credit is given.
        link.drain_mode = False
        send_all(conn, address, ["after"])
        try:
            conn.wait(lambda: receiver.fetcher.has_message > 0, timeout=1.0)
            raise AssertionError("broker sent a message without credit after drain")
        except Timeout:
            pass
        link.flow(1)
        conn.wait(lambda: receiver.fetcher.has_message > 0, timeout=TIMEOUT)
        assert receiver.fetcher.pop().body == "after"
        receiver.accept()
