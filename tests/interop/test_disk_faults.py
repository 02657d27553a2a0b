"""Fail-stop on disk errors (issue 14): a real ramqp-brokerd under a
windowed publisher of confirmed messages on a quorum queue meets a real
fault of its Raft log store:

- an fdatasync that returns EIO, a write (pwrite64) that returns EIO, and
  one that returns ENOSPC, each injected with `strace --inject` on the
  store's files;
- one direct journal write that returns EIO: not a stop but a recovery
  (the record is written and synced through the page cache, the node
  goes on without direct writes, nothing accepted is lost);
- a full disk: the data directory on a small loop-mounted ext4 filled with
  a ballast file while the broker publishes.

Each test asserts that the process exits with code 70 and the one
`ramqp-brokerd: fatal: ...` line on stderr within a bound (before this
fix the node stayed up with no quorum queue working), that no publish it
confirmed `accepted` is missing after a restart on the same data
directory (restart, drain, compare), that nothing shows up that was never
sent, and that the restarted node serves.

Root only (ptrace of the broker, mount): without root, strace, or the
mount tools, each test is skipped with a reason starting "SKIP:"
(`pytest -ra`, set in pytest.ini, lists them). Everything started here is
stopped by its own pid; a mount is unmounted and its loop device freed.
"""

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from proton import Timeout

from helpers import ABSENCE_WAIT, TIMEOUT, connection, receive_all, send_all
from publisher import PUBLISHER_SCRIPT, PublisherOutput

# `ramqp-brokerd` exits with this after a fatal storage fault
# (brokerd/src/daemon.rs EXIT_STORAGE_FAULT).
EXIT_STORAGE_FAULT = 70
FATAL_LINE = "ramqp-brokerd: fatal: "
# From the fault reaching the broker to its exit. A healthy run takes
# milliseconds (the store reports the failed commit at once).
EXIT_BOUND_S = 15.0
# Accepts before the fault, so there is something to lose.
ACCEPTS_BEFORE_FAULT = 300
PUBLISHER_WINDOW = 50
PUBLISHER_LIMIT = 1_000_000
PUBLISHER_DEADLINE_S = 90.0
STRACE_ATTACH_S = 10.0
STORE_FILE = Path("quorum") / "raft-log.redb"
# Its append journal: most appends are made durable here, the rest and
# the folds in STORE_FILE.
JOURNAL_FILE = Path("quorum") / "raft-log.redb.journal"
# What conftest writes into the broker's stderr log between two runs.
RESTART_MARK = "--- conftest: restarting ramqp-brokerd"


def require_root_and(*tools):
    """Skip (never pass silently) unless root with every tool on PATH."""
    if os.geteuid() != 0:
        pytest.skip("SKIP: needs root (ptrace of the broker, loop mounts)")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"SKIP: {', '.join(missing)} not installed (.ci/run installs strace and e2fsprogs)")


def poll_until(what: str, deadline_s: float, condition):
    """Poll `condition` until it holds; fail after `deadline_s`."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {deadline_s}s waiting for {what}")
        time.sleep(0.05)


def traced_by(pid: int) -> bool:
    """Whether every thread of `pid` has a tracer (strace attached)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        for task in tasks:
            status = (task / "status").read_text()
            tracer = next(line for line in status.splitlines() if line.startswith("TracerPid:"))
            if tracer.split()[1] == "0":
                return False
    except (OSError, StopIteration):
        return False
    return bool(tasks)


