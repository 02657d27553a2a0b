"""Data directories written by a released ramqp-brokerd, and what they hold.

A release has two fixtures: `tests/fixtures/data-dir-<version>.tar.gz`,
one node, and `data-dir-<version>-cluster3.tar.gz`, a cluster of three.
Each holds one directory named as the file, with

- `data/` (one node) or `node-1/`, `node-2/`, `node-3/` (the cluster):
  the nodes' `--data-dir`s, written by that release's `ramqp-brokerd`
  through Qpid Proton and then stopped with SIGTERM;
- `manifest.json`: what that release was asked to keep, queue by queue:
  every message it accepted and that was not settled afterwards, in the
  order a consumer gets them, with a digest of its body and its
  properties; how many were published and settled; the number of nodes,
  the flags and config they ran with; the files each data directory held.

`write()` fills one (run by `scripts/make-data-dir-fixture.sh` with the
release's binary); `check()` is what `test_release_data.py` asserts of a
node reading one. The manifest, not this module, is the record of what a
release wrote: a later change here must keep reading the manifests of the
fixtures already checked in.
"""

import hashlib
import json
import os
import tarfile
from pathlib import Path

from proton import Delivery, Message, Timeout

from helpers import ABSENCE_WAIT, TIMEOUT, connection, settle_next

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"
FIXTURE_PREFIX = "data-dir-"
FIXTURE_SUFFIX = ".tar.gz"

# How the writing node ran: small budgets so most bodies are paged to
# segment files that roll often, and snapshots every few dozen entries so
# the paged queue's log is purged behind a snapshot (and the log holds
# entries after it).
WRITER_ARGS = [
    "--resident-budget", "32768",
    "--queue-resident-budget", "16384",
    "--segment-max-bytes", "65536",
]
WRITER_CONFIG = """\
[quorum]
snapshot_every_entries = 64
snapshot_min_log_bytes = 65536
log_entries_kept_after_snapshot = 5
"""

MANIFEST_FORMAT = 1


def fixture_paths():
    """Every checked-in fixture, oldest version first."""
    return sorted(
        FIXTURES_DIR.glob(f"{FIXTURE_PREFIX}*{FIXTURE_SUFFIX}"),
        key=lambda p: (version_key(fixture_version(p)), p.name),
    )


def fixture_name(path: Path) -> str:
    """`0.1.0` or `0.1.0-cluster3`: the file name without prefix and suffix."""
    return path.name[len(FIXTURE_PREFIX):-len(FIXTURE_SUFFIX)]


def fixture_version(path: Path) -> str:
    """The release that wrote a fixture."""
    return fixture_name(path).split("-")[0]


def version_key(version: str):
    return tuple(int(part) for part in version.split("."))


# --- bodies and properties ---------------------------------------------------


def body_record(body):
    """The manifest's description of a body: its AMQP type as Proton
    decodes it, its length, a SHA-256 over a canonical encoding, and its
    first characters (for a readable failure)."""
    if isinstance(body, str):
        kind, raw = "string", body.encode()
    elif isinstance(body, bytes):
        kind, raw = "binary", body
    elif isinstance(body, dict):
        kind, raw = "map", json.dumps(body, sort_keys=True).encode()
    else:
        raise TypeError(f"a fixture body is a str, bytes or dict, not {type(body)}")
    return {
        "type": kind,
        "length": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "head": raw[:24].decode("latin-1"),
    }


