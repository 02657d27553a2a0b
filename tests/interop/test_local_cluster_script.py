"""The one-command local cluster: deploy/local-cluster.sh start, status,
add, remove and stop, run for real against the debug binaries (the same
script a user runs, with RAMQP_BIN_DIR pointing at the tested build and
ports moved by RAMQP_BASE_PORT)."""

import os
import random
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT, brokerd_path
from helpers import connection, receive_all, send_all

SCRIPT = REPO_ROOT / "deploy" / "local-cluster.sh"


def ports_free(base):
    for port in [base + i for i in range(4)] + [base + 10 + i for i in range(4)]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def pick_base_port():
    for _ in range(50):
        base = random.randrange(20000, 40000, 20)
        if ports_free(base):
            return base
    pytest.skip("no free port range for the local cluster")


def pids_of(cluster_dir):
    return [int(p.read_text()) for p in Path(cluster_dir).glob("node*/pid")]


def test_start_status_add_remove_stop():
    base = pick_base_port()
    cluster_dir = tempfile.mkdtemp(prefix="ramqp-local-cluster-")
    env = dict(os.environ)
    env.update(
        RAMQP_BIN_DIR=str(brokerd_path().parent),
        RAMQP_BASE_PORT=str(base),
        RAMQP_CLUSTER_DIR=cluster_dir,
        RAMQP_HEALTH_TIMEOUT="90",
    )

    def script(*args, timeout=180):
        result = subprocess.run(
            [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout
        )
        assert result.returncode == 0, f"local-cluster.sh {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    try:
        out = script("start")
        assert f"amqp://127.0.0.1:{base}" in out
        pids = pids_of(cluster_dir)
        assert len(pids) == 3
        # The nodes share the machine's cores (at least one worker each).
        workers = max(1, len(os.sched_getaffinity(0)) // 3)
        flavor = "current-thread" if workers == 1 else "multi-thread"
        for i in (1, 2, 3):
            log = (Path(cluster_dir) / f"node{i}" / "log").read_text()
            assert f"workers={workers}" in log and "async runtime started" in log, log[-2000:]
            assert f"flavor={flavor}" in log or f'flavor="{flavor}"' in log, log[-2000:]

        # Publish through node 1, consume through node 3.
        with connection(f"amqp://127.0.0.1:{base}") as conn:
            send_all(conn, "/quorum/script", [f"m{i}" for i in range(20)])
        status = script("status")
        assert "/quorum/script" in status and "metadata leader" in status
        with connection(f"amqp://127.0.0.1:{base + 2}") as conn:
            got = receive_all(conn.create_receiver("/quorum/script", credit=20), 20)
            assert [m.body for m in got] == [f"m{i}" for i in range(20)]

        out = script("add", "4")
        assert "node 4 joined" in out
        assert len(pids_of(cluster_dir)) == 4
        out = script("remove", "4")
        assert "node 4 removed" in out
        assert not (Path(cluster_dir) / "node4").exists()

        script("stop")
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists() or b"ramqp-brokerd" not in Path(f"/proc/{pid}/cmdline").read_bytes(), (
                f"node process {pid} still runs after stop"
            )
        assert pids_of(cluster_dir) == []
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(cluster_dir, ignore_errors=True)
