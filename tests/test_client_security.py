"""TLS and SASL against scripted brokers on loopback, and the settings tables.

The TLS broker uses a self-signed certificate made when the test runs (with
``cryptography``); the SASL brokers implement the server side of PLAIN,
SCRAM (RFC 5802, checking the client's proof and sending the server
signature) and OAUTHBEARER, so every mechanism is exercised end to end.
"""
from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import ipaddress
import os
import ssl
import threading

import pytest

import kafkawire.errors
from kafkawire import protocol as P
from kafkawire.client import Client, Consumer, KafkaConnectionError, Producer, TopicPartition
from kafkawire.client.config import ConfigError, resolve
from kafkawire.client.security import AuthenticationError, ScramClient, oauth_message
from fake_brokers import FakeCluster, IdempotentLog

pytestmark = pytest.mark.one_backend


# ------------------------------------------------------------------ certificates
def _self_signed(tmp_path):
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    certfile, keyfile = tmp_path / "broker.pem", tmp_path / "broker.key"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return str(certfile), str(keyfile)


@pytest.fixture
def tls_files(tmp_path):
    return _self_signed(tmp_path)


def _server_context(certfile, keyfile):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certfile, keyfile)
    return ctx


# ------------------------------------------------------------------ SASL servers
class SaslServer:
    """The broker side of SaslHandshake + SaslAuthenticate for one mechanism."""

    def __init__(self, fake: FakeCluster, mechanism: str, users=None, tokens=()) -> None:
        self.mechanism = mechanism
        self.users = dict(users or {})
        self.tokens = set(tokens)
        self.state = {}
        self.authenticated = []
        self.seen_before_auth = []
        fake.handlers[17] = self.handshake
        fake.handlers[36] = self.authenticate
        self.fake = fake
        inner = fake.handlers[3]

        def metadata(node, req):
            if node not in self.authenticated:
                self.seen_before_auth.append(3)
            return inner(node, req)
        fake.handlers[3] = metadata

    def handshake(self, node, req):
        ok = req.message.mechanism == self.mechanism
        return P.SaslHandshakeResponse(error_code=0 if ok else 33, mechanisms=[self.mechanism])

    def _fail(self, msg):
        return P.SaslAuthenticateResponse(error_code=58, error_message=msg, auth_bytes=b"")

    def authenticate(self, node, req):
        data = bytes(req.message.auth_bytes)
        if self.mechanism == "PLAIN":
            _, user, password = data.split(b"\0")
            if self.users.get(user.decode()) != password.decode():
                return self._fail("Invalid username or password")
            self.authenticated.append(node)
            return P.SaslAuthenticateResponse(error_code=0, auth_bytes=b"")
        if self.mechanism == "OAUTHBEARER":
            text = data.decode()
            assert text.startswith("n,,\x01") and text.endswith("\x01\x01")
            fields = dict(kv.split("=", 1) for kv in text[4:-2].split("\x01"))
            if fields.get("auth", "")[len("Bearer "):] not in self.tokens:
                return self._fail("invalid token")
            self.state["extensions"] = {k: v for k, v in fields.items() if k != "auth"}
            self.authenticated.append(node)
            return P.SaslAuthenticateResponse(error_code=0, auth_bytes=b"")
        return self._scram(node, data)

    def _scram(self, node, data):
        h = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[self.mechanism]
        text = data.decode()
        if text.startswith("n,,"):
            bare = text[3:]
            attrs = dict(p.split("=", 1) for p in bare.split(","))
            user = attrs["n"]
            salt = os.urandom(16)
            nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
            server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i=4096"
            self.state[node] = (user, salt, bare, server_first, nonce)
            return P.SaslAuthenticateResponse(error_code=0, auth_bytes=server_first.encode())
        user, salt, bare, server_first, nonce = self.state.pop(node)
        without_proof, proof = text.rsplit(",p=", 1)
        assert without_proof == f"c=biws,r={nonce}"
        password = self.users.get(user)
        if password is None:
            return self._fail("unknown user")
        salted = hashlib.pbkdf2_hmac(h, password.encode(), salt, 4096)
        client_key = hmac.new(salted, b"Client Key", h).digest()
        stored = hashlib.new(h, client_key).digest()
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored, auth_message, h).digest()
        recovered = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
        if hashlib.new(h, recovered).digest() != stored:
            return self._fail("Authentication failed during authentication due to invalid "
                              "credentials with SASL mechanism " + self.mechanism)
        server_key = hmac.new(salted, b"Server Key", h).digest()
        v = base64.b64encode(hmac.new(server_key, auth_message, h).digest()).decode()
        self.authenticated.append(node)
        return P.SaslAuthenticateResponse(error_code=0, auth_bytes=f"v={v}".encode())


