"""Users and permissions with Qpid Proton: `ramqp-ctl user add|list|delete`
edit a users file that holds no password, the broker checks SASL PLAIN
against it (this Proton has no Cyrus SASL, so SCRAM-SHA-256 is tested
with fe2o3-amqp in broker/tests/amqp_users.rs), anonymous is off with a
users file, and the permissions refuse one link with
amqp:unauthorized-access while the connection and its other links go on.
SIGHUP applies an edited file."""

import signal
import subprocess

import pytest
from proton import ConnectionException, Delivery, Message
from proton.utils import LinkDetached

from conftest import brokerd_path
from helpers import TIMEOUT, connection, queue_address, receive_all, send_all, wait_until


def ctl(*args, check=True):
    result = subprocess.run(
        [str(brokerd_path().with_name("ramqp-ctl")), *args],
        capture_output=True, text=True, timeout=30,
    )
    if check:
        assert result.returncode == 0, f"ramqp-ctl {' '.join(args)}: {result.stdout}{result.stderr}"
    return result


def plain(broker, user, password):
    return connection(broker.url, user=user, password=password, allowed_mechs="PLAIN")


@pytest.fixture
def users(tmp_path):
    path = tmp_path / "users.toml"
    ctl("user", "add", "--file", str(path), "--name", "app", "--password", "app-secret",
        "--configure", "^/queues/app-", "--write", "^/queues/app-", "--read", "^/queues/app-")
    # ops: publishes to app queues but may neither create nor read them.
    ctl("user", "add", "--file", str(path), "--name", "ops", "--password", "ops-secret",
        "--write", "^/queues/app-")
    return path


def test_ctl_manages_a_file_without_passwords(users):
    text = users.read_text()
    assert "app-secret" not in text and "ops-secret" not in text
    assert "SCRAM-SHA-256$4096:" in text
    assert (users.stat().st_mode & 0o777) == 0o600
    listing = ctl("user", "list", "--file", str(users)).stdout
    assert "app" in listing and "ops" in listing and "^/queues/app-" in listing
    ctl("user", "delete", "--file", str(users), "--name", "ops")
    assert "ops" not in ctl("user", "list", "--file", str(users)).stdout
    assert ctl("user", "delete", "--file", str(users), "--name", "ops", check=False).returncode != 0
    bad = ctl("user", "add", "--file", str(users), "--name", "x", "--password", "p", "--read", "(",
              check=False)
    assert bad.returncode != 0 and "read pattern" in bad.stderr


def test_plain_checked_against_the_users_file(start_broker, users):
    broker = start_broker("--users", str(users))
    address = queue_address("app")
    with plain(broker, "app", "app-secret") as conn:
        send_all(conn, address, ["hello"])
        receiver = conn.create_receiver(address, credit=1)
        assert receive_all(receiver, 1)[0].body == "hello"
    for user, password in [("app", "wrong"), ("nobody", "app-secret")]:
        with pytest.raises(ConnectionException) as failure:
            with plain(broker, user, password):
                pass
        assert "unauthorized-access" in str(failure.value), str(failure.value)
    # A users file turns anonymous off.
    with pytest.raises(ConnectionException):
        with connection(broker.url, allowed_mechs="ANONYMOUS"):
            pass


def test_refused_link_leaves_the_connection_and_other_links(start_broker, users):
    broker = start_broker("--users", str(users))
    address = queue_address("app")
    with plain(broker, "app", "app-secret") as conn:
        sender = conn.create_sender(address)
        assert sender is not None
        # Not app-: this link alone is refused.
        with pytest.raises(LinkDetached) as refused:
            conn.create_receiver(queue_address("other"))
        assert "unauthorized-access" in str(refused.value), str(refused.value)
        with pytest.raises(LinkDetached):
            conn.create_sender(queue_address("other"))
        # The connection and the link attached before go on.
        delivery = sender.send(Message(body="still served"), timeout=TIMEOUT)
        assert delivery.remote_state == Delivery.ACCEPTED
        receiver = conn.create_receiver(address, credit=1)
        assert receive_all(receiver, 1)[0].body == "still served"
    with plain(broker, "ops", "ops-secret") as conn:
        # ops may write to the existing queue...
        send_all(conn, address, ["from ops"])
        # ...but not read it, nor create a new one by publishing.
        with pytest.raises(LinkDetached) as refused:
            conn.create_receiver(address)
        assert "unauthorized-access" in str(refused.value)
        with pytest.raises(LinkDetached) as refused:
            conn.create_sender(queue_address("app"))
        assert "configure" in str(refused.value), str(refused.value)


def test_sighup_applies_an_edited_users_file(start_broker, users):
    broker = start_broker("--users", str(users))
    with pytest.raises(ConnectionException):
        with plain(broker, "late", "late-pw"):
            pass
    ctl("user", "add", "--file", str(users), "--name", "late", "--password", "late-pw",
        "--configure", ".*", "--write", ".*", "--read", ".*")
    ctl("user", "delete", "--file", str(users), "--name", "app")
    broker.proc.send_signal(signal.SIGHUP)

    def late_gets_in():
        try:
            with plain(broker, "late", "late-pw"):
                return True
        except ConnectionException:
            return False

    wait_until(late_gets_in, TIMEOUT, "the new user logs in after SIGHUP", broker.stderr_tail)
    with pytest.raises(ConnectionException):
        with plain(broker, "app", "app-secret"):
            pass
