"""kafkawire's clients with Kafka 3.9.1's own KafkaProducer and KafkaConsumer.

The Java side is ``tests/java/ClientInterop.java`` (compiled at test time
against the kafka-clients jar).  On librdkafka's mock cluster (three brokers):
what Java's idempotent producer writes with each codec, kafkawire's consumer
reads record for record; what kafkawire's idempotent producer writes with each
codec and headers, Java's consumer reads record for record.  Java reaches the
mock through ``mock_java_shim`` (the mock's ApiVersions stops at v2 and its
refusal of Java's v4 reads as a twenty-minute throttle; the shim says what it
changes: ApiVersions and broker addresses, nothing else).

A Java consumer and a kafkawire consumer in one group split the partitions and
read every record exactly once, also when the Java member leaves: on the
scripted group broker of ``test_consumer_fake``, because librdkafka's mock
crashes (SIGSEGV in its SyncGroup handler, ``rd_kafka_mock_cgrp_classic_member_find``)
when Java's consumer joins a group there.
"""
from __future__ import annotations

import subprocess
import threading
import time
from typing import Dict, List, Optional, Tuple

import pytest

import kafkawire

from mock_java_shim import MockShim
from fake_brokers import FakeGroupCluster, Member, wait_for
from mock_cluster import unique_name

pytestmark = pytest.mark.one_backend

TS0 = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def client(mock):
    with kafkawire.Client(mock, allow_auto_create_topics=True) as c:
        yield c


@pytest.fixture(scope="module")
def java_bootstrap(mock):
    shim = MockShim(mock)
    yield shim.bootstrap
    shim.close()


def _unhex(s: str) -> Optional[bytes]:
    return None if s == "-" else bytes.fromhex(s[1:])


def _parse(line: str) -> Tuple:
    """An "R" line: (topic, partition, offset, key, value, timestamp, headers)."""
    _, topic, part, off, key, value, ts, hs = line.split(" ")
    headers = () if hs == "-" else tuple(
        (h.split("=", 1)[0], _unhex(h.split("=", 1)[1])) for h in hs.split(","))
    return topic, int(part), int(off), _unhex(key), _unhex(value), int(ts), headers


def _java(java_runner, *args, timeout=180) -> List[str]:
    return java_runner.run("ClientInterop", *args, timeout=timeout).stdout.decode().splitlines()


def test_java_producer_kafkawire_consumer(mock, client, java_runner,
                                          java_bootstrap):
    n = 120
    topics = {codec: unique_name(f"j2k-{codec}") for codec in CODECS}
    for t in topics.values():
        client.metadata([t], allow_auto_topic_creation=True)
    lines = _java(java_runner, "produce", java_bootstrap, n, *(f"{c}:{t}" for c, t in topics.items()))
    written = {}
    for line in lines:
        if line.startswith("M "):
            _, topic, part, off = line.split()
            written.setdefault(topic, []).append((int(part), int(off)))
    assert {t: len(v) for t, v in written.items()} == {t: n for t in topics.values()}
    with kafkawire.Consumer(mock, auto_offset_reset="earliest") as c:
        c.assign([(t, p) for t in topics.values() for p in range(4)])
        got = []
        end = time.monotonic() + 30
        while len(got) < n * len(topics) and time.monotonic() < end:
            got += c.poll(200)
        assert c.poll(300) == []
    assert len(got) == n * len(topics)
    by_topic: Dict[str, list] = {}
    for r in got:
        by_topic.setdefault(r.topic, []).append(r)
    for codec, topic in topics.items():
        recs = {(r.partition, r.offset): r for r in by_topic[topic]}
        for i, where in enumerate(written[topic]):
            r = recs[where]
            assert where[0] == i % 4
            assert (r.key, r.value, r.headers) == (f"k{i}".encode(), f"v{i}".encode(),
                                                    (("h", str(i).encode()),)), codec
            assert r.timestamp_type == "CreateTime" and r.timestamp > 0


