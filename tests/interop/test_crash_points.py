"""Crash tests at named steps of the paged quorum queue's durable paths,
with real processes and real files: `RAMQP_CRASH_AT=<point>` makes
ramqp-brokerd SIGKILL itself exactly there (broker::crash_point), then it
is restarted on the same data dir and every accepted message must come
back, in order, nothing unexpected, and no leftover file after a drain.

Points: between a snapshot's segment fsync and its file; between the
snapshot file and the log purge; mid-compaction (copies fsynced but not
renamed; renamed but not named by a snapshot); mid-install of a streamed
snapshot on a follower (staged; recorded). Plus a torn segment tail after
a kill -9 under load.
"""

import pytest
from proton import Delivery, Message, Timeout

from cluster import Cluster
from helpers import ABSENCE_WAIT, TIMEOUT, connection, wait_until

CONFIG = """
[quorum]
snapshot_min_log_bytes = 16384
log_entries_kept_after_snapshot = 5
"""

PAGED = ["--resident-budget", "0", "--segment-max-bytes", "65536"]


def bodies(prefix, count, start=0):
    return [f"{prefix} {i:05d} " + "c" * 180 for i in range(start, start + count)]


def config_args(tmp_path):
    config = tmp_path / "crash.toml"
    config.write_text(CONFIG)
    return ["--config", str(config), *PAGED]


def publish_until_gone(url, address, candidates):
    """Publish one by one (each waits for its outcome) until the list ends
    or the broker goes away; returns (attempted, accepted)."""
    attempted, accepted = [], []
    try:
        with connection(url) as conn:
            sender = conn.create_sender(address)
            for body in candidates:
                attempted.append(body)
                delivery = sender.send(Message(body=body), timeout=TIMEOUT)
                if delivery.remote_state != Delivery.ACCEPTED:
                    break
                accepted.append(body)
    except Exception:  # noqa: BLE001 - the broker killed itself: any Proton error
        pass
    return attempted, accepted


def drain(url, address, expected_at_least):
    """Receive and accept until the queue stays empty for ABSENCE_WAIT."""
    got = []
    with connection(url) as conn:
        receiver = conn.create_receiver(address, credit=500)
        while True:
            wait = TIMEOUT if len(got) < expected_at_least else ABSENCE_WAIT
            try:
                message = receiver.receive(timeout=wait)
            except Timeout:
                break
            got.append(message.body)
            receiver.accept()
        receiver.close()
        # One round trip, so the last accepts are through before closing.
        conn.create_sender(address).close()
    return got


def check_recovered(got, attempted, must_have):
    """What came back: no duplicate, nothing never published, in publish
    order, and every message in `must_have` present."""
    assert len(got) == len(set(got)), "a message came back twice"
    order = {body: i for i, body in enumerate(attempted)}
    unexpected = [b for b in got if b not in order]
    assert not unexpected, f"never published: {unexpected[:3]}"
    positions = [order[b] for b in got]
    breaks = [(i, positions[i - 1], positions[i]) for i in range(1, len(positions))
              if positions[i] < positions[i - 1]]
    assert not breaks, f"not in publish order at (place, before, after): {breaks[:5]}"
    missing = [b for b in must_have if b not in set(got)]
    assert not missing, f"{len(missing)} accepted messages lost, e.g. {missing[:3]}"


def crashed_at(process, point):
    code = process.wait_exit()
    process.killed = True
    assert code == -9, f"exit {code}, expected SIGKILL at {point}\n{process.stderr_tail()}"
    log = process.stderr_path.read_text(errors="replace")
    assert f"crash point {point} reached" in log, process.stderr_tail()


def restart_unarmed(process):
    process.env.pop("RAMQP_CRASH_AT", None)
    process.restart()


def assert_drained_files(data_dir):
    """After a drain and a clean restart: no compaction or install
    leftover, one segment generation, and no segment bytes at all. A clean
    stop snapshots what each queue applied, so the restart has no log tail
    to replay and deletes every segment with nothing live before it
    listens. (Without that snapshot the files seen here depended on the
    replay, which runs after the broker listens: segments named live by an
    older snapshot stayed until it released them, and bodies enqueued in the
    tail were paged again into a segment that then stayed on disk.)"""
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    stale = [p for p in files if p.name.endswith(".tmp") or "incoming" in p.name]
    assert stale == [], f"leftovers: {stale}"
    generations = {p.parent for p in files if p.suffix == ".seg"}
    assert len(generations) <= 1, f"several generations: {generations}"
    segment_bytes = sum(p.stat().st_size for p in files if p.suffix == ".seg")
    listing = sorted(f"{p.relative_to(data_dir)} {p.stat().st_size}" for p in files)
    assert segment_bytes == 0, f"{segment_bytes} segment bytes after a drain: {listing}"


@pytest.mark.parametrize("point", ["snapshot-segments-synced", "snapshot-recorded"])
def test_kill_during_a_snapshot(start_broker, tmp_path, point):
    broker = start_broker(*config_args(tmp_path), env={"RAMQP_CRASH_AT": point})
    address = "/quorum/crash-snapshot"
    attempted, accepted = publish_until_gone(broker.url, address, bodies("snap", 20000))
    crashed_at(broker, point)
    assert accepted, "some publishes were accepted before the crash point"

    restart_unarmed(broker)
    got = drain(broker.url, address, len(accepted))
    check_recovered(got, attempted, accepted)

    assert broker.stop() == 0, broker.stderr_tail()
    broker.restart()
    assert_drained_files(broker.data_dir)


