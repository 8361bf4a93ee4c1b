"""TLS and SASL on the broker, against clients nobody here wrote: librdkafka (confluent-kafka)
over SASL_SSL with SCRAM-SHA-512 and over SSL, kafka-python over SASL_PLAINTEXT with PLAIN,
kafkawire's own client with SCRAM; wrong passwords, unknown mechanisms and requests before
authentication are refused as Kafka refuses them.  Certificates are made when the tests run."""
from __future__ import annotations

import socket
import struct
import time

import pytest

import kafkawire
from kafkawire.client import AuthenticationError
from kafkawire.protocol import (ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest,
                                SaslAuthenticateRequest, SaslHandshakeRequest, decode_response,
                                encode_request)
from kafkawire.server.auth import ScramCredential, UserStore, scram_credential
from kafkawire.server.broker import Broker
from kafkawire.server.config import ConfigError
from kafkawire.testing import running_broker
from tls_support import make_pki

pytestmark = pytest.mark.one_backend

TIMEOUT = 90.0


# -- certificates ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _secure_config(pki, users_file):
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                         "SASL_SSL://127.0.0.1:0",
            "ssl.keystore.location": pki["server"],
            "sasl.user.alice": "alice-secret", "sasl.user.u": "p",
            "sasl.users.file": str(users_file)}


@pytest.fixture
def secure_broker(pki, tmp_path):
    users = tmp_path / "users.properties"
    # bob is stored salted only, in Kafka's credential form
    users.write_text("# users of the test broker\n"
                     f"bob.SCRAM-SHA-512={scram_credential('SCRAM-SHA-512', 'bob-secret', 8192)}\n"
                     "carol=carol-secret\n")
    with running_broker(str(tmp_path / "logs"), config=_secure_config(pki, users)) as broker:
        yield broker


# -- clients --------------------------------------------------------------------------------
def _records(tag, n=50):
    return [(b"%s-%d" % (tag.encode(), i), b"value-%d-" % i + b"y" * (i * 13 % 300))
            for i in range(n)]


def _confluent_roundtrip(bs, settings, topic, recs):
    ck = pytest.importorskip("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, **settings})
    for k, v in recs:
        p.produce(topic, key=k, value=v, partition=0)
    assert p.flush(TIMEOUT) == 0
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": f"g-{topic}",
                     "auto.offset.reset": "earliest", **settings})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(got) < len(recs) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.key(), m.value()))
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert got == recs


def test_confluent_sasl_ssl_scram_sha_512(secure_broker, pki):
    bs = secure_broker.listeners["SASL_SSL"]
    settings = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                "ssl.ca.location": pki["ca"]}
    _confluent_roundtrip(bs, {**settings, "sasl.username": "alice", "sasl.password": "alice-secret"},
                         "scram-ssl", _records("a"))
    # bob's credential was configured salted, never as a password
    _confluent_roundtrip(bs, {**settings, "sasl.username": "bob", "sasl.password": "bob-secret"},
                         "scram-ssl-bob", _records("b", 20))


def test_confluent_ssl(secure_broker, pki):
    _confluent_roundtrip(secure_broker.listeners["SSL"],
                         {"security.protocol": "SSL", "ssl.ca.location": pki["ca"]},
                         "tls", _records("t", 200))


def test_confluent_ssl_requests_of_many_tls_records(secure_broker, pki):
    """Produce requests of several hundred KiB arrive over TLS in many TLS records and are
    read whole (the connection's buffer grows to hold them); fetches answer them back."""
    recs = [(b"big-%d" % i, bytes([i % 251]) * 2000) for i in range(1500)]
    _confluent_roundtrip(secure_broker.listeners["SSL"],
                         {"security.protocol": "SSL", "ssl.ca.location": pki["ca"]},
                         "tls-big", recs)


def test_metadata_advertises_the_listener_asked(secure_broker, pki):
    cka = pytest.importorskip("confluent_kafka.admin")
    for name, settings in (("PLAINTEXT", {}), ("SSL", {"security.protocol": "SSL",
                                                      "ssl.ca.location": pki["ca"]})):
        bs = secure_broker.listeners[name]
        admin = cka.AdminClient({"bootstrap.servers": bs, **settings})
        md = admin.list_topics(timeout=TIMEOUT)
        (b,) = md.brokers.values()
        assert f"{b.host}:{b.port}" == bs


def test_kafka_python_sasl_plaintext_plain(secure_broker):
    kafka = pytest.importorskip("kafka")
    bs = secure_broker.listeners["SASL_PLAINTEXT"]
    auth = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                sasl_plain_username="carol", sasl_plain_password="carol-secret")
    recs = _records("kp")
    p = kafka.KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=5,
                            request_timeout_ms=int(TIMEOUT * 1000), **auth)
    for k, v in recs:
        p.send("plain", key=k, value=v, partition=0)
    p.flush(TIMEOUT)
    p.close()
    c = kafka.KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False,
                            auto_offset_reset="earliest", consumer_timeout_ms=int(TIMEOUT * 1000),
                            **auth)
    c.assign([kafka.TopicPartition("plain", 0)])
    got = []
    for m in c:
        got.append((m.key, m.value))
        if len(got) == len(recs):
            break
    c.close()
    assert got == recs


