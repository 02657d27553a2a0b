"""Small helpers shared by the interop tests (Qpid Proton 0.37, blocking API)."""

import contextlib
import time
import uuid

from proton import Delivery, Message, Timeout
from proton.utils import BlockingConnection

# Upper bound for any single wait on the broker. Generous because the broker
# under test is a debug build on a shared 2-core machine; a healthy run
# never gets near it.
TIMEOUT = 15.0

# How long a test waits to be sure something does NOT arrive. Absence can
# not be awaited as a condition, so this is the one place a fixed wait is
# used; it is short and only ever reached on the success path once per check.
ABSENCE_WAIT = 1.0


def wait_until(predicate, timeout, what, show=lambda: ""):
    """Poll `predicate` every 0.2 s until it holds; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s {show()}"
        time.sleep(0.2)


def queue_address(hint: str) -> str:
    """A fresh /queues/ address so tests never see each other's messages."""
    return f"/queues/{hint}-{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def connection(url: str, **kwargs):
    """A BlockingConnection closed at the end of the block, even on failure."""
    conn = BlockingConnection(url, timeout=TIMEOUT, **kwargs)
    try:
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def send_all(conn, address: str, bodies) -> None:
    """Publish unsettled and require `accepted` for every message."""
    sender = conn.create_sender(address)
    for body in bodies:
        delivery = sender.send(Message(body=body), timeout=TIMEOUT)
        assert delivery.remote_state == Delivery.ACCEPTED, (
            f"publish of {body!r} settled with state {delivery.remote_state}, expected ACCEPTED"
        )
    sender.close()


def settle_next(receiver, state, failed: bool = False) -> None:
    """Settle the oldest unsettled delivery of a BlockingReceiver with
    `state`; `failed` sets delivery-failed on a MODIFIED outcome (Proton's
    own BlockingReceiver.release() never does)."""
    delivery = receiver.fetcher.unsettled.popleft()
    if failed:
        delivery.local.failed = True
    delivery.update(state)
    delivery.settle()


def receive_all(receiver, count: int, accept: bool = True):
    """Receive exactly `count` messages (each wait bounded by TIMEOUT)."""
    messages = []
    for _ in range(count):
        message = receiver.receive(timeout=TIMEOUT)
        messages.append(message)
        if accept:
            receiver.accept()
    return messages


def assert_nothing_arrives(receiver) -> None:
    try:
        message = receiver.receive(timeout=ABSENCE_WAIT)
    except Timeout:
        return
    raise AssertionError(f"unexpected message {message.body!r}")


def assert_queue_empty(url: str, address: str) -> None:
    with connection(url) as conn:
        assert_nothing_arrives(conn.create_receiver(address, credit=10))
