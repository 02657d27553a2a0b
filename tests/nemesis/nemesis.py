"""The nemesis: a real 3-node cluster of ramqp-brokerd processes under
confirmed publishers and a consumer, faults injected on a seeded schedule,
then heal, drain through every node, and check the history (history.py).

    python3 tests/nemesis/nemesis.py --seed 14                 # the short run
    python3 tests/nemesis/nemesis.py --soak-s 3600             # random seed, an hour
    python3 tests/nemesis/nemesis.py --seed 7 --faults kill9-leader,sigstop-leader

Needs the ramqp-brokerd and ramqp-ctl binaries ($RAMQP_BROKERD, or the
debug build under $CARGO_TARGET_DIR / target/, as tests/interop finds
them) and Debian's python3-qpid-proton. Prints the seed first; a failing
run keeps its history (JSONL) and every node's log in a directory it
prints. Faults that need root (strace) are skipped without it, with a
printed reason.

Owns: the fault catalogue, the schedule, the run. It knows the cluster
only through tests/interop/cluster.py (processes, ports, ramqp-ctl) and
judges nothing itself: history.py does.
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))

import pytest  # noqa: E402
from proton import Timeout  # noqa: E402

from cluster import CONSUMER, PUBLISHER, ClientProcess, Cluster, start_joining_node  # noqa: E402
from helpers import TIMEOUT, connection  # noqa: E402
import history  # noqa: E402
import disks  # noqa: E402
from tools import FAKETIME_LIB, faketime_unavailable, root_and  # noqa: E402
import netns  # noqa: E402

ADDRESS = "/quorum/nemesis"
PUBLISHERS = {"pub-a": [1, 2, 3], "pub-b": [2, 3, 1]}  # id prefix -> nodes, in dial order
CONSUMER_NODES = [3, 1, 2]
PUBLISHER_WINDOW = 20
CONSUMER_CREDIT = 100
# A fault whose queue accepts nothing for this long after its heal failed.
RESUME_BOUND_S = 30.0
# Nor may accepts stop for longer than this from a fault's start to the
# next fault: one faulty node of three must not stop the queue for longer
# than a fail-over (5-6 s typical with the default timings, 9.3 s the
# longest seen on a loaded machine). Every fault that hits the leader is
# held longer than this, so a missing fail-over shows.
GAP_BOUND_S = 15.0
# Every fault has the same bound. A partition between some clients' node
# and the leader (`partition-bridge`) once needed more: a forwarded link
# waited for a reachable leader up to `[quorum] leader_wait_ms` (15 s);
# now a node that sees itself cut off from a live leader gives its links
# up after an election time-out (`broker/src/forward/cut_off.rs`).
GAP_BOUNDS = {"*": GAP_BOUND_S}
# The clients' idle time-out (AMQP heartbeats), as a careful application
# sets one: a connection whose packets stop (`client-cut-leader`, a
# SIGSTOPped node) is given up after this and the next node dialled,
# rather than stalling until TCP's retransmissions resume after the heal
# (11 s after a 16 s cut, seen here, with no accept in between).
CLIENT_IDLE_TIMEOUT_S = 8.0
HEALTHY_WITHIN_S = 60.0
FAIL_STOP_WITHIN_S = 30.0
EXIT_STORAGE_FAULT = 70
# How long a drain waits for one more message before it calls a node empty.
DRAIN_QUIET_S = 2.0
SHORT_RUN = ["kill9-leader", "kill9-follower", "sigstop-leader", "isolate-leader", "fsync-eio"]
# The third: a fourth node added and removed under load, and a follower
# killed meanwhile (loopback).
SHORT_RUN_3 = ["membership", "kill9-follower"]
# The second fixed-seed run of the test command: real partitions, a full
# disk, a write error (root only) and a clock jump.
SHORT_RUN_2 = ["partition-bridge", "client-cut-leader", "disk-full", "write-eio", "clock-jump"]
# Every fault of the catalogue, for a run by hand (docs/nemesis.md).
EVERY_FAULT = SHORT_RUN + ["kill9-two", "partition-leader", "partition-bridge", "client-cut-leader", "disk-full",
                           "write-eio", "clock-jump", "clock-skew", "rolling-restart"]
# Faults that need the nodes in network namespaces, or on loop disks.
NEEDS_NETNS = {"partition-leader", "partition-bridge", "client-cut-leader"}
NEEDS_DISKS = {"disk-full"}
# Faults that need every node on loopback (a fourth node joins there).
NEEDS_LOOPBACK = {"membership"}


@dataclass
class Fault:
    name: str
    # Why it cannot run here, or None.
    unavailable: str
    # (run, rng) -> (target label, heal function)
    inject: object
    # Seconds the fault is held (rng -> float).
    hold: object


class Run:
    """One nemesis run: the cluster, the clients, the schedule, the history."""

    def __init__(self, seed, out_dir: Path, use_netns=False, use_disks=False):
        self.seed = seed
        self.use_netns = use_netns
        self.use_disks = use_disks
        self.netns = None
        self.disks = None
        self.rng = random.Random(seed)
        self.out_dir = out_dir
        self.t0 = time.monotonic()
        self.events = []
        self.cluster = None
        self.clients = {}
        # Found while injecting (a node that did not fail-stop, ...).
        self.problems = []

    # -- history --------------------------------------------------------

    def now(self):
        return time.monotonic() - self.t0

    def record(self, kind, **fields):
        self.events.append({"t": self.now(), "process": "nemesis", "type": kind, **fields})

    def client_events(self):
        kinds = {"S": "send", "A": "accept", "N": "refuse", "R": "deliver"}
        events = []
        for name, client in self.clients.items():
            for at, line in list(client.lines):
                code, _, rest = line.partition(" ")
                base = {"t": at - self.t0, "process": name}
                if code in kinds and rest:
                    message_id, _, more = rest.partition(" ")
                    event = {**base, "type": kinds[code], "id": message_id}
                    if code == "R":
                        event["redelivered"] = more == "again"
                    events.append(event)
                else:
                    events.append({**base, "type": "note", "text": line})
        return events

    # -- the cluster and the clients ------------------------------------

    def start(self, client_lifetime_s=3600):
        """Start the cluster and the clients. `client_lifetime_s` is only a
        safety net for clients left behind: the run stops them itself."""
        hosts = wrappers = data_dirs = None
        if self.use_netns:
            self.netns = netns.Netns(3)
            hosts, wrappers = self.netns.hosts(), self.netns.wrappers()
        if self.use_disks:
            self.disks = disks.Disks([1, 2, 3])
            data_dirs = self.disks.dirs()
        self.cluster = Cluster(3, hosts=hosts, wrappers=wrappers, data_dirs=data_dirs)
        self.cluster.wait_healthy(timeout=HEALTHY_WITHIN_S)
        with connection(self.cluster.url(1)) as conn:
            conn.create_sender(ADDRESS).close()
        self.cluster.leader_of(ADDRESS)
        urls = lambda nodes: ",".join(self.cluster.url(n) for n in nodes)  # noqa: E731
        idle = f"idle={CLIENT_IDLE_TIMEOUT_S:g}"
        self.clients["consumer"] = ClientProcess(
            CONSUMER, urls(CONSUMER_NODES), ADDRESS, CONSUMER_CREDIT, client_lifetime_s, "reconnect", "mark", idle
        )
        for prefix, nodes in PUBLISHERS.items():
            self.clients[prefix] = ClientProcess(
                PUBLISHER, urls(nodes), ADDRESS, PUBLISHER_WINDOW, 10**9, client_lifetime_s, "reconnect", prefix,
                "first-acquirer", idle,
            )
        for prefix in PUBLISHERS:
            self.clients[prefix].wait_for(lambda c: c.count("A") >= 100, 60, f"{prefix}: first accepts")

    def leader(self):
        return self.cluster.leader_of(ADDRESS, timeout=RESUME_BOUND_S)

    def followers(self):
        leader = self.leader()
        return [n for n in self.cluster.nodes if n != leader]

    # -- the faults -----------------------------------------------------

    def kill9(self, nodes):
        for node in nodes:
            self.cluster.nodes[node].kill()

        def heal():
            for node in nodes:
                self.cluster.nodes[node].restart()

        return heal

    def sigstop(self, node):
        pid = self.cluster.nodes[node].proc.pid
        os.kill(pid, signal.SIGSTOP)
        return lambda: os.kill(pid, signal.SIGCONT)

    def isolate(self, node):
        """The node's fabric drops every peer (`ramqp-ctl isolate`, an
        application-level partition; its AMQP clients stay connected)."""
        self.cluster.ctl(node, "isolate")
        return lambda: self.cluster.ctl(node, "heal")

    def fsync_eio(self, node, syscall="fdatasync"):
        """The node's log store fails to make a write durable: the node
        must stop with code 70 (fail-stop); the heal restarts it.

        Where the journal is written with O_DIRECT | O_DSYNC (the default
        where the file system allows it) there is no fdatasync per record:
        one could come only at the next fold, maybe not within the
        fault's 30 s. So `fdatasync` fails one journal write, which the
        store redoes through the page cache with an fdatasync, and that
        fdatasync fails (on a journal without direct writes the failed
        write alone stops the node). `pwrite64` fails every write: a
        single failed direct write is redone and stops nothing."""
        process = self.cluster.nodes[node]
        store = process.data_dir / "quorum" / "raft-log.redb"
        journal = process.data_dir / "quorum" / "raft-log.redb.journal"
        if syscall == "fdatasync":
            faults = ["-e", "trace=pwrite64,fdatasync",
                      "-e", "inject=pwrite64:error=EIO:when=1",
                      "-e", "inject=fdatasync:error=EIO:when=1"]
        else:
            faults = ["-e", f"trace={syscall}", "-e", f"inject={syscall}:error=EIO:when=1+"]
        tracer = subprocess.Popen(
            ["strace", "-f", "-qq", "-o", "/dev/null", "-p", str(process.proc.pid),
             "-P", str(store), "-P", str(journal)] + faults,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            code = process.proc.wait(timeout=FAIL_STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if tracer.poll() is None:
                tracer.terminate()
            tracer.wait(timeout=TIMEOUT)
        if code != EXIT_STORAGE_FAULT:
            self.problems.append(f"node {node}: exit {code} after a {syscall} EIO, expected {EXIT_STORAGE_FAULT}")
            if code is None:
                process.kill()
        return process.restart

    def partition(self, pairs):
        """Real partitions: every packet between the nodes of each pair is
        dropped on the bridge (the clients, on the host, still reach every
        node)."""
        self.netns.cut(pairs)
        return self.netns.heal

    def partition_leader(self, node):
        return self.partition([(node, other) for other in self.cluster.nodes if other != node])

    def partition_bridge(self, node):
        """`node` (the leader) and one other node cannot talk; the third
        talks to both (the classic case for a node that keeps calling
        elections it cannot win)."""
        other = self.rng.choice([n for n in self.cluster.nodes if n != node])
        return self.partition([(node, other)])

    def client_cut(self, node):
        """The clients lose the node's AMQP port; the nodes still talk."""
        self.netns.cut_clients_from(node, self.cluster.amqp_port[node])
        return self.netns.heal

    def disk_full(self, node):
        """The node's data disk fills up (a real ext4 on a loop device). It
        either holds its publishers back or fail-stops with code 70; the
        heal frees the space and restarts it if it stopped."""
        written = self.disks.fill(node)
        self.record("note", text=f"disk of node {node} filled with {written} bytes of ballast")
        process = self.cluster.nodes[node]

        def heal():
            self.disks.free_space(node)
            code = process.proc.poll()
            if code is not None:
                if code != EXIT_STORAGE_FAULT:
                    self.problems.append(f"node {node}: exit {code} on a full disk, expected {EXIT_STORAGE_FAULT}")
                self.record("note", text=f"node {node} had stopped with {code} on the full disk")
                process.restart()

        return heal

    def membership(self, _nodes):
        """A fourth node joins under load (`ramqp-ctl add-node`); the heal
        removes it again (`remove-node`), waits until the three original
        nodes see three members, and stops it (it must exit 0)."""
        cluster = self.cluster
        start_joining_node(cluster, 4)
        cluster.ctl(1, "--timeout-ms", "90000", "add-node", "4", f"127.0.0.1:{cluster.fabric_port[4]}", timeout=90)
        cluster.wait_healthy(nodes=[1, 2, 3, 4], timeout=HEALTHY_WITHIN_S)

        def heal():
            cluster.ctl(2, "--timeout-ms", "90000", "remove-node", "4", timeout=90)
            cluster.wait_healthy(nodes=[1, 2, 3], timeout=HEALTHY_WITHIN_S)
            process = cluster.nodes.pop(4)
            code = process.stop()
            if code != 0:
                self.problems.append(f"node 4: exit {code} on SIGTERM after its removal")
            for panic in process.panics():
                self.problems.append(f"node 4 panicked: {panic}")
            process.cleanup()

        return heal

    def rolling_restart(self, nodes):
        """SIGTERM every node in turn (it hands its leaderships away and
        exits 0), restart it on its data, wait until the cluster is whole."""
        for node in nodes:
            code = self.cluster.nodes[node].stop()
            if code != 0:
                self.problems.append(f"node {node}: exit {code} on SIGTERM in a rolling restart")
            self.cluster.nodes[node].restart()
            self.cluster.wait_healthy(nodes=list(self.cluster.nodes), timeout=HEALTHY_WITHIN_S)
        return lambda: None

    def restart_with_clock(self, node, faketime):
        """SIGTERM the node, start it again on its data with its clocks
        under libfaketime's `faketime` spec (an offset and a rate, wall and
        monotonic clocks alike, for the process's whole life); the heal
        restarts it on the true clocks."""
        process = self.cluster.nodes[node]
        true_env = dict(process.env)

        def restart(env, why):
            code = process.stop()
            if code != 0:
                self.problems.append(f"node {node}: exit {code} on SIGTERM before {why}")
            process.env = env
            process.restart()

        # At half speed the node's own waits at start take twice as long.
        process.start_timeout_s = 60.0
        restart({**true_env, "LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": faketime}, f"FAKETIME={faketime}")
        self.record("note", text=f"node {node} runs with FAKETIME={faketime!r}")
        return lambda: restart(true_env, "its true clock")

    def catalogue(self):
        rng = self.rng
        # A follower's fault is short; a leader's is held past GAP_BOUND_S
        # (a fail-over: the leader lease, an election, the clients finding
        # the new leader), so that the history shows whether the queue
        # served again during the fault.
        short_hold = lambda r: r.uniform(2.0, 5.0)  # noqa: E731
        leader_hold = lambda r: r.uniform(GAP_BOUND_S + 1.0, GAP_BOUND_S + 3.0)  # noqa: E731
        return {
            "kill9-leader": Fault("kill9-leader", None, lambda: self._on([self.leader()], self.kill9), leader_hold),
            "kill9-follower": Fault(
                "kill9-follower", None, lambda: self._on([rng.choice(self.followers())], self.kill9), short_hold
            ),
            "kill9-two": Fault(
                "kill9-two", None, lambda: self._on([self.leader(), rng.choice(self.followers())], self.kill9),
                short_hold,
            ),
            "sigstop-leader": Fault(
                "sigstop-leader", None, lambda: self._on_one(self.leader(), self.sigstop), leader_hold
            ),
            "isolate-leader": Fault(
                "isolate-leader", None, lambda: self._on_one(self.leader(), self.isolate), leader_hold
            ),
            "fsync-eio": Fault(
                "fsync-eio", root_and("strace"),
                lambda: self._on_one(rng.choice(list(self.cluster.nodes)), self.fsync_eio),
                lambda r: 1.0,
            ),
            "write-eio": Fault(
                "write-eio", root_and("strace"),
                lambda: self._on_one(rng.choice(list(self.cluster.nodes)), lambda n: self.fsync_eio(n, "pwrite64")),
                lambda r: 1.0,
            ),
            "partition-leader": Fault(
                "partition-leader", netns.unavailable(), lambda: self._on_one(self.leader(), self.partition_leader),
                leader_hold,
            ),
            "partition-bridge": Fault(
                "partition-bridge", netns.unavailable(), lambda: self._on_one(self.leader(), self.partition_bridge),
                leader_hold,
            ),
            "client-cut-leader": Fault(
                "client-cut-leader", netns.unavailable(), lambda: self._on_one(self.leader(), self.client_cut),
                leader_hold,
            ),
            "disk-full": Fault(
                "disk-full", disks.unavailable(),
                lambda: self._on_one(rng.choice(list(self.cluster.nodes)), self.disk_full), short_hold,
            ),
            # A node that comes back with its wall clock two hours behind
            # (a bad RTC, a VM restored from a snapshot); the heal brings
            # it back two hours forward.
            "clock-jump": Fault(
                "clock-jump", faketime_unavailable(),
                lambda: self._on_one(rng.choice(list(self.cluster.nodes)),
                                     lambda n: self.restart_with_clock(n, "-2h")),
                lambda r: r.uniform(8.0, 12.0),
            ),
            # A node whose clocks run fast or slow (its timers: heartbeats,
            # election time-outs, leases, publish time-outs).
            "clock-skew": Fault(
                "clock-skew", faketime_unavailable(),
                lambda: self._on_one(rng.choice(list(self.cluster.nodes)),
                                     lambda n: self.restart_with_clock(n, f"+0 x{rng.choice([0.5, 1.5, 2.0])}")),
                lambda r: r.uniform(8.0, 12.0),
            ),
            "membership": Fault("membership", None, lambda: self._on([4], self.membership), short_hold),
            "rolling-restart": Fault(
                "rolling-restart", None, lambda: self._on(rng.sample(list(self.cluster.nodes), 3), self.rolling_restart),
                lambda r: 0.5,
            ),
        }

    def _on(self, nodes, action):
        return ",".join(map(str, nodes)), action(nodes)

    def _on_one(self, node, action):
        return str(node), action(node)

    # -- the schedule ---------------------------------------------------

    def schedule(self, names, soak_s=None):
        """The faults to run, in order: `names` shuffled by the seed; in
        soak mode, faults drawn from `names` until `soak_s` is filled, a
        quarter of the periods fault-free (`None`)."""
        if soak_s is None:
            order = list(names)
            self.rng.shuffle(order)
            return order
        order, planned = [], 0.0
        while planned < soak_s:
            order.append(None if self.rng.random() < 0.25 else self.rng.choice(names))
            planned += 15.0
        return order

    def run_schedule(self, order, catalogue):
        for name in order:
            if name is None:
                self.record("note", text="fault-free period")
                time.sleep(self.rng.uniform(10.0, 20.0))  # a quiet period, on purpose
                continue
            fault = catalogue[name]
            hold_s = fault.hold(self.rng)
            started = self.now()
            target, heal = fault.inject()
            self.events.append({"t": started, "process": "nemesis", "type": "fault", "fault": name, "target": target})
            time.sleep(hold_s)  # the fault's duration, on purpose
            heal()
            self.record("heal", fault=name, target=target)
            self.cluster.wait_healthy(nodes=list(self.cluster.nodes), timeout=HEALTHY_WITHIN_S)
            time.sleep(self.rng.uniform(2.0, 4.0))  # load between faults, on purpose

    # -- the end --------------------------------------------------------

    def finish(self):
        """Stop publishing, let the consumer catch up, drain through every
        node, wait for the replicas to converge. Returns problems found on
        the way (beyond what the history shows)."""
        problems = list(self.problems)
        for prefix in PUBLISHERS:
            self.clients[prefix].stop()
        accepted = {i for p in PUBLISHERS for i in self.clients[p].ids("A")}
        consumer = self.clients["consumer"]
        try:
            # "R <id>" or "R <id> again".
            consumer.wait_for(
                lambda c: accepted <= {line.split(" ", 1)[0] for line in c.ids("R")}, 60, "consumer to catch up"
            )
        except AssertionError as e:
            problems.append(str(e))
        consumer.stop()
        for node in self.cluster.nodes:
            self.drain(node)
        problems += self.converge()
        for node, process in self.cluster.nodes.items():
            for panic in process.panics():
                problems.append(f"node {node} panicked: {panic}")
        return problems

    def drain(self, node):
        with connection(self.cluster.url(node)) as conn:
            receiver = conn.create_receiver(ADDRESS, credit=200)
            while True:
                try:
                    message = receiver.receive(timeout=DRAIN_QUIET_S)
                except Timeout:
                    return
                receiver.accept()
                self.events.append({
                    "t": self.now(), "process": f"drain-{node}", "type": "deliver", "id": message.body,
                    "redelivered": not message.first_acquirer,
                })

    def converge(self, within_s=30.0):
        deadline = time.monotonic() + within_s
        while True:
            applied = {}
            for node in self.cluster.nodes:
                try:
                    applied[node] = (self.cluster.queue_status(node, ADDRESS) or {}).get("applied_index")
                except (AssertionError, subprocess.TimeoutExpired, ValueError):
                    applied[node] = None
            if None not in applied.values() and len(set(applied.values())) == 1:
                self.record("note", text=f"applied index converged: {applied}")
                return []
            if time.monotonic() > deadline:
                return [f"applied index did not converge within {within_s}s: {applied}"]
            time.sleep(0.5)

    def keep(self, report):
        """Keep the history and the nodes' logs (a failed run)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        history.write_jsonl(self.events + self.client_events(), self.out_dir / "history.jsonl")
        (self.out_dir / "report.txt").write_text(f"seed {self.seed}\n{report.summary()}\n")
        if self.cluster:
            for node, process in self.cluster.nodes.items():
                # Keeping must not end the run: a node whose files are gone
                # is noted and the others are still kept.
                try:
                    with open(process.stderr_path, "rb") as src, open(self.out_dir / f"node{node}.log", "wb") as dst:
                        shutil.copyfileobj(src, dst)
                except OSError as e:
                    (self.out_dir / f"node{node}.log").write_text(f"log not kept: {e}\n")

    def cleanup(self):
        for client in self.clients.values():
            client.stop()
        if self.netns:
            self.netns.heal()
        failures = []
        if self.cluster:
            for process in self.cluster.nodes.values():
                if process.alive():
                    os.kill(process.proc.pid, signal.SIGCONT)
            failures = self.cluster.cleanup()
        if self.netns:
            self.netns.remove()
        if self.disks:
            self.disks.remove()
        return failures


def run(seed=None, faults=SHORT_RUN, soak_s=None, out_dir=None, log=print):
    """One run; returns (report, kept directory or None)."""
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 2**31)
    out_dir = Path(out_dir or tempfile.mkdtemp(prefix=f"ramqp-nemesis-{seed}-"))
    rerun = f"python3 tests/nemesis/nemesis.py --seed {seed}"
    if list(faults) != SHORT_RUN:
        rerun += " --faults " + ",".join(faults)
    if soak_s is not None:
        rerun += f" --soak-s {soak_s:g}"
    log(f"nemesis: seed {seed} (rerun: {rerun})")
    nemesis = Run(seed, out_dir, use_netns=bool(NEEDS_NETNS & set(faults)) and netns.unavailable() is None,
                  use_disks=bool(NEEDS_DISKS & set(faults)) and disks.unavailable() is None)
    catalogue = nemesis.catalogue()
    chosen = []
    for name in faults:
        why = catalogue[name].unavailable
        if not why and name in NEEDS_LOOPBACK and nemesis.use_netns:
            why = "a fourth node joins on loopback, and this run's nodes are in network namespaces " \
                  "(run it apart from the partition faults)"
        if why:
            log(f"SKIP fault {name}: {why}")
        else:
            chosen.append(name)
    report = None
    problems = []
    try:
        # A soak's schedule runs past its planned seconds (restarts, heals,
        # waits for health): the clients must outlive it. An hour-long soak
        # once lost its clients at 3,600 s while four faults were still to
        # come, and the checker saw no accept after their heals.
        nemesis.start(client_lifetime_s=3600 if soak_s is None else 2 * soak_s + 900)
        nemesis.run_schedule(nemesis.schedule(chosen, soak_s), catalogue)
        fault_end = nemesis.now()
        problems += nemesis.finish()
        report = history.check(nemesis.events + nemesis.client_events(), fault_end, RESUME_BOUND_S, GAP_BOUNDS)
    except (Exception, pytest.fail.Exception) as e:  # the run itself broke: keep what there is
        problems.append(f"run aborted: {type(e).__name__}: {e}")
        report = history.check(nemesis.events + nemesis.client_events())
    finally:
        report = report or history.Report()
        report.problems += problems
        if not report.ok():
            nemesis.keep(report)
        report.problems += nemesis.cleanup()
    kept = out_dir if not report.ok() else None
    if kept is None:
        shutil.rmtree(out_dir, ignore_errors=True)
    log(report.summary())
    if kept:
        log(f"nemesis: FAILED, seed {seed}; history and logs kept in {kept}")
    return report, kept


def main():
    # SIGTERM (a timeout, a stopped CI job) unwinds like an exception, so
    # the run's cleanup still removes its namespaces, mounts and nodes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="seed of the schedule (random if absent)")
    parser.add_argument("--faults", default=",".join(SHORT_RUN),
                        help="comma-separated fault names, or 'all': " + ",".join(EVERY_FAULT))
    parser.add_argument("--soak-s", type=float, help="soak mode: draw faults until this many seconds are planned")
    parser.add_argument("--out", help="where to keep a failed run's history (default: a new temporary directory)")
    args = parser.parse_args()
    faults = EVERY_FAULT if args.faults == "all" else args.faults.split(",")
    report, _ = run(args.seed, faults, args.soak_s, args.out)
    sys.exit(0 if report.ok() else 1)


if __name__ == "__main__":
    main()
