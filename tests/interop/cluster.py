"""A cluster of real ramqp-brokerd processes for the cluster tests, and the
client processes that load it.

Every node gets fixed loopback ports (AMQP and fabric, picked free at start)
so a restarted node comes back where its peers and clients expect it. The
nodes run with --allow-fault-injection so a test can isolate one through
`ramqp-ctl isolate`. Clients run in their own Python processes (Proton's
reactor) and report one line per event on stdout, read by a thread here.
"""

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest

from conftest import BrokerProcess, brokerd_path

# Raft timings for the tests: the defaults (3-6 s election time-out) are
# tuned for a loaded production box; tests want a fail-over within a few
# seconds and still must not see elections from load on 2 shared cores.
RAFT_ARGS = []


def free_ports(count):
    """Ports the kernel says are free now (bound, then released)."""
    sockets, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    return ports


def ctl_path():
    return brokerd_path().with_name("ramqp-ctl")


class Cluster:
    """Nodes 1..n as BrokerProcess objects, keyed by node id."""

    def __init__(self, size, extra_args=(), hosts=None, wrappers=None, data_dirs=None,
                 node_args=None, ctl_args=()):
        # Flags every node gets besides the cluster's own (e.g. --config).
        self.extra_args = list(extra_args)
        # Flags of one node only (e.g. its own certificate), by node id,
        # and flags every ramqp-ctl call gets (e.g. a client certificate).
        self.node_args = node_args or {}
        self.ctl_args = list(ctl_args)
        # Per node: the address it listens on (loopback unless the caller
        # put nodes in network namespaces), the command that execs it
        # there, and a data directory (default: a fresh temporary one).
        self.host = hosts or {i + 1: "127.0.0.1" for i in range(size)}
        self.wrapper = wrappers or {}
        self.data_dirs = data_dirs or {}
        ports = free_ports(2 * size)
        self.amqp_port = {i + 1: ports[i] for i in range(size)}
        self.fabric_port = {i + 1: ports[size + i] for i in range(size)}
        self.nodes = {}
        for node in range(1, size + 1):
            self.nodes[node] = self._start(node, list(range(1, size + 1)))

    def _start(self, node, members):
        args = [
            "--node-id", str(node),
            "--fabric-listen", f"{self.host[node]}:{self.fabric_port[node]}",
            "--allow-fault-injection",
            *RAFT_ARGS,
            *self.extra_args,
            *self.node_args.get(node, ()),
        ]
        for peer in members:
            if peer != node:
                args += ["--peer", f"{peer}={self.host[peer]}:{self.fabric_port[peer]}"]
        process = BrokerProcess(
            args,
            listen=f"{self.host[node]}:{self.amqp_port[node]}",
            data_dir=self.data_dirs.get(node),
            wrapper=self.wrapper.get(node, ()),
        )
        return process

    def url(self, node):
        return self.nodes[node].url

    def ctl(self, node, *args, check=True, timeout=20):
        result = subprocess.run(
            [str(ctl_path()), "--fabric", f"{self.host[node]}:{self.fabric_port[node]}",
             *self.ctl_args, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"ramqp-ctl {' '.join(args)} on node {node} failed: {result.stdout}{result.stderr}"
            )
        return result

    def status(self, node):
        return json.loads(self.ctl(node, "status", "--json").stdout)

    def queue_status(self, node, address):
        for queue in self.status(node)["queues"]:
            if queue["address"] == address:
                return queue
        return None

    def wait_healthy(self, nodes=None, timeout=60):
        nodes = nodes or [n for n, p in self.nodes.items() if p.alive()]
        deadline = time.monotonic() + timeout
        for node in nodes:
            while True:
                result = self.ctl(node, "health", "--expect-members", str(len(nodes)), check=False)
                if result.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"node {node} not healthy: {result.stdout}{result.stderr}")
                time.sleep(0.2)

    def leader_of(self, address, asking=None, timeout=30, exclude=()):
        """The leader of a queue as a running node reports it (waits until one is known)."""
        deadline = time.monotonic() + timeout
        while True:
            for node in ([asking] if asking else list(self.nodes)):
                if node in exclude or not self.nodes[node].alive():
                    continue
                try:
                    queue = self.queue_status(node, address)
                except (AssertionError, subprocess.TimeoutExpired, json.JSONDecodeError):
                    continue
                if queue and queue["leader"] and queue["leader"] not in exclude:
                    return queue["leader"]
            if time.monotonic() > deadline:
                raise AssertionError(f"no leader for {address} within {timeout}s")
            time.sleep(0.1)

    def cleanup(self):
        failures = []
        for node, process in self.nodes.items():
            try:
                killed = process.killed
                code = process.stop()
                if code != 0 and not killed:
                    failures.append(f"node {node} exited with {code} after SIGTERM\n{process.stderr_tail()}")
                panics = process.panics()
                if panics:
                    failures.append(f"node {node} panicked:\n" + "\n".join(panics))
            finally:
                process.cleanup()
        return failures


