"""A node of this commit reads the data directory a released ramqp-brokerd
wrote (docs/versioning.md, "What is tested").

Every `tests/fixtures/data-dir-<version>[-cluster3].tar.gz` (see
release_data.py and scripts/make-data-dir-fixture.sh) is unpacked into a
temporary directory and the broker under test ($RAMQP_BROKERD, the one
scripts/test.sh just built) is started on it with default settings: one
node, or three on new ports. Through Qpid Proton it must serve every
message the release accepted and that was not settled, in order, with the
same bodies, properties and delivery-counts, and nothing else (the
settled ones stay gone); then take new publishes, on the old queues and
on a new one, and keep them (one node: across a restart; the cluster:
consumed through another node than the one they were published to).
"""

import re

import pytest

from cluster import Cluster
from helpers import connection
from release_data import (
    REPO_ROOT,
    assert_no_more,
    check,
    fixture_name,
    fixture_paths,
    fixture_version,
    make_message,
    message_record,
    publish,
    receive_expected,
    unpack,
)

FIXTURES = fixture_paths()

# Released versions whose data directories this commit no longer reads:
# dropping one is a "Breaking" changelog entry (with the way to upgrade)
# and removes its fixture.
NOT_READ = set()


def released_versions():
    """The versions CHANGELOG.md lists as released: '## X.Y.Z (date)'."""
    text = (REPO_ROOT / "CHANGELOG.md").read_text()
    return re.findall(r"^## (\d+\.\d+\.\d+) \(", text, flags=re.MULTILINE)


def test_every_release_has_a_fixture():
    released = released_versions()
    assert released, "CHANGELOG.md names no release"
    have = {fixture_version(path) for path in FIXTURES}
    missing = [v for v in released if v not in have and v not in NOT_READ]
    assert not missing, (
        f"no data-dir fixture for release(s) {missing}: make one with "
        "scripts/make-data-dir-fixture.sh (docs/versioning.md), or list the "
        "version in NOT_READ with a Breaking entry in the changelog"
    )


def publish_after(url, addresses):
    """Three new messages on each address, all accepted; returns them."""
    new_messages = {
        address: [make_message("after-upgrade", i, f"after {address} {i}") for i in range(3)]
        for address in addresses
    }
    with connection(url) as conn:
        for address, messages in new_messages.items():
            publish(conn, address, messages)
    return new_messages


def consume_after(url, new_messages):
    """Exactly the new messages, in order, on each address."""
    with connection(url) as conn:
        receivers = {}
        for address, messages in new_messages.items():
            receivers[address] = conn.create_receiver(address, credit=10)
            receive_expected(receivers[address], address, [message_record(m) for m in messages])
        assert_no_more(receivers)
        for receiver in receivers.values():
            receiver.close()


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_name)
def test_reads_the_data_dir_of_a_release(fixture, start_broker, tmp_path):
    data_dirs, manifest = unpack(fixture, tmp_path)
    assert manifest["release"] == fixture_version(fixture)
    # New publishes go to every old queue and to a new one.
    addresses = [queue["address"] for queue in manifest["queues"]] + ["/quorum/after-upgrade"]

    if len(data_dirs) == 1:
        broker = start_broker(data_dir=data_dirs[1])
        # Everything the release kept, in order, and nothing it had settled.
        check(broker.url, manifest)
        new_messages = publish_after(broker.url, addresses)
        # Kept across a restart of this version.
        assert broker.stop() == 0, broker.stderr_tail()
        broker.restart()
        consume_after(broker.url, new_messages)
        assert not broker.panics(), broker.stderr_tail()
        return

    # A cluster, on other ports than it was written on (the peers' fabric
    # addresses come from the flags; the metadata's old ones are not dialled).
    cluster = Cluster(len(data_dirs), data_dirs=data_dirs)
    try:
        cluster.wait_healthy()
        # Through node 2, forwarded to the queues it does not lead.
        check(cluster.url(2), manifest)
        new_messages = publish_after(cluster.url(1), addresses)
        consume_after(cluster.url(3), new_messages)
    finally:
        failures = cluster.cleanup()
    assert not failures, "\n\n".join(failures)
