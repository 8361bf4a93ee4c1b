"""Kafka 3.9.1's own Java clients against ``kafkawire serve``: the ``Admin`` client (over
SASL_SSL with SCRAM-SHA-512, so Java's TLS and SCRAM are proved too) creates, describes and
deletes topics, describes the cluster, lists groups and their offsets; a plain idempotent
``KafkaProducer``'s records are read back record for record; and one consumer group has
members from three libraries (Java's KafkaConsumer, confluent-kafka, kafkawire.Consumer) that
split the partitions, read every record once, and see the offsets each other committed."""
from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time

import pytest

import kafkawire
from tls_support import make_pki

ck = pytest.importorskip("confluent_kafka")
cka = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.one_backend, pytest.mark.java]

ROOT = os.path.dirname(os.path.dirname(kafkawire.__file__))
TIMEOUT = 180.0


class Serve:
    """``kafkawire serve`` in a process; ``listeners`` maps each listener name to its address."""

    def __init__(self, log_dir, *config):
        args = [sys.executable, "-m", "kafkawire.cli", "serve", "--log-dirs", str(log_dir),
                "--listen", "127.0.0.1:0", "--log-level", "WARNING",
                "--config", "group.initial.rebalance.delay.ms=0",
                "--config", "offsets.topic.num.partitions=3",
                "--config", "transaction.state.log.num.partitions=3"]
        for c in config:
            args += ["--config", c]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE,
                                     env=dict(os.environ, PYTHONPATH=ROOT))
        self.listeners = {}
        self.lines = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode()
            self.lines.append(line)
            m = re.search(r"listener (\S+) on (\S+)", line)
            if m:
                self.listeners[m.group(1)] = m.group(2)
            m = re.search(r"listening on (\S+)", line)
            if m:
                self.bootstrap = m.group(1)
                break
            if not line and self.proc.poll() is not None:
                break
        else:
            self.proc.kill()
        if self.proc.poll() is not None or not hasattr(self, "bootstrap"):
            self.proc.kill()
            raise AssertionError("serve did not start: " + "".join(self.lines))
        # keep reading its log, so the pipe never fills
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.lines.append(line.decode(errors="replace"))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(*config):
        s = Serve(tmp_path / f"logs{len(started)}", *config)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


def _lines(out):
    return out.decode().splitlines()