@pytest.mark.parametrize("listener,mechanism", [("SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                                ("SASL_SSL", "SCRAM-SHA-512")])
def test_kafkawire_client_scram(secure_broker, pki, listener, mechanism):
    bs = secure_broker.listeners[listener]
    auth = dict(security_protocol=listener, sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password="alice-secret")
    if listener == "SASL_SSL":
        auth["ssl_cafile"] = pki["ca"]
    recs = _records("kw")
    p = kafkawire.Producer(bootstrap_servers=bs, acks="all", **auth)
    for k, v in recs:
        p.send("kw-scram", key=k, value=v, partition=0)
    p.flush(TIMEOUT)
    p.close()
    c = kafkawire.Consumer(bootstrap_servers=bs, auto_offset_reset="earliest", **auth)
    c.assign([("kw-scram", 0)])
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < len(recs) and time.monotonic() < deadline:
        for r in c.poll(timeout_ms=500):
            got.append((r.key, r.value))
    c.close()
    assert got == recs


def test_mutual_tls(pki, tmp_path):
    config = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": pki["server"],
              "ssl.truststore.location": pki["ca"], "ssl.client.auth": "required"}
    with running_broker(str(tmp_path / "logs"), config=config) as broker:
        bs = broker.bootstrap_servers
        client = kafkawire.Client(bootstrap_servers=bs, security_protocol="SSL",
                                  ssl_cafile=pki["ca"], ssl_certfile=pki["client_cert"],
                                  ssl_keyfile=pki["client_key"])
        try:
            assert [b.port for b in client.metadata().brokers.values()] == [broker.address[1]]
        finally:
            client.close()
        anonymous = kafkawire.Client(bootstrap_servers=bs, security_protocol="SSL",
                                     ssl_cafile=pki["ca"], request_timeout_ms=20000)
        try:
            with pytest.raises(Exception):
                anonymous.metadata()
        finally:
            anonymous.close()


# -- refusals -------------------------------------------------------------------------------
def test_wrong_password_fails_clearly(secure_broker, pki):
    ck = pytest.importorskip("confluent_kafka")
    errors = []
    p = ck.Producer({"bootstrap.servers": secure_broker.listeners["SASL_SSL"],
                     "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                     "ssl.ca.location": pki["ca"], "sasl.username": "alice",
                     "sasl.password": "not-her-password", "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT
    while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        p.poll(0.2)
    msg = next(e.str() for e in errors if e.code() == ck.KafkaError._AUTHENTICATION)
    assert "invalid credentials" in msg and "SCRAM-SHA-512" in msg
    del p

    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        client = kafkawire.Client(bootstrap_servers=secure_broker.listeners["SASL_PLAINTEXT"],
                                  security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                  sasl_plain_username="alice", sasl_plain_password="wrong")
        try:
            with pytest.raises(AuthenticationError, match="[Aa]uthentication failed"):
                client.metadata()
        finally:
            client.close()


class _Raw:
    """A bare socket speaking requests, to see exactly what the broker answers."""

    def __init__(self, bs):
        host, port = bs.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.cid = 0

    def send(self, msg, version):
        self.cid += 1
        self.sock.sendall(encode_request(msg, version, self.cid, "raw"))
        return self.cid

    def recv_frame(self):
        head = self._exact(4)
        if head is None:
            return None
        return self._exact(struct.unpack(">i", head)[0])

    def call(self, msg, version):
        self.send(msg, version)
        frame = self.recv_frame()
        assert frame is not None, "the broker closed the connection"
        return decode_response(type(msg).API_KEY, version, frame, sized=False).message

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def closed(self):
        return self.recv_frame() is None

    def close(self):
        self.sock.close()


def test_requests_before_authentication_are_refused(secure_broker):
    bs = secure_broker.listeners["SASL_PLAINTEXT"]
    raw = _Raw(bs)
    try:
        resp = raw.call(ApiVersionsRequest(client_software_name="raw",
                                           client_software_version="1"), 3)
        assert resp.error_code == 0
        assert {17, 36} <= {k.api_key for k in resp.api_keys}
        raw.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1)
        assert raw.closed()
    finally:
        raw.close()

    for first in (MetadataRequest(topics=None, allow_auto_topic_creation=False),
                  FindCoordinatorRequest(key="g", key_type=0)):
        raw = _Raw(bs)     # an API answered at once, as a new connection's very first request
        try:
            raw.send(first, 1)
            assert raw.closed()
        finally:
            raw.close()

    raw = _Raw(bs)     # SaslAuthenticate before SaslHandshake
    try:
        resp = raw.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
        assert resp.error_code == 34          # ILLEGAL_SASL_STATE
        assert raw.closed()
    finally:
        raw.close()

    raw = _Raw(bs)     # a mechanism the listener does not offer
    try:
        resp = raw.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert resp.error_code == 33          # UNSUPPORTED_SASL_MECHANISM
        assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert raw.closed()
    finally:
        raw.close()

    raw = _Raw(bs)     # a wrong password: SASL_AUTHENTICATION_FAILED, then closed
    try:
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        resp = raw.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"), 1)
        assert resp.error_code == 58
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert raw.closed()
    finally:
        raw.close()

    raw = _Raw(bs)     # the right one: then every request is served
    try:
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        resp = raw.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
        assert resp.error_code == 0
        md = raw.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1)
        assert [b.port for b in md.brokers] == [int(bs.rsplit(":", 1)[1])]
        # a second exchange on an authenticated connection is refused, the connection kept
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 34
        assert raw.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1).brokers
    finally:
        raw.close()

    raw = _Raw(bs)     # SaslHandshake v0: the tokens follow bare, without request headers
    try:
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = b"\0carol\0carol-secret"
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert raw.recv_frame() == b""
        assert raw.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1).brokers
    finally:
        raw.close()

    raw = _Raw(bs)     # a bare token shorter than a request header is still a token
    try:
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        raw.sock.sendall(struct.pack(">i", 4) + b"\0u\0p")
        assert raw.recv_frame() == b""
        assert raw.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1).brokers
    finally:
        raw.close()

    raw = _Raw(secure_broker.listeners["PLAINTEXT"])   # no exchange on a PLAINTEXT listener
    try:
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 34
        assert raw.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 1).brokers
    finally:
        raw.close()


