"""`ramqp-ctl queue purge|delete` on a 3-node cluster of real processes,
with Qpid Proton clients attached: any node may be asked (it passes the
request on to the queue's owner or leader); a purge drops the waiting
messages on every replica and leaves those out with a consumer; a deletion
detaches the queue's links with amqp:resource-deleted."""

import re

import pytest
from proton import Message, Timeout
from proton.utils import LinkDetached

from cluster import cluster3  # noqa: F401
from helpers import TIMEOUT, connection, receive_all, send_all, wait_until


def expect_deleted(receiver, already_delivered):
    """The broker detaches `receiver` with amqp:resource-deleted (after the
    messages it had already sent it)."""
    for _ in range(already_delivered + 1):
        try:
            receiver.receive(timeout=TIMEOUT)
            receiver.accept()
        except LinkDetached as detached:
            assert detached.condition == "amqp:resource-deleted", detached.condition
            return
    raise AssertionError("the link was not detached")


@pytest.mark.parametrize("address", ["/quorum/ctl-q", "/queues/ctl-t"])
def test_purge_then_delete_through_any_node(cluster3, address):
    with connection(cluster3.url(1)) as producer:
        send_all(producer, address, [f"m{i}" for i in range(10)])
    with connection(cluster3.url(2)) as consumer_conn:
        receiver = consumer_conn.create_receiver(address, credit=2)
        held = [receiver.receive(timeout=TIMEOUT) for _ in range(2)]
        assert [m.body for m in held] == ["m0", "m1"]

        purged = cluster3.ctl(3, "queue", "purge", address)
        match = re.search(r"\((\d+) messages\)", purged.stdout)
        assert match, purged.stdout
        n_purged = int(match.group(1))
        # What was out with the consumer (Proton keeps its credit topped
        # up, so more than the two received) stays its own; nothing else.
        receiver.accept()
        receiver.accept()
        rest = []
        while True:
            try:
                rest.append(receiver.receive(timeout=1.0).body)
                receiver.accept()
            except Timeout:
                break
        kept = [m.body for m in held] + rest
        assert kept == [f"m{i}" for i in range(len(kept))], kept
        assert len(kept) + n_purged == 10, (kept, n_purged)
        assert n_purged >= 4, "the credit Proton grants is far below 10"
        if address.startswith("/quorum/"):
            # Every replica agrees: with the kept ones accepted, nothing is left.
            wait_until(
                lambda: all(
                    (cluster3.queue_status(n, address) or {}).get("ready") == 0
                    for n in cluster3.nodes
                ),
                TIMEOUT,
                "every replica purged",
            )

        with connection(cluster3.url(1)) as producer:
            send_all(producer, address, ["after"])
        deleted = cluster3.ctl(3, "queue", "delete", address)
        assert "deleted" in deleted.stdout, deleted.stdout
        expect_deleted(receiver, 1)
    missing = cluster3.ctl(1, "queue", "delete", address, check=False)
    assert missing.returncode != 0 and "does not exist" in missing.stderr, missing
    if address.startswith("/quorum/"):
        wait_until(
            lambda: all(cluster3.queue_status(n, address) is None for n in cluster3.nodes),
            TIMEOUT,
            "the queue is gone from every node",
        )
    # Declared again by a new attach: empty.
    with connection(cluster3.url(1)) as conn:
        send_all(conn, address, ["fresh"])
        again = conn.create_receiver(address, credit=10)
        got = receive_all(again, 1)
        assert [m.body for m in got] == ["fresh"]
        try:
            extra = again.receive(timeout=1.0)
            raise AssertionError(f"left over from before: {extra.body!r}")
        except Timeout:
            pass


def test_bad_address_is_refused(cluster3):
    result = cluster3.ctl(1, "queue", "purge", "/topics/x", check=False)
    assert result.returncode != 0, result.stdout
