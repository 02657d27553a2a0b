"""The short fixed-seed nemesis run of the test command (issue 14): a real
3-node cluster under two confirmed publishers and a consumer meets, in an
order and with targets and durations drawn from SEED, a kill -9 of the
queue's leader, of a follower, a SIGSTOP of the leader past the election
time-out, an isolation of the leader from its peers (`ramqp-ctl
isolate`), and an fdatasync EIO on one node (fail-stop; root only, skipped
with a warning that says so otherwise); a second run meets real
partitions, a full disk, a write error and a clock jump, a third a fourth
node added and removed under load. Then heal, drain through every
node, and check the history: nothing accepted lost, nothing unexpected,
per-publisher order, every fault followed by accepts within a bound,
applied indexes converged, no panic. A failure prints the seed and keeps
the history (JSONL) and the nodes' logs.

Longer and random runs: `python3 tests/nemesis/nemesis.py --help`.
"""

import warnings

import nemesis

SEED = 14


def log(line):
    print(line)
    if line.startswith("SKIP"):
        # Shown in pytest's warnings summary even when the test passes.
        warnings.warn(UserWarning(line))


def test_short_fixed_seed_run():
    report, kept = nemesis.run(seed=SEED, faults=nemesis.SHORT_RUN, log=log)
    assert report.ok(), (
        f"nemesis seed {SEED} failed; history and logs in {kept}\n{report.summary()}"
    )


def test_partitions_disk_and_clock_fixed_seed_run():
    """The nodes in network namespaces on a bridge, each data directory on
    its own loop-mounted ext4: a partition where the leader and one node
    cannot talk but both talk to the third, the clients cut from the
    leader while the nodes still talk, one node's disk filled up, a write
    error on one node's log store, a node restarted with its clock two
    hours behind (and the heal two hours forward)."""
    report, kept = nemesis.run(seed=SEED, faults=nemesis.SHORT_RUN_2, log=log)
    assert report.ok(), (
        f"nemesis seed {SEED} failed; history and logs in {kept}\n{report.summary()}"
    )


def test_membership_fixed_seed_run():
    """A fourth node joins under load (`ramqp-ctl add-node`), is removed
    again (`remove-node`) and must exit 0; a follower is killed and
    restarted too."""
    report, kept = nemesis.run(seed=SEED, faults=nemesis.SHORT_RUN_3, log=log)
    assert report.ok(), (
        f"nemesis seed {SEED} failed; history and logs in {kept}\n{report.summary()}"
    )
