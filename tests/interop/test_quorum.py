"""Quorum queues (`/quorum/<name>`) through Qpid Proton against a real
ramqp-brokerd process: one replica on a single node, so `accepted` means
committed and fsynced into this node's redb log. The tests restart the
broker on the same data directory, after a clean stop (SIGTERM) and after
a crash (SIGKILL under load), and check that what was accepted survives.
"""

import random
import subprocess
import sys
import time
from collections import Counter

from proton import Delivery, Timeout

from helpers import (
    ABSENCE_WAIT,
    TIMEOUT,
    assert_nothing_arrives,
    assert_queue_empty,
    connection,
    receive_all,
    send_all,
    settle_next,
)
from publisher import PUBLISHER_SCRIPT, PublisherOutput


def bodies_for(prefix: str, count: int):
    return [f"{prefix} {i:05d}" for i in range(count)]


def test_round_trip_keeps_order_and_empties_the_queue(broker):
    address = "/quorum/q"
    bodies = bodies_for("round-trip", 500)
    with connection(broker.url) as conn:
        # Unsettled publishes; send_all requires `accepted` for each one.
        send_all(conn, address, bodies)
        receiver = conn.create_receiver(address, credit=100)
        received = receive_all(receiver, len(bodies), accept=True)
        assert [m.body for m in received] == bodies, "FIFO order"
        assert all(m.delivery_count == 0 for m in received)
        receiver.close()
    assert_queue_empty(broker.url, address)


def test_clean_stop_keeps_what_was_not_accepted(broker):
    address = "/quorum/recovery"
    bodies = bodies_for("recovery", 300)
    with connection(broker.url) as conn:
        send_all(conn, address, bodies)

    with connection(broker.url) as conn:
        receiver = conn.create_receiver(address, credit=50)
        consumed = receive_all(receiver, 100, accept=True)
        assert [m.body for m in consumed] == bodies[:100]
        # 50 more delivered and left unsettled while the broker stops.
        held = receive_all(receiver, 50, accept=False)
        assert [m.body for m in held] == bodies[100:150]
        # Proton's blocking API writes to the socket only while it waits, so
        # the last accept would still sit in the client at SIGTERM (and the
        # message would rightly come back). One round trip on this
        # connection flushes it: the broker has read all 100 accepts.
        conn.create_sender(address).close()

        assert broker.stop() == 0, broker.stderr_tail()

    broker.restart()
    with connection(broker.url) as conn:
        receiver = conn.create_receiver(address, credit=100)
        remaining = receive_all(receiver, 200, accept=True)
        assert [m.body for m in remaining] == bodies[100:], (
            "after a restart: the 200 not accepted (50 of them delivered "
            "unsettled at the stop), in publish order"
        )
        assert_nothing_arrives(receiver)


KILL_AFTER_ACCEPTS = 1000
# Accepts come back in batches (one Raft entry each), so killing right at
# the 1000th would always hit the same phase; a random delay of up to this
# much lands the kill anywhere in a propose/fsync/confirm cycle.
KILL_JITTER_S = 0.05
PUBLISHER_WINDOW = 100
PUBLISHER_LIMIT = 200_000
PUBLISHER_DEADLINE_S = 40.0


def test_kill_9_under_load_loses_no_accepted_message(broker):
    address = "/quorum/crash"
    publisher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PUBLISHER_SCRIPT,
            broker.url,
            address,
            str(PUBLISHER_WINDOW),
            str(PUBLISHER_LIMIT),
            str(PUBLISHER_DEADLINE_S),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        output = PublisherOutput(publisher.stdout, KILL_AFTER_ACCEPTS)
        assert output.enough.wait(PUBLISHER_DEADLINE_S + TIMEOUT), "publisher made no progress"
        assert len(output.accepted) >= KILL_AFTER_ACCEPTS, (
            f"publisher ended early (exit {publisher.poll()}, {output.other}) "
            f"after {len(output.accepted)} accepts"
        )
        jitter_s = random.uniform(0, KILL_JITTER_S)
        time.sleep(jitter_s)
        broker.kill()
        # The publisher sees its connection die and exits.
        publisher.wait(timeout=TIMEOUT)
        output.thread.join(timeout=TIMEOUT)
        assert not output.thread.is_alive()
    finally:
        if publisher.poll() is None:
            publisher.kill()
            publisher.wait(timeout=TIMEOUT)
        publisher.stdout.close()

    assert output.not_accepted == [], "no publish is refused while the broker runs"
    sent = set(output.sent)
    accepted = set(output.accepted)
    assert len(sent) == len(output.sent) and len(accepted) == len(output.accepted)
    assert accepted <= sent
    unconfirmed = sent - accepted

    broker.restart()
    got = []
    with connection(broker.url) as conn:
        receiver = conn.create_receiver(address, credit=200)
        while True:
            # Wait long for what must be there, briefly for the rest.
            wait_s = TIMEOUT if len(set(got)) < len(accepted) else ABSENCE_WAIT
            try:
                message = receiver.receive(timeout=wait_s)
            except Timeout:
                break
            receiver.accept()
            got.append(message.body)
            assert len(got) <= 2 * len(sent), "runaway redelivery"

    counts = Counter(got)
    present = set(counts)
    lost = accepted - present
    duplicates = sum(n - 1 for n in counts.values())
    never_sent = present - sent
    unconfirmed_present = unconfirmed & present
    order_breaks = sum(1 for a, b in zip(got, got[1:]) if b <= a)
    print(
        f"\nkill -9 under load ({jitter_s * 1000:.0f} ms after accept #{KILL_AFTER_ACCEPTS}): sent={len(sent)} accepted={len(accepted)} "
        f"unconfirmed={len(unconfirmed)} (present after restart: "
        f"{len(unconfirmed_present)}, absent: {len(unconfirmed - present)}) "
        f"consumed={len(got)} lost={len(lost)} duplicates={duplicates} "
        f"never_sent={len(never_sent)} order_breaks={order_breaks}"
    )
    assert not lost, f"{len(lost)} accepted messages lost, e.g. {sorted(lost)[:10]}"
    assert not never_sent, f"messages that were never sent: {sorted(never_sent)[:10]}"


def test_delivery_count_of_a_failed_delivery_survives_a_restart(broker):
    address = "/quorum/redelivery"
    with connection(broker.url) as conn:
        send_all(conn, address, ["fragile"])
        receiver = conn.create_receiver(address, credit=1)
        message = receiver.receive(timeout=TIMEOUT)
        assert (message.body, message.delivery_count) == ("fragile", 0)
        settle_next(receiver, Delivery.MODIFIED, failed=True)
        message = receiver.receive(timeout=TIMEOUT)
        assert (message.body, message.delivery_count) == ("fragile", 1)
        # Left unsettled while the broker stops.
        assert broker.stop() == 0, broker.stderr_tail()

    broker.restart()
    with connection(broker.url) as conn:
        receiver = conn.create_receiver(address, credit=1)
        message = receiver.receive(timeout=TIMEOUT)
        assert message.body == "fragile"
        assert message.delivery_count >= 1, (
            "the failed delivery attempt was replicated before the restart"
        )
        receiver.accept()
        assert_nothing_arrives(receiver)
