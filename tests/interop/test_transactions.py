"""Transactions through Qpid Proton: not implemented yet, so a link to the
transaction coordinator is refused on its own (amqp:not-implemented) and
the connection goes on.

Guards against the coordinator target (descriptor 0x30) being a decode
error, which closed the client's whole connection with amqp:decode-error
'unknown descriptor 0x00000000:0x00000030'."""

from proton import Endpoint, Message, Terminus, symbol
from proton.reactor import LinkOption
from proton.utils import LinkDetached

from helpers import TIMEOUT, connection, queue_address, receive_all, send_all


class Coordinator(LinkOption):
    """Make a sender's target the transaction coordinator, as Proton's own
    `Container.declare_transaction` does."""

    def apply(self, link):
        link.target.type = Terminus.COORDINATOR
        link.target.capabilities.put_object(symbol("amqp:local-transactions"))


def refused_link(conn):
    """Attach a sender to the coordinator and return the link once the
    broker has detached it."""
    try:
        sender = conn.create_sender(None, name="txn-ctrl", options=Coordinator())
    except LinkDetached as detached:
        # The detach came in the same read as the attach reply.
        return detached.link
    conn.wait(
        lambda: sender.link.state & Endpoint.REMOTE_CLOSED,
        timeout=TIMEOUT,
        msg="waiting for the broker to detach the coordinator link",
    )
    return sender.link


def test_coordinator_link_is_refused_and_connection_goes_on(url):
    address = queue_address("after-txn")
    with connection(url) as conn:
        link = refused_link(conn)
        assert link.remote_condition is not None, "the detach carries an error"
        assert link.remote_condition.name == "amqp:not-implemented", link.remote_condition
        # Our attach reply had a null target (transport 2.6.3).
        assert link.remote_target.type != Terminus.COORDINATOR
        # The same connection still sends and receives.
        send_all(conn, address, ["after the refusal"])
        receiver = conn.create_receiver(address, credit=1)
        received = receive_all(receiver, 1, accept=True)
        assert [m.body for m in received] == ["after the refusal"]
        receiver.close()