def test_passwords_are_not_described(secure_broker):
    cka = pytest.importorskip("confluent_kafka.admin")
    admin = cka.AdminClient({"bootstrap.servers": secure_broker.listeners["PLAINTEXT"]})
    res = cka.ConfigResource(cka.ResourceType.BROKER, str(secure_broker.node_id))
    configs = admin.describe_configs([res])[res].result(TIMEOUT)
    entry = configs["sasl.user.alice"]
    assert entry.is_sensitive and entry.value is None
    assert configs["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


# -- settings -------------------------------------------------------------------------------
def test_scram_credential_form():
    cred = scram_credential("SCRAM-SHA-256", "pw", 4096, salt=b"s" * 16)
    text = str(cred)
    assert text.startswith("salt=c3Nzc3Nzc3Nzc3Nzc3Nzcw==,stored_key=") and text.endswith(
        ",iterations=4096")
    assert ScramCredential.parse(text) == cred
    store = UserStore()
    store.add_line("dave.scram-sha-256=" + text, 4096, "test")
    assert store.check_password("dave", "pw") and not store.check_password("dave", "pW")
    assert not store.check_password("nobody", "pw")
    with pytest.raises(ConfigError, match="iterations"):
        ScramCredential.parse(text.replace("iterations=4096", "iterations=10"))
    with pytest.raises(ConfigError, match="salt="):
        ScramCredential.parse("salt=***")


@pytest.mark.parametrize("config,match", [
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "needs users"),
    ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
    ({"listeners": "TLS://127.0.0.1:0"}, "no security protocol"),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, "NAME://HOST:PORT"),
    ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "once"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.user.a": "b",
      "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/nonexistent.pem"},
     "cannot load"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "x", "ssl.keystore.type": "JKS"},
     "PEM"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.users.file": "/nonexistent"},
     "sasl.users.file"),
])
def test_bad_settings_are_refused_when_built(tmp_path, config, match):
    with pytest.raises(ConfigError, match=match):
        Broker(str(tmp_path / "logs"), config=config)


def test_listener_prefixed_settings_and_named_listeners(pki, tmp_path):
    config = {"listeners": "INTERNAL://127.0.0.1:0,CLIENTS://127.0.0.1:0",
              "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENTS:SASL_SSL",
              "listener.name.clients.ssl.keystore.location": pki["server"],
              "listener.name.clients.sasl.enabled.mechanisms": "SCRAM-SHA-512",
              "sasl.user.alice": "alice-secret"}
    with running_broker(str(tmp_path / "logs"), config=config) as broker:
        assert list(broker.listeners) == ["INTERNAL", "CLIENTS"]
        raw = _Raw(broker.listeners["CLIENTS"])
        raw.close()
        client = kafkawire.Client(bootstrap_servers=broker.listeners["CLIENTS"],
                                  security_protocol="SASL_SSL", ssl_cafile=pki["ca"],
                                  sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                  sasl_plain_password="alice-secret")
        try:
            with pytest.raises(AuthenticationError, match="SCRAM-SHA-512"):
                client.metadata()
        finally:
            client.close()
