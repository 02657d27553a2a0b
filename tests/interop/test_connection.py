"""Connection-level interop through Qpid Proton: frame sizes and multi-frame
transfers, SASL, heartbeats, many connections, address errors, shutdown."""

import hashlib
import os
import re
import time
import uuid

import pytest
from proton import ConnectionException, Delivery, Endpoint, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import ConnectionClosed, LinkDetached

from helpers import TIMEOUT, connection, queue_address, receive_all, send_all


def test_16_mib_body_through_4_kib_frames(start_broker):
    broker = start_broker("--max-frame-size", "4096")
    address = queue_address("big")
    body = os.urandom(16 * 1024 * 1024)  # random: reordered frames would show
    digest = hashlib.sha256(body).hexdigest()
    big_timeout = 120.0

    with connection(broker.url, max_frame_size=4096) as conn:
        transport = conn.conn.transport
        # Both directions limited to 4 KiB: ours (sent in our open) and the
        # broker's (its open), which bounds the frames we send it.
        assert transport.max_frame_size == 4096
        assert transport.remote_max_frame_size == 4096
        sender = conn.create_sender(address)
        delivery = sender.send(Message(body=body, inferred=True), timeout=big_timeout)
        assert delivery.remote_state == Delivery.ACCEPTED

    with connection(broker.url, max_frame_size=4096) as conn:
        assert conn.conn.transport.remote_max_frame_size == 4096
        receiver = conn.create_receiver(address, credit=1)
        message = receiver.receive(timeout=big_timeout)
        receiver.accept()
        received = bytes(message.body)
        # Compare digests: a failing == on 16 MiB would print all of it.
        assert len(received) == len(body)
        assert hashlib.sha256(received).hexdigest() == digest


def test_sasl_plain_user(start_broker):
    broker = start_broker("--sasl-user", "alice:wonder:land", "--no-anonymous")
    address = queue_address("sasl")

    # Right password (which contains ':') works end to end.
    with connection(broker.url, user="alice", password="wonder:land", allowed_mechs="PLAIN") as conn:
        send_all(conn, address, ["authenticated"])
        receiver = conn.create_receiver(address, credit=1)
        assert receive_all(receiver, 1)[0].body == "authenticated"

    # Wrong password, unknown user: SASL outcome auth, no open.
    for user, password in [("alice", "wonder"), ("mallory", "wonder:land")]:
        with pytest.raises(ConnectionException) as failure:
            with connection(broker.url, user=user, password=password, allowed_mechs="PLAIN"):
                pass
        assert "unauthorized-access" in str(failure.value), str(failure.value)


def test_anonymous_refused_with_no_anonymous(start_broker):
    broker = start_broker("--sasl-user", "app:pw", "--no-anonymous")
    with pytest.raises(ConnectionException) as failure:
        with connection(broker.url, allowed_mechs="ANONYMOUS"):
            pass
    assert "unauthorized-access" in str(failure.value), str(failure.value)

    # Skipping SASL altogether must not get in either.
    with pytest.raises(ConnectionException):
        with connection(broker.url, sasl_enabled=False):
            pass

    # Control: the same broker does let the configured user in.
    with connection(broker.url, user="app", password="pw", allowed_mechs="PLAIN"):
        pass


def test_anonymous_allowed_by_default(url):
    with connection(url, allowed_mechs="ANONYMOUS") as conn:
        send_all(conn, queue_address("anon"), ["hello"])


def idle(conn, seconds: float) -> None:
    """Let the connection sit with no application traffic for `seconds`,
    still running Proton's event loop (which is what notices a missing
    heartbeat and drops the connection)."""
    deadline = time.monotonic() + seconds
    conn.wait(lambda: time.monotonic() >= deadline, timeout=seconds + TIMEOUT)


def test_heartbeats_keep_an_idle_connection_open(url):
    address = queue_address("heartbeat")
    # heartbeat=1: Proton drops the connection (local-idle-timeout expired)
    # unless the broker sends a frame at least every 0.5 s.
    with connection(url, heartbeat=1) as conn:
        receiver = conn.create_receiver(address, credit=1)
        idle(conn, 3.0)
        assert conn.conn.state & Endpoint.REMOTE_ACTIVE
        assert not conn.disconnected
        send_all(conn, address, ["still alive"])
        assert receive_all(receiver, 1)[0].body == "still alive"


