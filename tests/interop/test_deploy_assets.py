"""deploy/'s container, compose, systemd and Kubernetes files: they name
only flags and RAMQP_* variables that ramqp-brokerd really has, their
cluster layouts agree with themselves, and the container entrypoint's
flags derived from a StatefulSet pod's host name form a working cluster
(run for real against the tested binary, over loopback addresses).

Nothing here needs a network, a container engine or a Kubernetes API;
docs/operations.md ("Deploying") says what was checked beyond this."""

import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import READY_PREFIX, REPO_ROOT, brokerd_path
from helpers import TIMEOUT, connection, receive_all, send_all, wait_until

DEPLOY = REPO_ROOT / "deploy"
ENTRYPOINT = DEPLOY / "ramqp-entrypoint.sh"
# What a supervisor must wait after SIGTERM before SIGKILL: the code bounds
# a graceful stop at about 30 s with the default Raft timings
# (docs/operations.md, "Deploying").
STOP_GRACE_S = 60
# The entrypoint's own variables (everything else must be the broker's).
ENTRYPOINT_VARS = {"CLUSTER_SIZE", "PEER_HOST_FORMAT", "FABRIC_PORT"}


def require_binaries():
    """The directory of the tested ramqp-brokerd and its ramqp-ctl."""
    binary = brokerd_path()
    for path in (binary, binary.parent / "ramqp-ctl"):
        if not path.is_file():
            pytest.fail(f"{path} not found; build it (cargo build -p ramqp-brokerd) or set RAMQP_BROKERD")
    return binary.parent


def brokerd_help():
    binary = require_binaries() / "ramqp-brokerd"
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"--[a-z][a-z0-9-]*", out)), set(re.findall(r"RAMQP_[A-Z][A-Z_]*", out))


def load_yaml(name):
    yaml = pytest.importorskip("yaml", reason="python3-yaml is needed to read the deploy files")
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def statefulset_docs():
    docs = load_yaml("kubernetes/statefulset.yaml")
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    return docs, sts, container, env


def port_of(listen):
    return int(listen.rpartition(":")[2])


def test_deploy_files_name_only_real_flags_and_variables():
    flags, variables = brokerd_help()
    used_flags, used_vars = set(), set()

    # The entrypoint adds --node-id and --peer; its comments name --join.
    used_flags |= set(re.findall(r"--[a-z][a-z0-9-]*", ENTRYPOINT.read_text()))
    used_vars |= set(re.findall(r"RAMQP_[A-Z][A-Z_]*", ENTRYPOINT.read_text()))

    dockerfile = (DEPLOY / "Dockerfile").read_text()
    used_vars |= set(re.findall(r"\b(RAMQP_[A-Z][A-Z_]*)=", dockerfile))

    unit = (DEPLOY / "ramqp-brokerd.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=(.*)$", unit, re.M)
    assert exec_start.split()[0].endswith("/ramqp-brokerd")
    used_flags |= set(re.findall(r"--[a-z][a-z0-9-]*", exec_start))
    used_vars |= set(re.findall(r"RAMQP_[A-Z][A-Z_]*", unit))

    (compose,) = load_yaml("compose.yaml")
    for service in compose["services"].values():
        assert "command" not in service, "compose passes settings as RAMQP_* variables"
        used_vars |= set(service["environment"])

    _, _, container, env = statefulset_docs()
    for arg in container.get("args", []) + container.get("command", []):
        used_flags |= set(re.findall(r"^--[a-z][a-z0-9-]*", arg))
    used_vars |= set(env) - ENTRYPOINT_VARS
    # Commented-out settings too: they are meant to be switched on.
    used_vars |= set(re.findall(r"RAMQP_[A-Z][A-Z_]*", (DEPLOY / "kubernetes/statefulset.yaml").read_text()))

    assert used_flags and used_vars
    assert used_flags <= flags, f"not flags of ramqp-brokerd: {sorted(used_flags - flags)}"
    assert used_vars <= variables, f"not variables of ramqp-brokerd: {sorted(used_vars - variables)}"
    for name in ENTRYPOINT_VARS:
        assert name in ENTRYPOINT.read_text()


