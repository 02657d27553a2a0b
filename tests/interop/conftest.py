"""Fixtures for the Qpid Proton interop suite: a real `ramqp-brokerd` process.

Nothing is built here. The binary comes from $RAMQP_BROKERD, or else
<target>/debug/ramqp-brokerd where <target> is $CARGO_TARGET_DIR or the
repository's `target/` (scripts/test.sh builds it first).

Each broker gets `--listen 127.0.0.1:0 --data-dir <tmp>` plus the test's
extra flags; its port is learnt from the one line it prints on stdout once
it listens. On teardown it gets SIGTERM and must exit 0 within a bound.

A test may `kill()` a broker (SIGKILL) or `stop()` it (SIGTERM) and then
`restart()` it: a new process with the same flags on the same data
directory (on a new ephemeral port, so read `url` again afterwards).
"""

import gc
import os
import shlex
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_PREFIX = "ramqp-brokerd listening on "
# The second stdout line of a broker started with --tls-listen.
TLS_READY_PREFIX = "ramqp-brokerd tls listening on "
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


def brokerd_path() -> Path:
    explicit = os.environ.get("RAMQP_BROKERD")
    if explicit:
        return Path(explicit)
    target = os.environ.get("CARGO_TARGET_DIR")
    target_dir = Path(target) if target else REPO_ROOT / "target"
    if not target_dir.is_absolute():
        # cargo resolves a relative CARGO_TARGET_DIR against the cwd it was
        # run from; scripts/test.sh runs everything from the repo root.
        target_dir = REPO_ROOT / target_dir
    return target_dir / "debug" / "ramqp-brokerd"