def test_broker_idle_timeout_is_announced_and_honoured(start_broker):
    broker = start_broker("--idle-timeout-ms", "1000")
    with connection(broker.url) as conn:
        # Proton reports the peer's idle time-out in seconds. The spec lets
        # the broker announce less than its real threshold (it SHOULD
        # announce half), never more.
        announced = conn.conn.transport.remote_idle_timeout
        assert 0 < announced <= 1.0, announced
        # Proton heartbeats at half of it; the broker must accept those as
        # traffic and not close the connection.
        idle(conn, 3.0)
        assert conn.conn.state & Endpoint.REMOTE_ACTIVE
        assert not conn.disconnected
        send_all(conn, queue_address("idle"), ["ok"])


def test_unknown_address_without_auto_create_is_not_found(start_broker):
    broker = start_broker("--no-auto-create")
    with connection(broker.url) as conn:
        with pytest.raises(LinkDetached) as failure:
            conn.create_receiver(queue_address("missing"), credit=1)
        assert failure.value.condition == "amqp:not-found"
    with connection(broker.url) as conn:
        with pytest.raises(LinkDetached) as failure:
            conn.create_sender(queue_address("missing"))
        assert failure.value.condition == "amqp:not-found"


def test_declared_queue_from_config_file(start_broker, tmp_path):
    config = tmp_path / "ramqp.toml"
    config.write_text(
        '[log]\nformat = "json"\n\n[queues]\nauto_create = false\ndeclare = ["known"]\n'
    )
    broker = start_broker("--config", str(config))
    with connection(broker.url) as conn:
        send_all(conn, "/queues/known", ["declared"])
        assert receive_all(conn.create_receiver("/queues/known", credit=1), 1)[0].body == "declared"
        with pytest.raises(LinkDetached) as failure:
            conn.create_receiver("/queues/unknown", credit=1)
        assert failure.value.condition == "amqp:not-found"


def test_env_overrides_config_file_and_flag_overrides_env(start_broker, tmp_path):
    config = tmp_path / "ramqp.toml"
    config.write_text("[limits]\nmax_frame_size_bytes = 16384\n")

    def announced_frame_size(broker):
        with connection(broker.url) as conn:
            return conn.conn.transport.remote_max_frame_size

    assert announced_frame_size(start_broker("--config", str(config))) == 16384
    env = {"RAMQP_MAX_FRAME_SIZE": "8192"}
    assert announced_frame_size(start_broker("--config", str(config), env=env)) == 8192
    flagged = start_broker("--config", str(config), "--max-frame-size", "4096", env=env)
    assert announced_frame_size(flagged) == 4096


def runtime_started(broker, field):
    """A field (`workers`, `flavor`) of the broker's 'async runtime
    started' line, as text; the field may come before or after the
    message, its value quoted or not."""
    value = rf'{field}="?([a-z0-9-]+)'
    found = re.findall(rf"{value}.*async runtime started|async runtime started.*{value}",
                       broker.stderr_path.read_text())
    assert found, f"no {field} in the broker's 'async runtime started' line"
    return "".join(found[-1])


def test_worker_threads_from_config_file_and_flag(start_broker, tmp_path):
    config = tmp_path / "ramqp.toml"
    config.write_text("[runtime]\nworker_threads = 1\n")
    one = start_broker("--config", str(config))
    three = start_broker("--config", str(config), "--worker-threads", "3")
    one_multi = start_broker("--config", str(config), env={"RAMQP_RUNTIME_FLAVOR": "multi-thread"})
    assert int(runtime_started(one, "workers")) == 1
    assert int(runtime_started(three, "workers")) == 3
    assert int(runtime_started(one_multi, "workers")) == 1
    # One worker runs on tokio's current-thread scheduler unless told otherwise.
    assert runtime_started(one, "flavor") == "current-thread"
    assert runtime_started(three, "flavor") == "multi-thread"
    assert runtime_started(one_multi, "flavor") == "multi-thread"
    for broker in (one, three, one_multi):
        with connection(broker.url) as conn:
            send_all(conn, "/queues/workers", ["w"])
            assert receive_all(conn.create_receiver("/queues/workers", credit=1), 1)[0].body == "w"


def test_sigterm_closes_connections_with_forced(start_broker):
    broker = start_broker()
    with connection(broker.url) as conn:
        conn.create_receiver(queue_address("shutdown"), credit=1)
        broker.proc.terminate()  # SIGTERM
        with pytest.raises(ConnectionClosed) as closed:
            conn.wait(lambda: False, timeout=TIMEOUT, msg="no close from the broker")
        assert closed.value.condition == "amqp:connection:forced"
    assert broker.wait_exit() == 0, broker.stderr_tail()