@pytest.fixture
def cluster3():
    cluster = Cluster(3)
    try:
        cluster.wait_healthy()
        yield cluster
    finally:
        failures = cluster.cleanup()
    if failures:
        pytest.fail("\n\n".join(failures))


# ---------------------------------------------------------------------------
# Client processes. One stdout line per event:
#   publisher: "S <id>" handed to Proton, "A <id>" accepted, "N <id> <state>"
#   consumer:  "R <id>" received and accepted ("R <id> again" for a
#              redelivery, with the consumer's "mark" argument)
#   both:      "DISCONNECTED", "TIMEOUT", "END"
# ---------------------------------------------------------------------------

PUBLISHER = textwrap.dedent(
    """
    import sys
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    url, address = sys.argv[1], sys.argv[2]
    window, limit, deadline_s = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    # "reconnect": url is a comma-separated list; on a lost connection
    # Proton dials the next one and re-opens the link.
    reconnect = len(sys.argv) > 6 and sys.argv[6] == "reconnect"
    # The ids' prefix, so that several publishers' ids never collide.
    prefix = sys.argv[7] if len(sys.argv) > 7 else "id"
    # "first-acquirer": publish with first-acquirer set, so a consumer can
    # tell a first delivery from a redelivery (the broker clears it).
    first_acquirer = len(sys.argv) > 8 and sys.argv[8] == "first-acquirer"
    # "idle=S" anywhere after those: ask for an idle time-out of S seconds,
    # so a connection whose packets stop (a cut network) is noticed and
    # dialled again instead of stalling until TCP gives up.
    idle = next((float(a[5:]) for a in sys.argv[3:] if a.startswith("idle=")), None)

    def emit(line):
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    def tag_of(delivery):
        tag = delivery.tag
        return tag.decode() if isinstance(tag, bytes) else tag

    class Publisher(MessagingHandler):
        def __init__(self):
            super().__init__()
            self.next_id = 0
            self.in_flight = 0
            self.stopping = False

        def on_start(self, event):
            event.container.schedule(deadline_s, self)
            self.urls = url.split(",")
            self.attempt = 0
            self.conn = None
            self.open_link(event.container)

        def open_link(self, container):
            # Our own reconnect: Proton's stops after a broker closes the
            # connection cleanly (amqp:connection:forced on SIGTERM).
            target = self.urls[self.attempt % len(self.urls)]
            self.attempt += 1
            self.conn = container.connect(target, reconnect=False, heartbeat=idle)
            # Proton hands out a new wrapper object per event; an attribute
            # set here is stored on the connection itself and tells
            # events of this connection from late ones of an old one.
            self.conn.attempt = self.attempt
            container.create_sender(self.conn, address)

        def on_timer_task(self, event):
            emit("TIMEOUT")
            event.container.stop()

        def publish(self, sender):
            while sender.credit > 0 and self.in_flight < window and self.next_id < limit:
                tag = f"{prefix}-{self.next_id:07d}"
                self.next_id += 1
                emit("S " + tag)
                sender.send(Message(body=tag, first_acquirer=first_acquirer), tag=tag)
                self.in_flight += 1
            if self.next_id >= limit and self.in_flight == 0:
                emit("END")
                event_conn = sender.connection
                sender.close()
                event_conn.close()

        def current(self, event):
            # An event of the connection in use, not a late one of a lost
            # connection (Proton may still hand those out after lost()).
            return self.conn is not None and getattr(event.connection, "attempt", None) == self.attempt

        def on_sendable(self, event):
            # A late one of a lost connection would fill the window with
            # publishes on a dead link, which never settle: the publisher
            # then stalls for good on its next connection.
            if self.current(event):
                self.publish(event.sender)

        def settled(self, event, line):
            emit(line)
            # A late outcome of a lost connection still counts (the line),
            # but its publish left the window when the connection went.
            if self.current(event):
                self.in_flight -= 1
                self.publish(event.link)

        def on_accepted(self, event):
            self.settled(event, "A " + tag_of(event.delivery))

        def on_rejected(self, event):
            self.settled(event, "N " + tag_of(event.delivery) + " rejected")

        def on_released(self, event):
            self.settled(event, "N " + tag_of(event.delivery) + " released")

        def on_link_closed(self, event):
            if event.link.remote_condition:
                emit("DETACHED " + str(event.link.remote_condition.name))

        def on_link_error(self, event):
            # A detach with an error (Proton calls this, not
            # on_link_closed): report it, and with "reconnect" dial again,
            # as a robust client does (the broker detaches a forwarded
            # link whose queue found no leader in time). Proton's default
            # only closes the connection, silently for lost().
            emit("DETACHED " + str(event.link.remote_condition.name))
            event.connection.close()
            if reconnect and getattr(event.connection, "attempt", None) == self.attempt:
                self.lost(event)

        def lost(self, event):
            if not self.current(event):
                return  # a late event of an old connection
            emit("DISCONNECTED")
            if not reconnect:
                event.container.stop()
                return
            # Outcomes of what was in flight are lost with the connection:
            # those publishes count as not accepted.
            self.in_flight = 0
            self.conn = None
            event.container.schedule(0.2, Retry(self))

        def on_disconnected(self, event):
            self.lost(event)

        def on_transport_error(self, event):
            self.lost(event)

        def on_connection_error(self, event):
            self.lost(event)

    class Retry:
        def __init__(self, client):
            self.client = client

        def on_timer_task(self, event):
            self.client.open_link(event.container)

    Container(Publisher()).run()
    """
)

