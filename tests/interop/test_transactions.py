"""Local transactions through Qpid Proton's own transaction API
(`Container.declare_transaction`, `Transaction.send`, `.accept`,
`.commit`, `.abort`), on a transient and on a quorum queue: messages sent
in a transaction appear only once it commits and never when it aborts;
deliveries accepted in a transaction are gone after a commit and come
back after an abort; messages sent through the anonymous relay in a
transaction reach the queues their `to` names only on commit; a
transaction still open when its connection closes is rolled back. What is in a queue is read afterwards with the blocking
API."""

import pytest
from proton import Message
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container

from helpers import TIMEOUT, assert_nothing_arrives, connection, receive_all, send_all


class Transactional(MessagingHandler, TransactionHandler):
    """Runs `steps` on one connection, one transaction each. A step is
    (bodies to send, deliveries to accept, "commit" | "abort" | "leave").
    Fails the run past TIMEOUT."""

    def __init__(self, url, address, steps, relay_to=()):
        MessagingHandler.__init__(self, prefetch=0, auto_accept=False)
        TransactionHandler.__init__(self)
        self.url, self.address, self.steps = url, address, list(steps)
        # With relay_to: an anonymous sender, each body sent to each address.
        self.relay_to = list(relay_to)
        self.outcomes, self.received, self.error = [], [], None
        self.txn = self.sender = self.receiver = None
        self.step_sent = False

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(self.url)
        if self.relay_to:
            self.sender = event.container.create_sender(self.conn, None)
        else:
            self.sender = event.container.create_sender(self.conn, self.address)
            self.receiver = event.container.create_receiver(self.conn, self.address)
        self.timer = event.container.schedule(TIMEOUT, self)
        self.declare()

    def declare(self):
        self.step_sent = False
        self.container.declare_transaction(self.conn, handler=self)

    def on_timer_task(self, event):
        self.error = f"timed out with steps left {self.steps}"
        self.conn.close()

    def on_transaction_declared(self, event):
        self.txn = event.transaction
        self.run_step()

    def on_sendable(self, event):
        self.run_step()

    def on_message(self, event):
        self.received.append((event.message.body, event.delivery))
        self.run_step()

    def run_step(self):
        if self.txn is None or self.step_sent or not self.steps:
            return
        bodies, accepts, end = self.steps[0]
        if self.sender.credit < len(bodies) * max(1, len(self.relay_to)):
            return
        if len(self.received) < accepts:
            self.receiver.flow(accepts - len(self.received))
            return
        self.step_sent = True
        for body in bodies:
            if self.relay_to:
                for to in self.relay_to:
                    self.txn.send(self.sender, Message(address=to, body=body))
            else:
                self.txn.send(self.sender, Message(body=body))
        for _, delivery in self.received[:accepts]:
            self.txn.accept(delivery)
        self.received = self.received[accepts:]
        if end == "commit":
            self.txn.commit()
        elif end == "abort":
            self.txn.abort()
        else:
            self.finish("left open")

    def on_transaction_committed(self, event):
        self.next_step("committed")

    def on_transaction_aborted(self, event):
        self.next_step("aborted")

    def on_transaction_commit_failed(self, event):
        self.next_step("commit failed")

    def on_transaction_declare_failed(self, event):
        self.error = "declare failed"
        self.finish("declare failed")

    def next_step(self, outcome):
        self.outcomes.append(outcome)
        self.steps.pop(0)
        self.txn = None
        if self.steps:
            self.declare()
        else:
            self.finish(None)

    def finish(self, outcome):
        if outcome:
            self.outcomes.append(outcome)
        self.timer.cancel()
        self.conn.close()


def run(url, address, steps, relay_to=()):
    handler = Transactional(url, address, steps, relay_to)
    Container(handler).run()
    assert handler.error is None, handler.error
    return handler.outcomes


def bodies_in(url, address, expected_count):
    with connection(url) as conn:
        receiver = conn.create_receiver(address, credit=expected_count + 1)
        got = [m.body for m in receive_all(receiver, expected_count)]
        assert_nothing_arrives(receiver)
        return got


@pytest.mark.parametrize("kind", ["queues", "quorum"])
def test_sent_messages_land_on_commit_only(url, kind, request):
    address = f"/{kind}/txn-send-{request.node.name[-8:-1]}"
    outcomes = run(
        url,
        address,
        [(["a", "b", "c"], 0, "commit"), (["never"], 0, "abort"), (["d"], 0, "commit")],
    )
    assert outcomes == ["committed", "aborted", "committed"]
    assert bodies_in(url, address, 4) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("kind", ["queues", "quorum"])
def test_accepts_apply_on_commit_and_return_on_abort(url, kind, request):
    address = f"/{kind}/txn-accept-{request.node.name[-8:-1]}"
    with connection(url) as conn:
        send_all(conn, address, ["one", "two", "three"])
    # Accept "one" and abort (it comes back), then accept the next two and
    # commit: only the returned one is left.
    outcomes = run(url, address, [([], 1, "abort"), ([], 2, "commit")])
    assert outcomes == ["aborted", "committed"]
    assert len(bodies_in(url, address, 1)) == 1


def test_an_open_transaction_dies_with_its_connection(url):
    address = "/queues/txn-left-open"
    with connection(url) as conn:
        send_all(conn, address, ["kept"])
    outcomes = run(url, address, [(["staged"], 1, "leave")])
    assert outcomes == ["left open"]
    assert bodies_in(url, address, 1) == ["kept"]


def test_sends_through_the_anonymous_relay(url):
    queues = ["/queues/txn-relay-a", "/quorum/txn-relay-b"]
    outcomes = run(url, None, [(["x"], 0, "abort"), (["y"], 0, "commit")], relay_to=queues)
    assert outcomes == ["aborted", "committed"]
    for address in queues:
        assert bodies_in(url, address, 1) == ["y"]