@pytest.mark.parametrize("point", ["compaction-copied", "compaction-renamed"])
def test_kill_mid_compaction(start_broker, tmp_path, point):
    broker = start_broker(*config_args(tmp_path), env={"RAMQP_CRASH_AT": point})
    address = "/quorum/crash-compaction"
    first = bodies("cmp", 3000)
    attempted, accepted = publish_until_gone(broker.url, address, first)
    assert accepted == first, "no compaction before anything is consumed"

    # Consume all; accept two of every three and keep the third unsettled,
    # so every sealed segment falls under half live. The accepts (and, if
    # needed, more publishes) bring the snapshot that compacts.
    consumed = set()
    try:
        with connection(broker.url) as conn:
            receiver = conn.create_receiver(address, credit=500)
            kept = []
            for i in range(len(first)):
                message = receiver.receive(timeout=TIMEOUT)
                # The delivery just received (Proton's accept() would
                # settle the oldest unsettled one instead).
                delivery = receiver.fetcher.unsettled.pop()
                if i % 3 == 2:
                    kept.append(delivery)
                else:
                    delivery.update(Delivery.ACCEPTED)
                    delivery.settle()
                    consumed.add(message.body)
            more, more_accepted = publish_until_gone(broker.url, address, bodies("cmp", 20000, 3000))
            attempted += more
            accepted += more_accepted
    except Exception:  # noqa: BLE001 - the broker killed itself mid-way
        pass
    crashed_at(broker, point)

    restart_unarmed(broker)
    must_have = [b for b in accepted if b not in consumed]
    got = drain(broker.url, address, len(must_have))
    check_recovered(got, attempted, must_have)

    assert broker.stop() == 0, broker.stderr_tail()
    broker.restart()
    assert_drained_files(broker.data_dir)


def test_torn_segment_tail_after_kill(start_broker):
    # Default snapshot sizes: no snapshot names these records yet, the log
    # still holds them, so a torn tail is what a crash may leave.
    broker = start_broker(*PAGED)
    address = "/quorum/crash-torn"
    attempted, accepted = publish_until_gone(broker.url, address, bodies("torn", 1500))
    assert accepted == attempted
    broker.kill()
    # The newest segment with records (the active one may still be empty:
    # its writes are buffered) loses the end of its last record and gets
    # garbage instead, as a write torn by a power cut leaves it.
    written = [p for p in broker.data_dir.rglob("*.seg") if p.stat().st_size > 300]
    assert written, "bodies were paged to segment files"
    newest = max(written, key=lambda p: p.name)
    data = newest.read_bytes()
    newest.write_bytes(data[:-100] + b"\xff" * 37)

    broker.restart()
    got = drain(broker.url, address, len(accepted))
    check_recovered(got, attempted, accepted)


@pytest.mark.parametrize("point", ["install-staged", "install-recorded"])
def test_follower_killed_mid_snapshot_install(tmp_path, point):
    cluster = Cluster(3, extra_args=config_args(tmp_path))
    try:
        cluster.wait_healthy()
        address = "/quorum/crash-install"
        with connection(cluster.url(1)) as conn:
            conn.create_sender(address).close()
        leader = cluster.leader_of(address)
        follower = leader % 3 + 1
        lagging = cluster.nodes[follower]
        lagging.kill()

        # With the follower away, enough log for snapshots and a purge past
        # it: it can only catch up from a streamed snapshot.
        attempted, accepted = publish_until_gone(cluster.url(leader), address, bodies("inst", 2500))
        assert accepted == attempted

        lagging.env["RAMQP_CRASH_AT"] = point
        lagging.restart(may_exit=True)
        crashed_at(lagging, point)

        restart_unarmed(lagging)
        cluster.wait_healthy()

        def caught_up():
            ours = cluster.queue_status(follower, address)
            theirs = cluster.queue_status(leader, address)
            return ours and theirs and ours["applied_index"] == theirs["applied_index"]

        wait_until(caught_up, 60, f"node {follower} caught up",
                   lambda: f"{cluster.queue_status(follower, address)} "
                           f"{cluster.queue_status(leader, address)}\n{lagging.stderr_tail(40)}")
        # Serve from the re-installed replica: its copy is the one read.
        leader = cluster.leader_of(address)
        cluster.ctl(leader, "--timeout-ms", "60000", "move-leadership",
                    "--queue", address, "--to", str(follower), timeout=70)
        wait_until(lambda: cluster.leader_of(address) == follower, 30, f"{follower} leads",
                   lambda: "\n".join(f"node {n}: {cluster.queue_status(n, address)}\n"
                                     f"{cluster.nodes[n].stderr_tail(25)}" for n in cluster.nodes))
        got = drain(cluster.url(follower), address, len(accepted))
        check_recovered(got, attempted, accepted)
        assert len(got) == len(accepted), "nothing was consumed: all of them, once"
        generations = sorted(p.name for p in lagging.data_dir.rglob("segments-*") if p.is_dir())
        assert len(generations) <= 1, f"old generation left: {generations}"
    finally:
        failures = cluster.cleanup()
    if failures:
        pytest.fail("\n\n".join(failures))