class ManyConnections(MessagingHandler):
    """Opens `connections` connections at once from one event loop; each
    publishes `per_connection` messages to its own queue and consumes them
    back on the same connection."""

    def __init__(self, url: str, connections: int, per_connection: int, timeout: float):
        super().__init__(prefetch=per_connection, auto_accept=True)
        self.url = url
        self.per_connection = per_connection
        self.timeout = timeout
        run = uuid.uuid4().hex[:8]
        self.addresses = [f"/queues/many-{run}-{i}" for i in range(connections)]
        self.sent = {a: 0 for a in self.addresses}
        self.accepted = {a: 0 for a in self.addresses}
        self.received = {a: [] for a in self.addresses}
        self.errors = []
        self.timed_out = False
        self.finished = 0
        self.open_connections = []
        # Progress counters, so a time-out says how far things got.
        self.remote_opens = 0
        self.links_attached = 0

    def on_start(self, event):
        self.timer = event.container.schedule(self.timeout, self)
        for address in self.addresses:
            conn = event.container.connect(self.url)
            self.open_connections.append(conn)
            event.container.create_receiver(conn, address)
            event.container.create_sender(conn, address)

    def on_connection_remote_open(self, event):
        self.remote_opens += 1

    def on_link_remote_open(self, event):
        self.links_attached += 1

    def on_sendable(self, event):
        address = event.sender.target.address
        while event.sender.credit and self.sent[address] < self.per_connection:
            event.sender.send(Message(body=f"{address} #{self.sent[address]}"))
            self.sent[address] += 1

    def on_accepted(self, event):
        self.accepted[event.link.target.address] += 1
        self._maybe_done(event.connection, event.link.target.address)

    def on_rejected(self, event):
        self.errors.append(f"rejected on {event.link.target.address}")

    def on_released(self, event):
        self.errors.append(f"released on {event.link.target.address}")

    def on_message(self, event):
        address = event.link.source.address
        self.received[address].append(event.message.body)
        self._maybe_done(event.connection, address)

    def _maybe_done(self, conn, address):
        if (
            self.accepted[address] == self.per_connection
            and len(self.received[address]) == self.per_connection
        ):
            self.finished += 1
            conn.close()
            if self.finished == len(self.addresses):
                self.timer.cancel()

    def on_timer_task(self, event):
        self.timed_out = True
        # Snapshot before closing: closing makes the broker answer frames
        # it had been sitting on, which would hide where things stalled.
        self.progress_at_timeout = (
            f"opened {self.remote_opens}/{len(self.addresses)}, "
            f"links attached {self.links_attached}/{2 * len(self.addresses)}, "
            f"publishes accepted {sum(self.accepted.values())}, "
            f"received {sum(len(r) for r in self.received.values())}"
        )
        for conn in self.open_connections:
            if conn.state & Endpoint.LOCAL_ACTIVE:
                conn.close()

    def on_transport_error(self, event):
        self.errors.append(f"transport: {event.transport.condition}")

    def on_connection_error(self, event):
        self.errors.append(f"connection: {event.connection.remote_condition}")

    def on_link_error(self, event):
        self.errors.append(f"link: {event.link.remote_condition}")


def test_hundred_concurrent_connections(url):
    # Proton's event-driven Container pipelines begin/attach/flow right
    # behind its open, without waiting for the broker's open: this is the
    # usual way real clients connect, unlike BlockingConnection.
    handler = ManyConnections(url, connections=100, per_connection=10, timeout=30.0)
    Container(handler).run()
    assert not handler.errors, handler.errors[:5]
    assert not handler.timed_out, (
        f"only {handler.finished}/100 connections finished in time; "
        f"at the time-out: {handler.progress_at_timeout}"
    )
    for address in handler.addresses:
        expected = [f"{address} #{i}" for i in range(10)]
        assert handler.received[address] == expected, address
        assert handler.accepted[address] == 10, address


def test_frames_pipelined_behind_open_are_served(url):
    # One event-driven connection: begin, attach and flow leave in the same
    # write as open, so the broker must serve frames already buffered behind
    # the open instead of waiting for more bytes.
    handler = ManyConnections(url, connections=1, per_connection=1, timeout=10.0)
    Container(handler).run()
    assert not handler.errors, handler.errors
    assert not handler.timed_out, f"stalled; at the time-out: {handler.progress_at_timeout}"
    assert handler.received[handler.addresses[0]] == [f"{handler.addresses[0]} #0"]