# ------------------------------------------------------------------------ tests
def test_scram_sha256_matches_rfc7677_vector():
    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert c.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    c.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(AuthenticationError, match="signature"):
        c.verify(b"v=" + base64.b64encode(b"\0" * 32))


def test_scram_refuses_a_nonce_that_does_not_extend_ours():
    c = ScramClient("SCRAM-SHA-512", "u", "p", nonce="abc")
    with pytest.raises(AuthenticationError, match="nonce"):
        c.final(b"r=xyz123,s=AAAA,i=4096")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_password_mechanisms(fake, mechanism):
    server = SaslServer(fake, mechanism, users={"alice": "s3cret,=x"})
    with Client(fake.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password="s3cret,=x") as c:
        assert "t" in c.metadata().topics
    assert server.authenticated and not server.seen_before_auth


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_sasl_wrong_password_is_an_authentication_error(fake, mechanism):
    SaslServer(fake, mechanism, users={"alice": "right"})
    with Client(fake.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password="wrong", retries=0) as c:
        with pytest.raises(AuthenticationError, match="authentication .* failed"):
            c.metadata()


def test_sasl_unsupported_mechanism_names_what_the_broker_offers(fake):
    SaslServer(fake, "SCRAM-SHA-512", users={"a": "b"})
    with Client(fake.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                sasl_plain_username="a", sasl_plain_password="b") as c:
        with pytest.raises(AuthenticationError, match="offers: SCRAM-SHA-512"):
            c.metadata()


_WRONG = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
              sasl_plain_username="alice", sasl_plain_password="wrong")


def test_producer_with_a_wrong_password_raises_authentication_error(fake):
    # max_block_ms is long: waiting it out (BufferFullError) would fail the test, slowly
    server = SaslServer(fake, "PLAIN", users={"alice": "right"})
    IdempotentLog(fake)
    with Producer(fake.bootstrap, max_block_ms=120_000, retry_backoff_ms=10,
                  retry_backoff_max_ms=50, **_WRONG) as p:
        with pytest.raises(kafkawire.errors.AuthenticationError, match="Invalid username"):
            p.send("t", b"v")
        with pytest.raises(AuthenticationError):
            p.send_batch("t", [b"a", b"b"])
        with pytest.raises(AuthenticationError):
            p.partitions_for("t")
        with pytest.raises(AuthenticationError):
            p.flush(60)
        # the producer tries again: once the broker accepts the credentials, sends go through
        server.users["alice"] = "wrong"
        for _ in range(2000):
            try:
                f = p.send("t", b"after", partition=0)
                break
            except AuthenticationError:
                threading.Event().wait(0.01)
        assert f.result(30).offset == 0
        assert p.flush(30) == 0


def test_producer_refused_after_a_reconnect_fails_queued_records(fake):
    server = SaslServer(fake, "PLAIN", users={"alice": "right"})
    broker = IdempotentLog(fake)
    delivered = []
    with Producer(fake.bootstrap, max_block_ms=120_000, linger_ms=0, retry_backoff_ms=10,
                  reconnect_backoff_ms=10, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="PLAIN", sasl_plain_username="alice",
                  sasl_plain_password="right") as p:
        assert p.send("t", b"first", partition=0).result(30).offset == 0
        server.users["alice"] = "changed"  # the password is rotated; connections drop
        broker.fault = lambda node, req, n: "close"
        futures = [p.send("t", b"x%d" % i, partition=0,
                          on_delivery=lambda err, md: delivered.append(err)) for i in range(5)]
        with pytest.raises(AuthenticationError):
            p.flush(60)
        for f in futures:
            with pytest.raises(AuthenticationError):
                f.result(30)
    assert len(delivered) == 5
    assert all(isinstance(e, kafkawire.errors.AuthenticationError) for e in delivered)
    assert broker.values() == [b"first"]