def test_cluster_layouts_agree_with_themselves():
    docs, sts, container, env = statefulset_docs()
    size = sts["spec"]["replicas"]
    assert int(env["CLUSTER_SIZE"]) == size
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    fabric_port = int(env["FABRIC_PORT"])
    assert port_of(env["RAMQP_FABRIC_LISTEN"]) == fabric_port
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {
        "amqp": port_of(env["RAMQP_LISTEN"]),
        "fabric": fabric_port,
        "http": port_of(env["RAMQP_HTTP_LISTEN"]),
    }
    # The peer names the entrypoint makes are the per-ordinal Services.
    for ordinal in range(size):
        service = services[env["PEER_HOST_FORMAT"] % ordinal]
        assert service["spec"]["selector"] == {
            "statefulset.kubernetes.io/pod-name": f"{sts['metadata']['name']}-{ordinal}"
        }
        assert [p["port"] for p in service["spec"]["ports"]] == [fabric_port]
    assert services[sts["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= STOP_GRACE_S
    assert env["RAMQP_DATA_DIR"] in [m["mountPath"] for m in container["volumeMounts"]]

    (compose,) = load_yaml("compose.yaml")
    nodes = {}
    for name, service in compose["services"].items():
        environment = service["environment"]
        (network,) = service["networks"].values()
        nodes[int(environment["RAMQP_NODE_ID"])] = (
            f"{network['ipv4_address']}:{port_of(environment['RAMQP_FABRIC_LISTEN'])}",
            environment["RAMQP_PEERS"],
            service["ports"][0].rsplit(":", 2)[1],
        )
        assert int(service["stop_grace_period"].rstrip("s")) >= STOP_GRACE_S, name
    assert len(nodes) == 3 and len({host_port for _, _, host_port in nodes.values()}) == 3
    for node, (_, peers, _) in nodes.items():
        expected = ",".join(f"{other}={addr}" for other, (addr, _, _) in sorted(nodes.items()) if other != node)
        assert peers == expected, f"node {node}"

    unit = (DEPLOY / "ramqp-brokerd.service").read_text()
    assert int(re.search(r"^TimeoutStopSec=(\d+)$", unit, re.M).group(1)) >= STOP_GRACE_S


def free_ports(hosts):
    """A port P with P and P+1 free on every host (AMQP and fabric)."""
    for _ in range(50):
        port = random.randrange(20000, 40000)
        try:
            for host in hosts:
                for p in (port, port + 1):
                    with socket.socket() as s:
                        s.bind((host, p))
            return port
        except OSError:
            continue
    pytest.skip("no free port on the loopback addresses")


def read_line(proc, timeout):
    """The first stdout line of `proc`, or "" if none comes in time."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().decode() if ready else ""


def test_entrypoint_refuses_what_it_cannot_derive():
    assert subprocess.run(["sh", "-n", str(ENTRYPOINT)]).returncode == 0
    for hostname, size in [("ramqp-3", "3"), ("ramqp", "3"), ("ramqp-0", "three")]:
        env = dict(os.environ, HOSTNAME=hostname, CLUSTER_SIZE=size, PATH="/nonexistent")
        result = subprocess.run([str(ENTRYPOINT)], env=env, capture_output=True, text=True)
        assert result.returncode == 2 and "ramqp-entrypoint:" in result.stderr, (hostname, size, result)


def test_entrypoint_derives_a_working_statefulset_cluster():
    """Pods ramqp-0..2 as the StatefulSet starts them, but on 127.0.0.10-12
    instead of per-ordinal Services: the same flags and variables otherwise."""
    hosts = [f"127.0.0.1{ordinal}" for ordinal in range(3)]
    port = free_ports(hosts)
    fabric = port + 1
    bin_dir = require_binaries()
    tmp = Path(tempfile.mkdtemp(prefix="ramqp-entrypoint-"))
    procs = []
    try:
        for ordinal, host in enumerate(hosts):
            env = {k: v for k, v in os.environ.items() if not k.startswith("RAMQP_")}
            env.update(
                PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}",
                HOSTNAME=f"ramqp-{ordinal}",
                CLUSTER_SIZE="3",
                PEER_HOST_FORMAT="127.0.0.1%d",
                FABRIC_PORT=str(fabric),
                RAMQP_LISTEN=f"{host}:{port}",
                RAMQP_FABRIC_LISTEN=f"{host}:{fabric}",
                RAMQP_DATA_DIR=str(tmp / f"node{ordinal}"),
            )
            stderr = open(tmp / f"node{ordinal}.log", "wb")
            procs.append(subprocess.Popen(
                [str(ENTRYPOINT)], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=stderr,
            ))
            stderr.close()
        for ordinal, proc in enumerate(procs):
            line = read_line(proc, 30)
            assert line == f"{READY_PREFIX}{hosts[ordinal]}:{port}\n", (
                line, (tmp / f"node{ordinal}.log").read_text(errors="replace")[-3000:])
            # exec: the broker replaced the shell, with the derived flags.
            argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().split("\0")
            peers = [f"{i + 1}=127.0.0.1{i}:{fabric}" for i in range(3) if i != ordinal]
            assert argv[0] == "ramqp-brokerd"
            assert argv[1:3] == ["--node-id", str(ordinal + 1)]
            assert argv[3:] == [x for peer in peers for x in ("--peer", peer)] + [""]

        def healthy(host):
            return subprocess.run(
                [str(bin_dir / "ramqp-ctl"), "--fabric", f"{host}:{fabric}", "health", "--expect-members", "3"],
                capture_output=True, timeout=TIMEOUT,
            ).returncode == 0

        for host in hosts:
            wait_until(lambda: healthy(host), 60, f"node at {host} healthy")
        with connection(f"amqp://{hosts[0]}:{port}") as conn:
            send_all(conn, "/quorum/entrypoint", [f"m{i}" for i in range(10)])
        with connection(f"amqp://{hosts[2]}:{port}") as conn:
            got = receive_all(conn.create_receiver("/quorum/entrypoint", credit=10), 10)
            assert [m.body for m in got] == [f"m{i}" for i in range(10)]

        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs:
            assert proc.wait(timeout=max(1, deadline - time.monotonic())) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        shutil.rmtree(tmp, ignore_errors=True)
