"""Queue policies through Qpid Proton, against one ramqp-brokerd per queue
kind (transient and quorum) whose config file has [[policies]]:

- reject-publish: past max_length a publish is REJECTED with
  amqp:resource-limit-exceeded and the queue holds max_length;
- drop-head: the newest max_length stay;
- max_length_bytes;
- a header ttl of 200 ms: not delivered after 1 s, and the node's sweep
  takes the depth to 0 without a consumer (seen through the HTTP API);
  message_ttl_ms from the policy likewise;
- a queue no policy matches takes everything;
- SIGHUP re-reads the file's policies and puts them on the queue that
  exists (and GET /api/policies shows them)."""

import json
import signal
import urllib.request
import uuid

import pytest
from proton import Delivery, Message

from cluster import free_ports
from helpers import TIMEOUT, assert_nothing_arrives, connection, receive_all, wait_until

POLICIES = """
[[policies]]
pattern = "/{kind}/capped-{tag}"
max_length = 3

[[policies]]
pattern = "/{kind}/newest-{tag}"
max_length = 3
overflow = "drop-head"

[[policies]]
pattern = "/{kind}/bytes-{tag}"
max_length_bytes = {bytes}

[[policies]]
pattern = "/{kind}/short-{tag}"
message_ttl_ms = 300
"""

def encoded_len(body):
    """Bytes of `body` as Proton sends it (the limit counts the encoded
    message)."""
    message = Message(body=body)
    message.durable = False
    return len(message.encode())


@pytest.fixture(params=["queues", "quorum"])
def setup(request, start_broker, tmp_path):
    kind = request.param
    tag = uuid.uuid4().hex[:8]
    config = tmp_path / "policies.toml"
    config.write_text(POLICIES.format(kind=kind, tag=tag, bytes=3 * encoded_len("m-0")))
    (http_port,) = free_ports(1)
    broker = start_broker("--config", str(config), "--http-listen", f"127.0.0.1:{http_port}")
    return broker, kind, tag, config, f"http://127.0.0.1:{http_port}"


def depth(api, address):
    kind, name = address.strip("/").split("/")
    with urllib.request.urlopen(f"{api}/api/queues/{kind}/{name}", timeout=TIMEOUT) as answer:
        queue = json.load(answer)
    return queue["ready"] + queue["unacknowledged"]


def publish(sender, body, ttl=None):
    message = Message(body=body)
    if ttl is not None:
        message.ttl = ttl
    # error_states=[]: a REJECTED outcome is what some tests expect.
    return sender.send(message, timeout=TIMEOUT, error_states=[])


def assert_full(delivery):
    assert delivery.remote_state == Delivery.REJECTED, delivery.remote_state
    condition = delivery.remote.condition
    assert condition is not None and condition.name == "amqp:resource-limit-exceeded", condition


def test_length_limits_and_ttl(setup):
    broker, kind, tag, _, api = setup
    with connection(broker.url) as conn:
        capped = f"/{kind}/capped-{tag}"
        sender = conn.create_sender(capped)
        for n in range(3):
            assert publish(sender, f"m-{n}").remote_state == Delivery.ACCEPTED
        assert_full(publish(sender, "m-3"))
        assert depth(api, capped) == 3

        newest = f"/{kind}/newest-{tag}"
        sender = conn.create_sender(newest)
        for n in range(6):
            assert publish(sender, f"m-{n}").remote_state == Delivery.ACCEPTED
        wait_until(lambda: depth(api, newest) == 3, TIMEOUT, "drop-head down to 3")
        receiver = conn.create_receiver(newest, credit=10)
        assert [m.body for m in receive_all(receiver, 3)] == ["m-3", "m-4", "m-5"]

        by_bytes = f"/{kind}/bytes-{tag}"
        sender = conn.create_sender(by_bytes)
        for n in range(3):
            assert publish(sender, f"m-{n}").remote_state == Delivery.ACCEPTED
        assert_full(publish(sender, "m-3"))

        ttl = f"/{kind}/ttl-{tag}"
        sender = conn.create_sender(ttl)
        assert publish(sender, "expires", ttl=0.2).remote_state == Delivery.ACCEPTED
        assert publish(sender, "stays").remote_state == Delivery.ACCEPTED
        # Only the sweep (after the ttl) takes the depth to 1: no consumer.
        wait_until(lambda: depth(api, ttl) == 1, TIMEOUT, "the sweep removed the expired one")
        receiver = conn.create_receiver(ttl, credit=10)
        assert [m.body for m in receive_all(receiver, 1)] == ["stays"]
        assert_nothing_arrives(receiver)

        short = f"/{kind}/short-{tag}"
        sender = conn.create_sender(short)
        assert publish(sender, "short-lived").remote_state == Delivery.ACCEPTED
        wait_until(lambda: depth(api, short) == 0, TIMEOUT, "message_ttl_ms swept it")
        assert_nothing_arrives(conn.create_receiver(short, credit=10))

        free = f"/{kind}/free-{tag}"
        sender = conn.create_sender(free)
        for n in range(6):
            assert publish(sender, f"m-{n}").remote_state == Delivery.ACCEPTED
        assert depth(api, free) == 6


def test_sighup_applies_the_files_new_policies_to_existing_queues(setup):
    broker, kind, tag, config, api = setup
    later = f"/{kind}/later-{tag}"
    with connection(broker.url) as conn:
        sender = conn.create_sender(later)
        for n in range(2):
            assert publish(sender, f"m-{n}").remote_state == Delivery.ACCEPTED
        config.write_text(config.read_text() + f'\n[[policies]]\npattern = "{later}"\nmax_length = 2\n')
        broker.proc.send_signal(signal.SIGHUP)

        def shown():
            with urllib.request.urlopen(f"{api}/api/policies", timeout=TIMEOUT) as answer:
                return any(p["pattern"] == later for p in json.load(answer))

        wait_until(shown, TIMEOUT, "the reloaded policies are in force", broker.stderr_tail)
        assert_full(publish(sender, "m-2"))
        assert depth(api, later) == 2