CONSUMER = textwrap.dedent(
    """
    import sys
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    url, address, credit, deadline_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    reconnect = len(sys.argv) > 5 and sys.argv[5] == "reconnect"
    # "mark": a redelivery (first-acquirer false) is reported "R <id> again".
    mark = len(sys.argv) > 6 and sys.argv[6] == "mark"
    # "idle=S": as for the publisher.
    idle = next((float(a[5:]) for a in sys.argv[3:] if a.startswith("idle=")), None)

    def emit(line):
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    class Consumer(MessagingHandler):
        def __init__(self):
            super().__init__(prefetch=credit, auto_accept=True)

        def on_start(self, event):
            event.container.schedule(deadline_s, self)
            self.urls = url.split(",")
            self.attempt = 0
            self.conn = None
            self.open_link(event.container)

        def open_link(self, container):
            target = self.urls[self.attempt % len(self.urls)]
            self.attempt += 1
            self.conn = container.connect(target, reconnect=False, heartbeat=idle)
            self.conn.attempt = self.attempt
            container.create_receiver(self.conn, address)

        def on_timer_task(self, event):
            emit("TIMEOUT")
            event.container.stop()

        def on_message(self, event):
            again = " again" if mark and not event.message.first_acquirer else ""
            emit("R " + str(event.message.body) + again)

        def on_link_closed(self, event):
            if event.link.remote_condition:
                emit("DETACHED " + str(event.link.remote_condition.name))

        def on_link_error(self, event):
            # A detach with an error (Proton calls this, not
            # on_link_closed): report it, and with "reconnect" dial again,
            # as a robust client does (the broker detaches a forwarded
            # link whose queue found no leader in time). Proton's default
            # only closes the connection, silently for lost().
            emit("DETACHED " + str(event.link.remote_condition.name))
            event.connection.close()
            if reconnect and getattr(event.connection, "attempt", None) == self.attempt:
                self.lost(event)

        def lost(self, event):
            if self.conn is None or getattr(event.connection, "attempt", None) != self.attempt:
                return
            emit("DISCONNECTED")
            if not reconnect:
                event.container.stop()
                return
            self.conn = None
            event.container.schedule(0.2, Retry(self))

        def on_disconnected(self, event):
            self.lost(event)

        def on_transport_error(self, event):
            self.lost(event)

        def on_connection_error(self, event):
            self.lost(event)

    class Retry:
        def __init__(self, client):
            self.client = client

        def on_timer_task(self, event):
            self.client.open_link(event.container)

    Container(Consumer()).run()
    """
)


