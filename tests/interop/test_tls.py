"""TLS on the AMQP port with Qpid Proton: amqps verifying the broker's
certificate and host name against a CA made here (openssl CLI), refusals
for the wrong CA and the wrong name, SASL EXTERNAL with a client
certificate (its CN a user of the users file, whose permissions then
apply), and certificates reloaded on SIGHUP."""

import shutil
import signal

import pytest
from proton import ConnectionException, SSLDomain
from proton.utils import LinkDetached

from helpers import TIMEOUT, connection, queue_address, receive_all, send_all, wait_until
from pki import Pki
from test_users import ctl


def tls_flags(pki, cert=None, key=None):
    if cert is None:
        cert, key = pki.server()
    return ["--tls-listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)]


def client_domain(ca, cert=None, key=None):
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(ca))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if cert is not None:
        domain.set_credentials(str(cert), str(key), None)
    return domain


def amqps(broker, ca, name="localhost", **kwargs):
    # The socket goes to 127.0.0.1; the name the certificate must carry
    # (and SNI) comes from virtual_host.
    return connection(
        f"amqps://{broker.tls_addr}",
        ssl_domain=client_domain(ca, kwargs.pop("cert", None), kwargs.pop("key", None)),
        virtual_host=name,
        **kwargs,
    )


def test_amqps_verifies_the_server_and_exchanges_messages(start_broker, tmp_path):
    pki = Pki(tmp_path / "pki")
    broker = start_broker(*tls_flags(pki))
    assert broker.tls_addr and broker.tls_addr != broker.addr
    address = queue_address("tls")
    with amqps(broker, pki.ca) as conn:
        send_all(conn, address, ["over tls"])
        receiver = conn.create_receiver(address, credit=1)
        assert receive_all(receiver, 1)[0].body == "over tls"

    # The certificate names localhost and 127.0.0.1, not this name.
    with pytest.raises(ConnectionException):
        with amqps(broker, pki.ca, name="not-the-broker.example"):
            pass
    # A client trusting another CA refuses the broker.
    stranger = Pki(tmp_path / "stranger", "stranger CA")
    with pytest.raises(ConnectionException):
        with amqps(broker, stranger.ca):
            pass
    # The plain listener still serves.
    with connection(broker.url) as conn:
        send_all(conn, address, ["plain"])


def test_external_login_with_a_client_certificate(start_broker, tmp_path):
    pki = Pki(tmp_path / "pki")
    users = tmp_path / "users.toml"
    ctl("user", "add", "--file", str(users), "--name", "alice", "--password", "unused",
        "--configure", "^/queues/alice-", "--write", "^/queues/alice-", "--read", "^/queues/alice-")
    broker = start_broker(*tls_flags(pki), "--tls-client-ca", str(pki.ca), "--users", str(users))
    cert, key = pki.client("alice")
    address = queue_address("alice")
    with amqps(broker, pki.ca, cert=cert, key=key, allowed_mechs="EXTERNAL") as conn:
        send_all(conn, address, ["from alice's certificate"])
        receiver = conn.create_receiver(address, credit=1)
        assert receive_all(receiver, 1)[0].body == "from alice's certificate"
        # Her permissions apply: another queue is refused on that link.
        with pytest.raises(LinkDetached) as refused:
            conn.create_sender(queue_address("bob"))
        assert "unauthorized-access" in str(refused.value), str(refused.value)

    # A valid certificate whose CN is no user: SASL auth failure.
    cert, key = pki.client("mallory")
    with pytest.raises(ConnectionException):
        with amqps(broker, pki.ca, cert=cert, key=key, allowed_mechs="EXTERNAL"):
            pass
    # A certificate from another CA does not get through TLS.
    stranger = Pki(tmp_path / "stranger", "stranger CA")
    cert, key = stranger.client("alice")
    with pytest.raises(ConnectionException):
        with amqps(broker, pki.ca, cert=cert, key=key, allowed_mechs="EXTERNAL"):
            pass


def test_sighup_reloads_the_certificate(start_broker, tmp_path):
    first = Pki(tmp_path / "first", "first CA")
    second = Pki(tmp_path / "second", "second CA")
    cert, key = first.server()
    live_cert, live_key = tmp_path / "live.pem", tmp_path / "live.key"
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    broker = start_broker(*tls_flags(first, live_cert, live_key))
    with amqps(broker, first.ca):
        pass

    cert, key = second.server()
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    broker.proc.send_signal(signal.SIGHUP)

    def second_ca_accepted():
        try:
            with amqps(broker, second.ca):
                return True
        except ConnectionException:
            return False

    wait_until(second_ca_accepted, TIMEOUT, "the reloaded certificate is served", broker.stderr_tail)
    with pytest.raises(ConnectionException):
        with amqps(broker, first.ca):
            pass
    assert broker.alive()