class BrokerProcess:
    """One running ramqp-brokerd and where to reach it."""

    def __init__(self, extra_args, extra_env=None, listen="127.0.0.1:0", data_dir=None, wrapper=()):
        binary = brokerd_path()
        if not binary.is_file():
            pytest.fail(
                f"ramqp-brokerd binary not found at {binary}; build it "
                "(cargo build -p ramqp-brokerd) or set RAMQP_BROKERD"
            )
        self.tmp = Path(tempfile.mkdtemp(prefix="ramqp-interop-"))
        # A test may put the data elsewhere (a small loop-mounted disk).
        self.data_dir = Path(data_dir) if data_dir else self.tmp / "data"
        self.stderr_path = self.tmp / "stderr.log"
        # A command that execs the broker in place (`ip netns exec NS`), so
        # the pid is still the broker's.
        self.args = [
            *wrapper,
            str(binary),
            "--listen",
            listen,
            "--data-dir",
            str(self.data_dir),
            *extra_args,
        ]
        # For debugging a failure: RAMQP_INTEROP_LOG_LEVEL=debug pytest ...
        log_level = os.environ.get("RAMQP_INTEROP_LOG_LEVEL")
        if log_level:
            self.args += ["--log-level", log_level]
        # To run the suite on another runtime set-up, for example
        # RAMQP_INTEROP_EXTRA_ARGS="--worker-threads 1": flags for every broker.
        self.args += shlex.split(os.environ.get("RAMQP_INTEROP_EXTRA_ARGS", ""))
        env = dict(os.environ)
        # Flags are the whole configuration of a test broker: a RAMQP_*
        # variable leaking in from the caller's shell must not change it.
        for name in list(env):
            if name.startswith("RAMQP_"):
                del env[name]
        env.update(extra_env or {})
        env.setdefault("RUST_BACKTRACE", "1")
        self.env = env
        # One stderr log across restarts, so a failure shows every run.
        self._stderr = open(self.stderr_path, "ab")
        # True while the current process was SIGKILLed on purpose by the
        # test and not restarted since: teardown then expects no exit 0.
        self.killed = False
        self.proc = None
        # A caller may allow a slower start (a node whose clock runs slow).
        self.start_timeout_s = START_TIMEOUT_S
        self._spawn(first=True)

    def _spawn(self, may_exit=False, first=False):
        """Start the process and wait until it listens. With `may_exit`, a
        process that exits before listening is not a failure: returns its
        exit code (None once it listens). `first`: the object is not yet
        in anyone's hands, so a failed start cleans up here; a failed
        restart leaves the files (the stderr log says why it failed) to
        the owner's cleanup."""
        self.proc = subprocess.Popen(
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=self.env,
        )
        try:
            addr = self._await_ready(may_exit)
        except BaseException:
            if first:
                # Not yet handed to the fixture, which would otherwise clean up.
                self.cleanup()
            else:
                self._kill()
            raise
        if addr is None:
            return self.proc.returncode
        addr, self.tls_addr = addr
        self.addr = addr
        host, _, port = self.addr.rpartition(":")
        self.host = host
        self.port = int(port)
        self.url = f"amqp://{self.addr}"
        return None

    def restart(self, may_exit=False):
        """Start a new process on the same data directory, once the current
        one has exited (after `stop()` or `kill()`). Updates `url`. With
        `may_exit`, returns the exit code of a process that exits before it
        listens instead of failing the test (None once it listens)."""
        assert self.proc.poll() is not None, "restart() needs the broker stopped first"
        self.proc.stdout.close()
        self._stderr.write(b"\n--- conftest: restarting ramqp-brokerd on the same data dir ---\n")
        self._stderr.flush()
        self.killed = False
        return self._spawn(may_exit)

    def kill(self) -> int:
        """SIGKILL: no shutdown path runs, as in a crash. (The kernel's page
        cache survives a process kill, so this tests what the broker had
        written, not whether it had fsynced it.)"""
        assert self.proc.poll() is None, "kill() of a broker that is not running"
        self.proc.send_signal(signal.SIGKILL)
        self.killed = True
        return self.proc.wait(timeout=STOP_TIMEOUT_S)

    def _await_ready(self, may_exit=False):
        deadline = time.monotonic() + self.start_timeout_s
        fd = self.proc.stdout.fileno()
        buffered = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                pytest.fail(f"ramqp-brokerd did not report readiness in {self.start_timeout_s}s\n{self.stderr_tail()}")
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                code = self.proc.wait(timeout=STOP_TIMEOUT_S)
                if may_exit:
                    return None
                pytest.fail(f"ramqp-brokerd exited with {code} before listening\n{self.stderr_tail()}")
            buffered += chunk
            lines = buffered.split(b"\n")[:-1]
            if not lines:
                continue
            line = lines[0].decode()
            assert line.startswith(READY_PREFIX), f"unexpected first stdout line: {line!r}"
            addr = line[len(READY_PREFIX):].strip()
            if "--tls-listen" not in self.args:
                return addr, None
            if len(lines) >= 2:
                tls_line = lines[1].decode()
                assert tls_line.startswith(TLS_READY_PREFIX), f"unexpected second stdout line: {tls_line!r}"
                return addr, tls_line[len(TLS_READY_PREFIX):].strip()

    def stderr_tail(self, lines: int = 60) -> str:
        # Closed by cleanup() after a failed start; the file is still there.
        if not self._stderr.closed:
            self._stderr.flush()
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return "(no stderr)"
        return "--- ramqp-brokerd stderr (tail) ---\n" + "\n".join(text.splitlines()[-lines:])

    def panics(self):
        """The panic messages in the broker's stderr, if any."""
        if not self._stderr.closed:
            self._stderr.flush()
        lines = self.stderr_path.read_text(errors="replace").splitlines()
        return [
            "\n".join(lines[i:i + 2])
            for i, line in enumerate(lines)
            if "panicked at" in line
        ]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def wait_exit(self) -> int:
        """Wait (bounded) for an exit already under way; no signal sent."""
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            pytest.fail(f"ramqp-brokerd did not exit within {STOP_TIMEOUT_S}s\n{self.stderr_tail()}")

    def stop(self) -> int:
        """SIGTERM, then wait (bounded) for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
                pytest.fail(f"ramqp-brokerd ignored SIGTERM for {STOP_TIMEOUT_S}s\n{self.stderr_tail()}")
        return self.proc.returncode

    def cleanup(self):
        self._kill()
        self.proc.stdout.close()
        self._stderr.close()
        # For debugging a failure: RAMQP_INTEROP_KEEP_LOGS=DIR keeps every
        # broker's stderr there (named by its temporary directory).
        keep = os.environ.get("RAMQP_INTEROP_KEEP_LOGS")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(self.stderr_path, Path(keep) / f"{self.tmp.name}.log")
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture
def start_broker():
    """Factory: start_broker(*extra_args, env={...}, data_dir=None) ->
    BrokerProcess (data in a fresh temporary directory unless given). Every
    broker started is stopped with SIGTERM at teardown and must exit 0."""
    started = []

    def start(*extra_args, env=None, data_dir=None):
        broker = BrokerProcess(list(extra_args), env, data_dir=data_dir)
        started.append(broker)
        return broker

    yield start

    failures = []
    for broker in started:
        try:
            killed = broker.killed
            code = broker.stop()
            if code != 0 and not killed:
                failures.append(f"ramqp-brokerd exited with {code} after SIGTERM\n{broker.stderr_tail()}")
            panics = broker.panics()
            if panics:
                # A panicking connection task does not end the process, so
                # the exit code alone would hide it.
                failures.append("ramqp-brokerd panicked:\n" + "\n".join(panics) + "\n" + broker.stderr_tail())
        finally:
            broker.cleanup()
    if failures:
        pytest.fail("\n\n".join(failures))


@pytest.fixture
def broker(start_broker):
    """A broker with the default flags (anonymous, auto-create)."""
    return start_broker()


@pytest.fixture
def url(broker):
    return broker.url


@pytest.fixture(autouse=True)
def collect_proton_objects():
    """Proton's BlockingReceiver.__del__ touches the reactor; collected at
    interpreter exit it prints 'Exception ignored' noise. Collect after each
    test instead, while Python is still whole."""
    yield
    gc.collect()
