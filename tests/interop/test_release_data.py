"""A node of this commit reads the data directory a released ramqp-brokerd
wrote (docs/versioning.md, "What is tested").

Every `tests/fixtures/data-dir-<version>.tar.gz` (see release_data.py and
scripts/make-data-dir-fixture.sh) is unpacked into a temporary directory
and the broker under test ($RAMQP_BROKERD, the one scripts/test.sh just
built) is started on it with default settings. Through Qpid Proton it
must serve every message the release accepted and that was not settled,
in order, with the same bodies, properties and delivery-counts, and
nothing else (the settled ones stay gone); then take new publishes, on
the old queues and on a new one, and keep them across a restart.
"""

import re

import pytest

from helpers import connection
from release_data import (
    REPO_ROOT,
    assert_no_more,
    check,
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


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_version)
def test_reads_the_data_dir_of_a_release(fixture, start_broker, tmp_path):
    data_dir, manifest = unpack(fixture, tmp_path)
    assert manifest["release"] == fixture_version(fixture)
    broker = start_broker(data_dir=data_dir)

    # Everything the release kept, in order, and nothing it had settled.
    check(broker, manifest)

    # New publishes: on every old queue and on a new one.
    addresses = [queue["address"] for queue in manifest["queues"]] + ["/quorum/after-upgrade"]
    new_messages = {
        address: [make_message("after-upgrade", i, f"after {address} {i}") for i in range(3)]
        for address in addresses
    }
    with connection(broker.url) as conn:
        for address, messages in new_messages.items():
            publish(conn, address, messages)

    # They are kept across a restart of this version, and nothing else is.
    assert broker.stop() == 0, broker.stderr_tail()
    broker.restart()
    with connection(broker.url) as conn:
        receivers = {}
        for address, messages in new_messages.items():
            receivers[address] = conn.create_receiver(address, credit=10)
            receive_expected(receivers[address], address, [message_record(m) for m in messages])
        assert_no_more(receivers)
        for receiver in receivers.values():
            receiver.close()
    assert not broker.panics(), broker.stderr_tail()