def test_java_admin_and_idempotent_producer(serve, java_runner, tmp_path):
    pki = make_pki(tmp_path)
    broker = serve("listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                   f"ssl.keystore.location={pki['server']}",
                   "sasl.enabled.mechanisms=SCRAM-SHA-512", "sasl.user.alice=alice-secret",
                   "num.partitions=3")
    plain, secure = broker.listeners["PLAINTEXT"], broker.listeners["SASL_SSL"]
    assert plain == broker.bootstrap

    # a plain (not transactional) idempotent KafkaProducer, read back record for record
    n = 300
    sent = {}
    for line in _lines(java_runner.run("BrokerClients", "produce", plain, "jp", str(n), "3",
                                       timeout=TIMEOUT).stdout):
        _, i, part, off = line.split()
        sent[int(i)] = (int(part), int(off))
    assert len(sent) == n
    for p in range(3):   # each partition's offsets run 0, 1, 2... in the order sent
        assert [sent[i][1] for i in range(p, n, 3)] == list(range(n // 3))
    c = ck.Consumer({"bootstrap.servers": plain, "group.id": "adm-group",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition("jp", p, 0) for p in range(3)])
    got = {}
    deadline = time.monotonic() + TIMEOUT
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            i = int(m.key()[1:])
            assert i not in got
            got[i] = (m.partition(), m.offset(), m.key(), m.value(), m.headers())
    for i in range(n):
        value = ("v%d-" % i + "".join(chr(97 + j % 26) for j in range(i % 97))).encode()
        assert got[i] == (sent[i][0], sent[i][1], b"k%d" % i, value, [("i", str(i).encode())])
    c.commit(offsets=[ck.TopicPartition("jp", p, n // 3) for p in range(3)], asynchronous=False)
    c.close()

    # Admin over SASL_SSL, with Java's own SCRAM and TLS
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="alice" password="alice-secret";')
    out = _lines(java_runner.run(
        "BrokerClients", "admin", secure, "adm-group", "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512", f"sasl.jaas.config={jaas}", "ssl.truststore.type=PEM",
        f"ssl.truststore.location={pki['ca']}", timeout=TIMEOUT).stdout)
    host, port = secure.rsplit(":", 1)
    assert out[:5] == ["created adm-a adm-b", "exists TopicExistsException",
                       "topic adm-a 3 internal=false 0:1 1:1 2:1", "topic adm-b 1 internal=false 0:1",
                       "config cleanup.policy compact"]
    cluster = out[5].split()
    assert cluster[0] == "cluster" and cluster[2:] == ["controller", "1", "nodes", f"1@{host}:{port}"]
    names = next(line for line in out if line.startswith("names ")).split()[1].split(",")
    assert {"adm-a", "adm-b", "jp"} <= set(names) and not any(t.startswith("__") for t in names)
    assert "group adm-group" in out
    assert sorted(line for line in out if line.startswith(("offset ", "end "))) == sorted(
        [f"offset jp {p} 100" for p in range(3)] + [f"end jp {p} 100" for p in range(3)])
    assert "described adm-group Empty members=0" in out
    assert out[-1] == "deleted adm-b"

    # the wrong password: Java's client reports the broker's refusal
    bad = jaas.replace("alice-secret", "wrong")
    with pytest.raises(AssertionError, match="SaslAuthenticationException"):
        java_runner.run("BrokerClients", "admin", secure, "adm-group",
                        "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
                        f"sasl.jaas.config={bad}", "ssl.truststore.type=PEM",
                        f"ssl.truststore.location={pki['ca']}",
                        timeout=TIMEOUT)


class _Member(threading.Thread):
    """A Python group member polling in its own thread until told to stop."""

    def __init__(self, kind, bootstrap, topic, group):
        super().__init__(daemon=True)
        self.kind, self.bootstrap, self.topic, self.group = kind, bootstrap, topic, group
        self.records = []          # (partition, offset, value)
        self.partitions = set()    # every partition it was ever given
        self.halt = threading.Event()
        self.error = None
        self.committed = None

    def run(self):
        try:
            (self._confluent if self.kind == "confluent" else self._kafkawire)()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _confluent(self):
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 60000, "heartbeat.interval.ms": 1000,
                         "partition.assignment.strategy": "range"})

        def on_assign(consumer, parts):
            self.partitions.update(tp.partition for tp in parts)

        def on_revoke(consumer, parts):
            if parts:
                try:
                    consumer.commit(asynchronous=False)
                except ck.KafkaException:
                    pass   # nothing consumed since the last commit
        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.halt.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    self.records.append((m.partition(), m.offset(), m.value()))
            c.commit(asynchronous=False)
        finally:
            c.close()

    def _kafkawire(self):
        c = kafkawire.Consumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               session_timeout_ms=60000, heartbeat_interval_ms=1000,
                               partition_assignment_strategy=["range"])

        def on_assign(consumer, parts):
            self.partitions.update(tp[1] for tp in parts)

        def on_revoke(consumer, parts):
            consumer.commit()
        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.halt.is_set():
                for r in c.poll(timeout_ms=200):
                    self.records.append((r.partition, r.offset, r.value))
            c.commit()
        finally:
            c.close(autocommit=False)


def _wait(cond, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_group_of_three_libraries(serve, java_runner):
    broker = serve("num.partitions=6")
    bs = broker.bootstrap
    topic, group, parts = "mix", "mix-group", 6

    # before: kafkawire's consumer alone in the group reads 10 records a partition, commits
    p = kafkawire.Producer(bootstrap_servers=bs, acks="all")
    for i in range(60):
        p.send(topic, value=b"early-%d" % i, partition=i % parts)
    p.flush(TIMEOUT)
    first = kafkawire.Consumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                               enable_auto_commit=False, partition_assignment_strategy=["range"])
    first.subscribe([topic])
    early = []
    deadline = time.monotonic() + TIMEOUT
    while len(early) < 60 and time.monotonic() < deadline:
        early.extend(r.value for r in first.poll(timeout_ms=200))
    first.commit()
    first.close(autocommit=False)
    assert sorted(early) == sorted(b"early-%d" % i for i in range(60))
    admin = cka.AdminClient({"bootstrap.servers": bs})
    left = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
    assert left.state == ck.ConsumerGroupState.EMPTY and not left.members   # it left at close

    # three libraries join the group
    java_runner.compile("BrokerClients")
    java = subprocess.Popen(["java", "-cp", java_runner.classpath, "BrokerClients", "group", bs,
                             topic, group], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    java_lines: "queue.Queue[str]" = queue.Queue()
    java_out = []

    def read_java():
        for line in java.stdout:
            java_lines.put(line.decode().strip())
    threading.Thread(target=read_java, daemon=True).start()
    threading.Thread(target=java.stderr.read, daemon=True).start()   # keep it flowing
    members = [_Member("confluent", bs, topic, group), _Member("kafkawire", bs, topic, group)]
    try:
        for m in members:
            m.start()

        def stable():
            while not java_lines.empty():
                java_out.append(java_lines.get())
            for m in members:
                assert m.error is None, m.error
            assert java.poll() is None, "the Java member exited"
            d = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
            if d.state != ck.ConsumerGroupState.STABLE or len(d.members) != 3:
                return False
            owned = [sorted(tp.partition for tp in mem.assignment.topic_partitions)
                     for mem in d.members]
            return sorted(q for o in owned for q in o) == list(range(parts)) and all(owned)
        _wait(stable, "a stable group of three members owning two partitions each")

        # now the records: each goes to exactly one member
        p = kafkawire.Producer(bootstrap_servers=bs, acks="all")
        for i in range(600):
            p.send(topic, value=b"late-%d" % i, partition=i % parts)
        p.flush(TIMEOUT)
        p.close()

        def java_records():
            while not java_lines.empty():
                java_out.append(java_lines.get())
            return [line.split() for line in java_out if line.startswith("record ")]

        def everything_read():
            for m in members:
                assert m.error is None, m.error
            return len(java_records()) + sum(len(m.records) for m in members) >= 600
        _wait(everything_read, "the group to read the 600 records")
        time.sleep(1.0)   # a duplicate, were there one, would show up here
    finally:
        for m in members:
            m.halt.set()
        try:
            java.stdin.write(b"stop\n")
            java.stdin.flush()
        except OSError:
            pass
        for m in members:
            m.join(TIMEOUT)
        try:
            java.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            java.kill()
            java.wait()
        while not java_lines.empty():
            java_out.append(java_lines.get())
    for m in members:
        assert m.error is None, m.error
    assert java.returncode == 0 and java_out[-1] == "closed", java_out[-20:]

    read = {"java": [(int(r[1]), int(r[2]), r[3].encode()) for r in java_records()]}
    for m in members:
        read[m.kind] = m.records
    values = [v for recs in read.values() for _, _, v in recs]
    assert sorted(values) == sorted(b"late-%d" % i for i in range(600))    # each exactly once
    owners = {lib: {p for p, _, _ in recs} for lib, recs in read.items()}
    assert all(owners.values()), owners                     # every library read some
    libs = list(owners)
    for i, a in enumerate(libs):
        for b in libs[i + 1:]:
            assert not owners[a] & owners[b], owners       # and the libraries split them
    for lib, recs in read.items():   # from the offsets the first consumer committed, in order
        for q in owners[lib]:
            assert [o for p, o, _ in recs if p == q] == list(range(10, 110)), (lib, q)

    # what the three committed, read by a fourth library and by Java's own consumer
    committed = {int(line.split()[1]): int(line.split()[2]) for line in java_out
                 if line.startswith("committed ")}
    assert committed and set(committed.values()) == {110}
    kafka = pytest.importorskip("kafka")
    kc = kafka.KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        assert [kc.committed(kafka.TopicPartition(topic, q)) for q in range(parts)] == [110] * parts
    finally:
        kc.close()