class ClientProcess:
    """A publisher or consumer process and what it reported, with the
    monotonic time each line was read."""

    def __init__(self, script, *args):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines = []
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append((time.monotonic(), line.strip()))
                self.changed.notify_all()
        with self.changed:
            self.lines.append((time.monotonic(), "EOF"))
            self.changed.notify_all()

    def ids(self, kind):
        return [line[2:] for _, line in list(self.lines) if line.startswith(kind + " ")]

    def events(self):
        return [line for _, line in list(self.lines) if not line[:2] in ("S ", "A ", "N ", "R ")]

    def wait_for(self, predicate, timeout, what):
        started = time.monotonic()
        deadline = started + timeout
        with self.changed:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.lines and self.lines[-1][1] == "EOF" and not predicate(self)):
                    raise AssertionError(
                        f"{what}: not within {timeout}s; events: {self.events()[-5:]}; "
                        f"during the wait: {self.tally(started)}"
                    )
                self.changed.wait(min(remaining, 0.5))

    def tally(self, since):
        """What the client reported since `since`, by kind, and its last
        line: tells a client that sent nothing from one whose sends went
        unanswered (the CI failure of the rolling restart needed both)."""
        kinds = Counter(line.split(" ", 1)[0] for at, line in list(self.lines) if at >= since)
        last = self.lines[-1] if self.lines else None
        return f"{dict(kinds)}, last line {last[1]!r} {time.monotonic() - last[0]:.1f}s ago" if last else "nothing"

    def count(self, kind):
        prefix = kind + " "
        return sum(1 for _, line in list(self.lines) if line.startswith(prefix))

    def first_after(self, kind, moment):
        prefix = kind + " "
        for at, line in list(self.lines):
            if at > moment and line.startswith(prefix):
                return at
        return None

    def longest_gap(self, kind, after, until):
        """The longest time between two consecutive `kind` events (or
        between `after` and the first one) in the window [after, until]."""
        prefix = kind + " "
        times = [at for at, line in list(self.lines) if line.startswith(prefix) and after <= at <= until]
        previous, longest = after, 0.0
        for at in times:
            longest = max(longest, at - previous)
            previous = at
        return max(longest, until - previous) if times else until - after

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.thread.join(timeout=10)
        self.proc.stdout.close()


def check_no_loss(publisher, consumer, label):
    """The checker: every accepted publish was delivered at least once.
    Returns (lost, duplicates) after printing a summary."""
    accepted = set(publisher.ids("A"))
    sent = set(publisher.ids("S"))
    received = consumer.ids("R")
    counts = Counter(received)
    lost = accepted - set(counts)
    duplicates = sum(n - 1 for n in counts.values())
    never_sent = set(counts) - sent
    released = len(publisher.ids("N"))
    print(
        f"\n{label}: sent={len(sent)} accepted={len(accepted)} not-accepted={released} "
        f"received={len(received)} lost={len(lost)} duplicates={duplicates} "
        f"publisher events={publisher.events()[-3:]} consumer events={consumer.events()[-3:]}"
    )
    assert not never_sent, f"delivered but never sent: {sorted(never_sent)[:5]}"
    return lost, duplicates


def start_joining_node(cluster, node):
    """Start node `node` with --join and the running members as peers; the
    caller then makes it a member with `ramqp-ctl add-node`."""
    port_amqp, port_fabric = free_ports(2)
    cluster.amqp_port[node] = port_amqp
    cluster.fabric_port[node] = port_fabric
    cluster.host[node] = "127.0.0.1"
    members = [n for n, p in cluster.nodes.items() if p.alive()]
    args = [
        "--node-id", str(node),
        "--fabric-listen", f"127.0.0.1:{port_fabric}",
        "--allow-fault-injection",
        "--join",
        *RAFT_ARGS,
    ]
    for peer in members:
        args += ["--peer", f"{peer}=127.0.0.1:{cluster.fabric_port[peer]}"]
    cluster.nodes[node] = BrokerProcess(args, listen=f"127.0.0.1:{port_amqp}")
    return cluster.nodes[node]