@contextlib.contextmanager
def strace_inject(proc, store_paths, syscall: str, error: str, when: int):
    """strace attached to every thread of the process `proc`, making the
    `when`-th call of `syscall` on the store's files fail with `error`. Ends
    with the traced process (which may be quick: the fault can hit before
    the attachment is seen here); stopped by its own pid otherwise."""
    pid = proc.pid
    tracer = subprocess.Popen(
        [
            "strace", "-f", "-qq", "-o", "/dev/null", "-p", str(pid),
            *(arg for path in store_paths for arg in ("-P", str(path))),
            "-e", f"trace={syscall}",
            "-e", f"inject={syscall}:error={error}:when={when}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        poll_until("strace to attach", STRACE_ATTACH_S, lambda: traced_by(pid) or tracer.poll() is not None)
        if tracer.poll() is not None and proc.poll() is None:
            pytest.fail(f"strace exited with {tracer.returncode}: {tracer.stderr.read()}")
        yield tracer
    finally:
        if tracer.poll() is None:
            tracer.terminate()
        try:
            tracer.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            tracer.kill()
            tracer.wait(timeout=TIMEOUT)
        tracer.stderr.close()


@contextlib.contextmanager
def publishing(url: str, address: str, padding_bytes: int = 0, accepts_before: int = ACCEPTS_BEFORE_FAULT, prefix: str = "id"):
    """The windowed publisher (publisher.py) running against `url`; yields
    its output once `accepts_before` publishes were accepted."""
    publisher = subprocess.Popen(
        [
            sys.executable, "-c", PUBLISHER_SCRIPT, url, address,
            str(PUBLISHER_WINDOW), str(PUBLISHER_LIMIT), str(PUBLISHER_DEADLINE_S),
            str(padding_bytes), prefix,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        output = PublisherOutput(publisher.stdout, accepts_before)
        if accepts_before > 0:
            assert output.enough.wait(PUBLISHER_DEADLINE_S), "publisher made no progress"
            assert len(output.accepted) >= accepts_before, (
                f"publisher ended early (exit {publisher.poll()}, {output.other})"
            )
        yield output
        # The broker is gone: the publisher sees its connection die.
        publisher.wait(timeout=TIMEOUT)
        output.thread.join(timeout=TIMEOUT)
        assert not output.thread.is_alive()
    finally:
        if publisher.poll() is None:
            publisher.kill()
            publisher.wait(timeout=TIMEOUT)
        publisher.stdout.close()


def assert_fail_stop(broker, started: float, what: str):
    """The broker exits with EXIT_STORAGE_FAULT and its fatal line within
    EXIT_BOUND_S of `started` (time.monotonic())."""
    try:
        code = broker.proc.wait(timeout=max(0.0, started + EXIT_BOUND_S - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: ramqp-brokerd still running {EXIT_BOUND_S}s after the fault\n{broker.stderr_tail()}")
    took = time.monotonic() - started
    # The log holds every run of this broker: look at the last one only.
    stderr = broker.stderr_path.read_text(errors="replace").split(RESTART_MARK)[-1]
    assert code == EXIT_STORAGE_FAULT, f"{what}: exit code {code}\n{broker.stderr_tail()}"
    fatal = [line for line in stderr.splitlines() if line.startswith(FATAL_LINE)]
    assert len(fatal) == 1, f"{what}: expected one '{FATAL_LINE}' line\n{broker.stderr_tail()}"
    print(f"\n{what}: exit {code} seen {took:.2f}s after the fault was armed: {fatal[0]}")
    return fatal[0]


def drain_ids(url: str, address: str, n_expected: int):
    """Every message of the queue, accepted one by one; the first word of
    each body (the publisher's id)."""
    got = []
    with connection(url) as conn:
        receiver = conn.create_receiver(address, credit=500)
        while True:
            # Wait long for what must be there, briefly for the rest.
            wait_s = TIMEOUT if len(set(got)) < n_expected else ABSENCE_WAIT
            try:
                message = receiver.receive(timeout=wait_s)
            except Timeout:
                break
            receiver.accept()
            got.append(message.body.split(" ", 1)[0])
            assert len(got) <= 2 * PUBLISHER_LIMIT, "runaway redelivery"
    return got


def assert_nothing_accepted_was_lost(what: str, outputs, got):
    """`outputs`: the publisher runs on the queue (distinct id prefixes)."""
    sent = {i for output in outputs for i in output.sent}
    accepted = {i for output in outputs for i in output.accepted}
    not_accepted = [i for output in outputs for i in output.not_accepted]
    counts = Counter(got)
    present = set(counts)
    lost = accepted - present
    never_sent = present - sent
    duplicates = sum(n - 1 for n in counts.values())
    unconfirmed = sent - accepted
    print(
        f"{what}: sent={len(sent)} accepted={len(accepted)} "
        f"not-accepted outcomes={len(not_accepted)} unconfirmed={len(unconfirmed)} "
        f"(present after restart: {len(unconfirmed & present)}) drained={len(got)} "
        f"lost={len(lost)} duplicates={duplicates} never_sent={len(never_sent)}"
    )
    assert not lost, f"{what}: {len(lost)} accepted messages lost, e.g. {sorted(lost)[:10]}"
    assert not never_sent, f"{what}: never sent: {sorted(never_sent)[:10]}"


def assert_serves(url: str, address: str):
    with connection(url) as conn:
        send_all(conn, address, ["after-restart"])
        receiver = conn.create_receiver(address, credit=1)
        [message] = receive_all(receiver, 1)
        assert message.body == "after-restart"


def write_and_sync_config(tmp: Path) -> Path:
    """A config file that turns the journal's direct writes off: each
    record is then written and fdatasynced, as on a file system without
    O_DIRECT and after a failed direct write."""
    path = tmp / "write-and-sync.toml"
    path.write_text("[quorum]\nlog_journal_direct = false\n")
    return path


# `when` is strace's: "20+" fails the 20th call and every later one. With
# the journal's direct writes (O_DIRECT | O_DSYNC, on by default) a record
# is not fdatasynced, and a failed direct write is redone through the page
# cache (the next test): so the fdatasync case runs the journal without
# direct writes, where each record is written and synced (the third sync
# fails at once, not at the third fold seconds later), and the write
# cases fail every write from the 20th on, the redone one included.
@pytest.mark.parametrize(
    "syscall,error,when,direct",
    [
        ("fdatasync", "EIO", "3", False),
        ("pwrite64", "EIO", "20+", True),
        ("pwrite64", "ENOSPC", "20+", True),
    ],
)
def test_a_failed_store_write_stops_the_node_and_a_restart_recovers(start_broker, tmp_path, syscall, error, when, direct):
    require_root_and("strace")
    broker = start_broker() if direct else start_broker("--config", str(write_and_sync_config(tmp_path)))
    address = f"/quorum/{syscall}-{error.lower()}"
    what = f"{syscall} -> {error}"
    with publishing(broker.url, address) as output:
        store_paths = [broker.data_dir / STORE_FILE, broker.data_dir / JOURNAL_FILE]
        with strace_inject(broker.proc, store_paths, syscall, error, when):
            assert_fail_stop(broker, time.monotonic(), what)
    broker.restart()
    got = drain_ids(broker.url, address, len(set(output.accepted)))
    assert_nothing_accepted_was_lost(what, [output], got)
    assert_serves(broker.url, address)


# O_DIRECT in /proc/<pid>/fdinfo's octal flags (x86-64 and arm64 differ;
# the journal's direct fd also has O_DSYNC, 0o10000, on both).
O_DIRECT_FLAGS = {"x86_64": 0o40000, "aarch64": 0o200000}
DIRECT_WRITE_FAILED = "a direct journal write failed"


def direct_journal_fds(pid: int) -> int:
    """How many of `pid`'s open files are the journal opened with O_DIRECT."""
    o_direct = O_DIRECT_FLAGS.get(os.uname().machine, 0o40000)
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if not os.readlink(fd).endswith(JOURNAL_FILE.name):
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue
        flags = next(line.split()[1] for line in info.splitlines() if line.startswith("flags:"))
        if int(flags, 8) & o_direct:
            count += 1
    return count


def test_a_failed_direct_journal_write_is_redone_through_the_page_cache(start_broker):
    """One direct journal write fails (EIO once): the record is written
    and synced through the page cache instead, direct writes stay off,
    the node keeps accepting, and after a SIGKILL and a restart nothing it
    accepted is missing."""
    require_root_and("strace")
    # /var/tmp: a disk-backed file system where /tmp may be tmpfs, which
    # refuses O_DIRECT.
    data_parent = Path(tempfile.mkdtemp(prefix="ramqp-direct-", dir="/var/tmp"))
    broker = None
    try:
        broker = start_broker(data_dir=data_parent / "data")
        address = "/quorum/direct-eio"
        what = "direct journal write -> EIO once"
        with publishing(broker.url, address) as output:
            if direct_journal_fds(broker.proc.pid) == 0:
                pytest.skip("SKIP: /var/tmp refuses O_DIRECT here, so the journal writes no record directly")
            journal = [broker.data_dir / JOURNAL_FILE]
            with strace_inject(broker.proc, journal, "pwrite64", "EIO", "20"):
                poll_until(
                    "the broker to log the failed direct write",
                    EXIT_BOUND_S,
                    lambda: DIRECT_WRITE_FAILED in broker.stderr_path.read_text(errors="replace")
                    or broker.proc.poll() is not None,
                )
                assert broker.proc.poll() is None, f"{what}: the node stopped\n{broker.stderr_tail()}"
                after_fault = len(output.accepted)
                poll_until(
                    "300 more accepts after the failed write",
                    PUBLISHER_DEADLINE_S,
                    lambda: len(output.accepted) >= after_fault + 300 or broker.proc.poll() is not None,
                )
            assert broker.proc.poll() is None, f"{what}: the node stopped\n{broker.stderr_tail()}"
            assert direct_journal_fds(broker.proc.pid) == 0, "direct writes are still on after the failure"
            print(f"\n{what}: {len(output.accepted) - after_fault} accepted after it, no direct writes since")
            # A crash now: what it accepted since went through write + fdatasync.
            broker.kill()
        broker.restart()
        got = drain_ids(broker.url, address, len(set(output.accepted)))
        assert_nothing_accepted_was_lost(what, [output], got)
        assert_serves(broker.url, address)
    finally:
        # Stopped before its data directory goes (teardown checks its exit).
        if broker is not None and broker.alive():
            broker.stop()
        shutil.rmtree(data_parent, ignore_errors=True)


@contextlib.contextmanager
def small_disk(size_mib: int = 64):
    """A fresh ext4 of `size_mib` on a loop device, mounted on a temporary
    directory; unmounted (and its loop device freed) at the end."""
    require_root_and("mount", "umount", "mkfs.ext4")
    tmp = Path(tempfile.mkdtemp(prefix="ramqp-small-disk-"))
    image, mount_point = tmp / "disk.img", tmp / "mnt"
    mount_point.mkdir()
    mounted = False
    try:
        with open(image, "wb") as f:
            f.truncate(size_mib * 1024 * 1024)
        # -m 0: no blocks reserved for root, so "full" means full for us.
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True, timeout=60)
        mounted_ok = subprocess.run(
            ["mount", "-o", "loop", str(image), str(mount_point)],
            capture_output=True, text=True, timeout=60,
        )
        if mounted_ok.returncode != 0:
            pytest.skip(f"SKIP: cannot loop-mount an ext4 image here: {mounted_ok.stderr.strip()}")
        mounted = True
        yield mount_point
    finally:
        if mounted:
            # mount -o loop sets autoclear: umount also frees the loop
            # device. If something still holds the mount (a failed test left
            # a process behind), detach it lazily rather than hide the
            # test's own failure behind this one.
            done = subprocess.run(["umount", str(mount_point)], capture_output=True, timeout=60)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", str(mount_point)], check=True, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def fill(path: Path) -> int:
    """Write `path` until the file system is full; returns bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 20, 4096):
            block = b"\0" * chunk
            while True:
                try:
                    written += f.write(block)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
        with contextlib.suppress(OSError):
            os.fsync(f.fileno())
    return written


def test_a_full_disk_stops_the_node_and_it_recovers_when_space_returns(start_broker):
    with small_disk() as disk:
        data_dir = disk / "data"
        # The disk alarm (min_free_disk_bytes) would hold publishers back
        # on this small disk before it fills; this case is the fail-stop.
        broker = start_broker("--min-free-disk", "0", data_dir=data_dir)
        address = "/quorum/disk-full"
        ballast = disk / "ballast"
        try:
            # 4 KiB bodies: the log grows fast enough to need new blocks.
            with publishing(broker.url, address, padding_bytes=4096) as output:
                started = time.monotonic()
                filled = fill(ballast)
                assert_fail_stop(broker, started, f"disk full (ballast {filled >> 20} MiB)")

            # Still full: the node either stops during start-up (recovery
            # writes: bodies re-applied into segment files) or starts and
            # stops again at its first commit that needs a new block. Either
            # way no false `accepted`: what it accepts is drained below.
            outputs = [output]
            code = broker.restart(may_exit=True)
            if code is None:
                with publishing(
                    broker.url, address, padding_bytes=4096, accepts_before=0, prefix="full"
                ) as while_full:
                    assert_fail_stop(broker, time.monotonic(), "restarted on a full disk")
                outputs.append(while_full)
            else:
                assert code != 0
                last_run = broker.stderr_path.read_text(errors="replace").split(RESTART_MARK)[-1]
                print(f"restarted on a full disk: exit {code} before listening: {last_run.strip().splitlines()[-1]}")

            # Space returns: the next restart recovers and serves.
            ballast.unlink()
            broker.restart()
            accepted = {i for o in outputs for i in o.accepted}
            got = drain_ids(broker.url, address, len(accepted))
            assert_nothing_accepted_was_lost("disk full", outputs, got)
            assert_serves(broker.url, address)
        finally:
            # Stop it here: the data directory is about to be unmounted.
            broker.stop()