@pytest.mark.parametrize("how", ["poll", "poll_arrow", "group"])
def test_consumer_with_a_wrong_password_raises_authentication_error(fake, how):
    SaslServer(fake, "PLAIN", users={"alice": "right"})
    group = {"group_id": "g"} if how == "group" else {}
    with Consumer(fake.bootstrap, **group, **_WRONG) as c:
        if how == "group":
            c.subscribe(["t"])
        else:
            c.assign([TopicPartition("t", 0)])
        with pytest.raises(kafkawire.errors.AuthenticationError, match="Invalid username"):
            getattr(c, "poll_arrow" if how == "poll_arrow" else "poll")(60)


def test_oauthbearer_calls_the_token_provider_per_connection(fake):
    server = SaslServer(fake, "OAUTHBEARER", tokens={"tok-1", "tok-2"})
    calls = []

    def provider():
        calls.append(1)
        return f"tok-{len(calls)}", {"traceId": "42"}

    with Client(fake.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                sasl_oauth_token_provider=provider) as c:
        c.metadata()
        c._node(1)  # a second broker: a second connection, a second token
    assert len(calls) == 2 and len(server.authenticated) == 2
    assert server.state["extensions"] == {"traceId": "42"}
    assert oauth_message(lambda: "abc") == b"n,,\x01auth=Bearer abc\x01\x01"


def test_tls_with_a_self_signed_certificate(tls_files):
    certfile, keyfile = tls_files
    fake = FakeCluster(1, ssl_context=_server_context(certfile, keyfile))
    try:
        with Client(fake.bootstrap, security_protocol="SSL", ssl_cafile=certfile) as c:
            assert "t" in c.metadata().topics
            assert isinstance(c._any()._sock, ssl.SSLSocket)
        # Without the CA the certificate is refused, with a clear message.
        with Client(fake.bootstrap, security_protocol="SSL", retries=0,
                    reconnect_backoff_ms=0) as c:
            with pytest.raises(KafkaConnectionError, match="TLS handshake"):
                c.metadata()
    finally:
        fake.close()


def test_sasl_scram_over_tls(tls_files):
    certfile, keyfile = tls_files
    ctx = ssl.create_default_context(cafile=certfile)
    fake = FakeCluster(1, ssl_context=_server_context(certfile, keyfile))
    server = SaslServer(fake, "SCRAM-SHA-256", users={"bob": "pw"})
    try:
        with Client(fake.bootstrap, security_protocol="SASL_SSL", ssl_context=ctx,
                    sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
                    sasl_plain_password="pw") as c:
            assert "t" in c.metadata().topics
        assert server.authenticated == [0]
    finally:
        fake.close()


def test_reconnect_backoff_grows_and_resets(fake):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    with Client(f"127.0.0.1:{dead}", retries=0, reconnect_backoff_ms=40,
                reconnect_backoff_max_ms=100) as c:
        delays = []
        for _ in range(4):
            with pytest.raises(KafkaConnectionError):
                c.metadata()
            delays.append(c.reconnect_delay(("bootstrap", "127.0.0.1", dead)))
        assert 0.03 <= delays[0] <= 0.05
        assert delays[1] > delays[0] and max(delays) <= 0.121


# ------------------------------------------------------------------------ config
def test_unknown_setting_names_it():
    with pytest.raises(ConfigError, match="'lingerms'.*'linger_ms'"):
        resolve("producer", {"lingerms": 5})
    with pytest.raises(ConfigError, match="snake_case"):
        resolve("producer", {"linger.ms": 5})
    with pytest.raises(ConfigError, match="unknown producer setting 'flux'$"):
        resolve("producer", {"flux": 1})


def test_values_are_checked_and_defaults_filled():
    cfg = resolve("producer", {"acks": "all", "compression_type": "ZSTD", "linger_ms": 0})
    assert cfg.acks == -1 and cfg.compression_type == "zstd" and cfg.linger_ms == 0
    assert cfg.enable_idempotence is True and cfg.batch_size == 262144
    with pytest.raises(ConfigError, match="linger_ms must be at least 0"):
        resolve("producer", {"linger_ms": -1})
    with pytest.raises(ConfigError, match="compression_type"):
        resolve("producer", {"compression_type": "brotli"})
    with pytest.raises(ConfigError, match="acks='all'"):
        resolve("producer", {"acks": 1})
    assert resolve("producer", {"acks": 1, "enable_idempotence": False}).acks == 1
    with pytest.raises(ConfigError, match="sasl_plain_username"):
        resolve("producer", {"security_protocol": "SASL_SSL"})
    assert "***" in repr(resolve("producer", {"sasl_plain_password": "hunter2"}))