def filler(seed: str, length: int) -> str:
    """`length` characters derived from `seed`: varied enough that two
    bodies differ throughout, regular enough to compress well."""
    block = hashlib.sha256(seed.encode()).hexdigest()
    return (block * (length // len(block) + 1))[:length]


def make_message(queue: str, seq: int, body, priority: int = 4) -> Message:
    return Message(
        id=f"{queue}:{seq}",
        subject=f"{queue} #{seq}",
        properties={"seq": seq, "queue": queue},
        durable=True,
        priority=priority,
        body=body,
    )


def message_record(message: Message, delivery_count: int = 0):
    return {
        "id": message.id,
        "subject": message.subject,
        "properties": dict(message.properties),
        "durable": bool(message.durable),
        "priority": message.priority,
        "delivery_count": delivery_count,
        "body": body_record(message.body),
    }


def paged_body(seq: int):
    """Bodies of /quorum/paged: text of 200-1,400 bytes, every 7th binary,
    every 11th an AMQP map."""
    if seq % 11 == 0:
        return {"seq": seq, "kind": "map", "note": filler(f"map{seq}", 40)}
    text = f"paged {seq:05d} " + filler(f"paged{seq}", 200 + (seq * 97) % 1200)
    return text.encode() if seq % 7 == 0 else text


# --- writing (with the release's binary) ---------------------------------------


def publish(conn, address, messages):
    sender = conn.create_sender(address)
    for message in messages:
        delivery = sender.send(message, timeout=TIMEOUT)
        assert delivery.remote_state == Delivery.ACCEPTED, (
            f"publish of {message.id} settled with {delivery.remote_state}"
        )
    sender.close()


def consume_accepting(conn, address, messages):
    """Receive and accept the first len(messages) of a queue; they must be
    these, in order."""
    receiver = conn.create_receiver(address, credit=50)
    for expected in messages:
        got = receiver.receive(timeout=TIMEOUT)
        assert got.id == expected.id, f"{address}: got {got.id}, expected {expected.id}"
        receiver.accept()
    receiver.close()


def write(url: str, many: int):
    """Fill a fresh node or cluster (reached at `url`, running the
    release's binary with WRITER_ARGS) and return the manifest's queues.
    The caller stops the nodes and packs their data directories with the
    manifest."""
    queues = []
    with connection(url) as conn:
        # /quorum/paged: 300 messages, nearly all paged (the queue keeps
        # 16 KiB resident); the first 100 accepted, which deletes whole
        # segments; the next one fails once (modified, delivery-failed:
        # delivery-count 1) and is released back; about 20 snapshots.
        address = "/quorum/paged"
        messages = [make_message("paged", i, paged_body(i)) for i in range(300)]
        publish(conn, address, messages)
        consume_accepting(conn, address, messages[:100])
        receiver = conn.create_receiver(address, credit=1)
        head = receiver.receive(timeout=TIMEOUT)
        assert (head.id, head.delivery_count) == (messages[100].id, 0)
        settle_next(receiver, Delivery.MODIFIED, failed=True)
        # The next delivery may already be under way (Proton's blocking
        # receiver grants the next credit when it hands a message over):
        # release whatever comes before the failed one is back.
        for _ in range(10):
            again = receiver.receive(timeout=TIMEOUT)
            settle_next(receiver, Delivery.RELEASED)
            if again.id == messages[100].id:
                assert again.delivery_count == 1, again.delivery_count
                break
        else:
            raise AssertionError("the failed delivery did not come back")
        receiver.close()
        remaining = [message_record(messages[100], delivery_count=1)]
        remaining += [message_record(m) for m in messages[101:]]
        queues.append({"address": address, "published": 300, "settled": 100, "messages": remaining})

        # /quorum/large: multi-frame bodies (above the 256 KiB frame) and a
        # tiny one, all paged, none consumed.
        address = "/quorum/large"
        messages = [
            make_message("large", 0, filler("large0", 300_000).encode()),
            make_message("large", 1, filler("large1", 70_000), priority=9),
            make_message("large", 2, "tiny"),
        ]
        publish(conn, address, messages)
        queues.append({
            "address": address, "published": 3, "settled": 0,
            "messages": [message_record(m) for m in messages],
        })

        # /quorum/resident: small bodies kept in memory, fewer entries than
        # a snapshot needs: read back from the Raft log alone.
        address = "/quorum/resident"
        messages = [make_message("resident", i, f"resident {i:03d}") for i in range(40)]
        publish(conn, address, messages)
        consume_accepting(conn, address, messages[:10])
        queues.append({
            "address": address, "published": 40, "settled": 10,
            "messages": [message_record(m) for m in messages[10:]],
        })

        # /quorum/drained: declared, every message consumed.
        address = "/quorum/drained"
        messages = [make_message("drained", i, f"drained {i:03d}") for i in range(20)]
        publish(conn, address, messages)
        consume_accepting(conn, address, messages)
        queues.append({"address": address, "published": 20, "settled": 20, "messages": []})

        # /quorum/many-00 .. many-NN: one message each. Declaring 60 of
        # them takes the metadata group past a snapshot of its own (every
        # 64 entries, as the queues').
        for i in range(many):
            address = f"/quorum/many-{i:02d}"
            message = make_message(f"many-{i:02d}", 0, f"one of many, {i:02d}")
            publish(conn, address, [message])
            queues.append({
                "address": address, "published": 1, "settled": 0,
                "messages": [message_record(message)],
            })

        # One round trip, so the last accepts have left the client.
        conn.create_sender("/quorum/drained").close()

    return queues


def data_dir_listing(data_dir: Path):
    """Every file of a data directory and its size, for the manifest."""
    return {
        str(path.relative_to(data_dir)): path.stat().st_size
        for path in sorted(data_dir.rglob("*"))
        if path.is_file()
    }


# --- reading (with this commit's binary) ---------------------------------------


def node_dirs(root: Path, nodes: int):
    """Each node's data directory in a fixture: {node id: path}."""
    if nodes == 1:
        return {1: root / "data"}
    return {node: root / f"node-{node}" for node in range(1, nodes + 1)}


def unpack(fixture: Path, into: Path):
    """Unpack a fixture; returns ({node id: data dir}, manifest)."""
    with tarfile.open(fixture) as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            assert not name.is_absolute() and ".." not in name.parts, f"unsafe path {member.name}"
            assert member.isfile() or member.isdir(), f"not a file or directory: {member.name}"
        tar.extractall(into)
    root = into / fixture.name[:-len(FIXTURE_SUFFIX)]
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["format"] == MANIFEST_FORMAT, f"manifest format {manifest['format']}"
    return node_dirs(root, manifest.get("nodes", 1)), manifest


def receive_expected(receiver, address, expected_messages):
    """Receive and accept exactly `expected_messages` (manifest records),
    in order, with their bodies, properties and delivery-counts."""
    for position, expected in enumerate(expected_messages):
        try:
            message = receiver.receive(timeout=TIMEOUT)
        except Timeout:
            raise AssertionError(
                f"{address}: message {position} of {len(expected_messages)} "
                f"({expected['id']}) not delivered within {TIMEOUT}s"
            ) from None
        got = message_record(message, delivery_count=message.delivery_count)
        assert got == expected, f"{address}: message {position} differs:\n got {got}\nwant {expected}"
        receiver.accept()


def assert_no_more(receivers):
    """No link of `receivers` ({address: receiver}, all with credit left
    since they were made) gets another message: one wait of ABSENCE_WAIT
    for them all (the connection serves every link while any waits)."""
    wait = ABSENCE_WAIT
    for address, receiver in receivers.items():
        try:
            extra = receiver.receive(timeout=wait)
        except Timeout:
            extra = None
        assert extra is None, f"{address}: a message past the expected ones: {extra.id}"
        wait = 0.01


def check(url, manifest):
    """What test_release_data asserts of a node started on a fixture (of
    any node of a cluster: it forwards to each queue's leader): every
    queue serves exactly the manifest's messages, in order, and then
    nothing (the settled ones are gone). Accepts them all."""
    with connection(url) as conn:
        receivers = {}
        for queue in manifest["queues"]:
            address = queue["address"]
            receivers[address] = conn.create_receiver(address, credit=50)
            receive_expected(receivers[address], address, queue["messages"])
        assert_no_more(receivers)
        for receiver in receivers.values():
            receiver.close()


# --- the writer's command line (scripts/make-data-dir-fixture.sh) -------------


def main(argv=None):
    import argparse
    import sys
    import tempfile

    from cluster import Cluster
    from conftest import BrokerProcess

    parser = argparse.ArgumentParser(
        description="Fill a fresh node (or cluster) of the ramqp-brokerd in $RAMQP_BROKERD, "
        "stop it with SIGTERM, and leave its data directories and manifest in OUT."
    )
    parser.add_argument("--release", required=True, help="the release's version, e.g. 0.1.0")
    parser.add_argument("--commit", required=True, help="the commit the release was cut from")
    parser.add_argument("--nodes", type=int, choices=[1, 3], default=1)
    parser.add_argument("--out", required=True, type=Path, help="a directory to create")
    args = parser.parse_args(argv)
    assert os.environ.get("RAMQP_BROKERD"), "set RAMQP_BROKERD to the release's ramqp-brokerd"

    args.out.mkdir(parents=True)
    dirs = node_dirs(args.out, args.nodes)
    with tempfile.TemporaryDirectory(prefix="ramqp-fixture-") as work:
        config = Path(work) / "writer.toml"
        config.write_text(WRITER_CONFIG)
        flags = WRITER_ARGS + ["--config", str(config)]
        if args.nodes == 1:
            broker = BrokerProcess(flags, data_dir=dirs[1])
            try:
                queues = write(broker.url, many=60)
                code = broker.stop()
                assert code == 0, f"exit code {code} after SIGTERM\n{broker.stderr_tail()}"
                assert not broker.panics(), broker.stderr_tail()
            finally:
                broker.cleanup()
        else:
            cluster = Cluster(args.nodes, extra_args=flags, data_dirs=dirs)
            try:
                cluster.wait_healthy()
                # Through node 1: queues led elsewhere are forwarded.
                queues = write(cluster.url(1), many=8)
            finally:
                failures = cluster.cleanup()
            assert not failures, "\n\n".join(failures)

    files = {node: data_dir_listing(path) for node, path in dirs.items()}
    every = [name for listing in files.values() for name in listing]
    # What the fixture is meant to exercise is there.
    assert any(name.endswith(".seg") for name in every), f"no segment file: {files}"
    assert any(name.endswith("snapshot.bin") and name.startswith("quorum/") for name in every), (
        f"no quorum queue snapshot: {files}"
    )
    if args.nodes == 1:
        assert "meta/snapshot.bin" in files[1], f"no metadata snapshot: {files}"
    manifest = {
        "format": MANIFEST_FORMAT,
        "release": args.release,
        "commit": args.commit,
        "nodes": args.nodes,
        "written_by": "scripts/make-data-dir-fixture.sh",
        "brokerd_args": WRITER_ARGS + ["--config", "writer.toml"],
        "writer_config": WRITER_CONFIG,
        "queues": queues,
        "files": files[1] if args.nodes == 1 else {f"node-{n}": f for n, f in files.items()},
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    total = sum(sum(listing.values()) for listing in files.values())
    print(f"wrote {args.out}: {len(every)} files, {total} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
