"""Paged quorum queues through Qpid Proton against a real ramqp-brokerd:
with no memory budget for bodies, every body goes to segment files; with
small snapshots the log is purged, so after a SIGKILL the queue comes back
from the snapshot's index and the segment files, in order, and a full
drain leaves no segment behind.
"""

from proton import Timeout

from helpers import ABSENCE_WAIT, TIMEOUT, connection, receive_all, send_all

CONFIG = """
[quorum]
snapshot_min_log_bytes = 16384
log_entries_kept_after_snapshot = 5
"""


def segment_files(data_dir):
    return sorted(data_dir.rglob("*.seg"))


def test_paged_bodies_survive_a_kill_and_a_full_drain_removes_them(start_broker, tmp_path):
    config = tmp_path / "paging.toml"
    config.write_text(CONFIG)
    broker = start_broker(
        "--config", str(config),
        "--resident-budget", "0",
        "--segment-max-bytes", "65536",
    )
    address = "/quorum/paged"
    bodies = [f"paged {i:05d} " + "z" * 180 for i in range(3000)]
    with connection(broker.url) as conn:
        send_all(conn, address, bodies)
    segments = segment_files(broker.data_dir)
    assert len(segments) >= 3, f"bodies went to rolled segment files: {segments}"

    with connection(broker.url) as conn:
        receiver = conn.create_receiver(address, credit=200)
        first = receive_all(receiver, 1000, accept=True)
        assert [m.body for m in first] == bodies[:1000]
        # One round trip flushes the last accepts out of the client.
        conn.create_sender(address).close()

    broker.kill()
    broker.restart()
    with connection(broker.url) as conn:
        receiver = conn.create_receiver(address, credit=200)
        rest = []
        while True:
            try:
                wait = TIMEOUT if len(rest) < 2000 else ABSENCE_WAIT
                message = receiver.receive(timeout=wait)
            except Timeout:
                break
            rest.append(message.body)
            receiver.accept()
        # Accepts replicated after the kill's moment come again (at least
        # once): they are from the consumed part and come first.
        assert rest[-2000:] == bodies[1000:], "after SIGKILL: the rest, in order"
        assert set(rest[:-2000]) <= set(bodies[:1000])
        receiver.close()
        conn.create_sender(address).close()

    # Drained: the next restart finds no live record and deletes every segment.
    assert broker.stop() == 0, broker.stderr_tail()
    broker.restart()
    assert segment_files(broker.data_dir) == []