def test_kafkawire_producer_java_consumer(mock, client, java_runner,
                                          java_bootstrap):
    n = 120
    topics = {codec: unique_name(f"k2j-{codec}") for codec in CODECS}
    sent = {}
    for codec, topic in topics.items():
        client.metadata([topic], allow_auto_topic_creation=True)
        with kafkawire.Producer(mock, compression_type=codec, linger_ms=5) as p:
            assert p.config.enable_idempotence
            futures = [p.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 4,
                              headers=[("h", str(i).encode()), ("codec", codec.encode()),
                                       ("none", None)], timestamp=TS0 + i)
                       for i in range(n)]
            assert p.flush(30) == 0
        for i, f in enumerate(futures):
            md = f.result()
            sent[(topic, md.partition, md.offset)] = (f"k{i}".encode(), f"v{i}".encode(),
                                                      TS0 + i, i)
    lines = _java(java_runner, "consume", java_bootstrap, n * len(topics), *topics.values())
    got = [_parse(line) for line in lines if line.startswith("R ")]
    assert len(got) == n * len(topics)
    for topic, part, off, key, value, ts, headers in got:
        k, v, t, i = sent.pop((topic, part, off))
        codec = next(c for c, name in topics.items() if name == topic)
        assert (key, value, ts) == (k, v, t)
        assert headers == (("h", str(i).encode()), ("codec", codec.encode()), ("none", None))
    assert not sent


class _JavaMember:
    """Java's KafkaConsumer in a group, in its own JVM; its output read on a thread."""

    def __init__(self, java_runner, bootstrap: str, group: str, topic: str, strategy: str):
        java_runner.compile("ClientInterop")
        self.proc = subprocess.Popen(
            ["java", "-cp", java_runner.classpath, "ClientInterop", "member", bootstrap, group,
             topic, strategy], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.records: List[Tuple] = []
        self.owned: set = set()
        self.closed = False
        self.lines: List[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if line.startswith("R "):
                self.records.append(_parse(line))
            elif line.startswith("A "):
                self.owned |= set() if line == "A -" else {int(p) for p in line[2:].split(",")}
            elif line.startswith("V "):
                self.owned -= set() if line == "V -" else {int(p) for p in line[2:].split(",")}
            elif line == "CLOSED":
                self.closed = True

    def stop(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(10)

    def error(self) -> str:
        return self.proc.stderr.read()[-3000:] if self.proc.stderr is not None else ""


def test_java_and_kafkawire_consumers_share_a_group(java_runner):
    """On a scripted broker (librdkafka's mock crashes when Java's consumer joins its group:
    SIGSEGV in its SyncGroup handler, rd_kafka_mock_cgrp_classic_member_find)."""
    cluster = FakeGroupCluster()
    kw = Member(cluster, "kw")
    java = None
    try:
        for p in range(4):
            cluster.append(p, [f"{p}-{i}".encode() for i in range(30)])
        kw.start()
        java = _JavaMember(java_runner, cluster.bootstrap, "g", "t", "range")

        def split() -> bool:
            mine = {tp.partition for tp in kw.c.assignment()}
            return bool(mine) and bool(java.owned) and not (mine & java.owned) and \
                mine | java.owned == set(range(4))

        assert wait_for(split, 60), (kw.c.assignment(), java.owned, kw.error, java.lines[-5:])
        want = {(p, i) for p in range(4) for i in range(30)}
        mine = lambda: [(tp.partition, o) for _, tp, o in kw.deliveries]  # noqa: E731
        theirs = lambda: [(r[1], r[2]) for r in java.records]  # noqa: E731
        assert wait_for(lambda: len(mine()) + len(theirs()) >= len(want), 30)
        for p in range(4):
            cluster.append(p, [f"{p}-{i}".encode() for i in range(30, 40)])
        want |= {(p, i) for p in range(4) for i in range(30, 40)}
        assert wait_for(lambda: len(mine()) + len(theirs()) >= len(want), 30)
        time.sleep(0.5)   # anything read twice would show now
        assert mine() and theirs()
        assert sorted(mine() + theirs()) == sorted(want), "a record was lost or read twice"
        # The Java member leaves: kafkawire's takes every partition and reads what follows.
        java.stop()
        assert java.closed, java.error()
        assert wait_for(lambda: len(kw.c.assignment()) == 4, 30), (kw.c.assignment(), kw.error)
        for p in range(4):
            cluster.append(p, [f"{p}-{i}".encode() for i in range(40, 45)])
        want |= {(p, i) for p in range(4) for i in range(40, 45)}
        assert wait_for(lambda: len(mine()) + len(theirs()) >= len(want), 30)
        assert sorted(mine() + theirs()) == sorted(want)
        assert kw.error is None
    finally:
        if java is not None:
            java.stop()
        kw.stop.set()
        kw.join(15)
        cluster.close()
