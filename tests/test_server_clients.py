"""Clients nobody here wrote, against the broker: librdkafka (confluent-kafka), kafka-python and
aiokafka each produce and consume record for record in every codec; what each produced is read
back by the others; Kafka's own reader validates every segment the broker wrote."""
from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire.testing import kafka_broker  # noqa: F401  (the fixture)

pytestmark = pytest.mark.one_backend

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
N = 60


def _expected(tag, codec):
    return [(b"%s-%s-%d" % (tag.encode(), codec.encode(), i),
             b"value-%d-" % i + b"x" * (i * 7 % 200)) for i in range(N)]


def _produce_confluent(bs, topic, codec, recs):
    ck = pytest.importorskip("confluent_kafka")
    p = ck.Producer({"bootstrap.servers": bs, "compression.type": codec, "acks": "all",
                     "linger.ms": 5, "enable.idempotence": False})
    for k, v in recs:
        p.produce(topic, key=k, value=v, partition=0)
    assert p.flush(20) == 0


def _produce_kafka_python(bs, topic, codec, recs):
    kafka = pytest.importorskip("kafka")
    extra = {"enable_idempotence": False} if "enable_idempotence" in kafka.KafkaProducer.DEFAULT_CONFIG else {}
    p = kafka.KafkaProducer(bootstrap_servers=bs, acks="all",
                            compression_type=None if codec == "none" else codec, linger_ms=5,
                            **extra)
    for k, v in recs:
        p.send(topic, key=k, value=v, partition=0)
    p.flush(20)
    p.close()


def _produce_aiokafka(bs, topic, codec, recs):
    aiokafka = pytest.importorskip("aiokafka")

    async def run():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=5,
                                      compression_type=None if codec == "none" else codec)
        await p.start()
        try:
            for k, v in recs:
                await p.send(topic, key=k, value=v, partition=0)
            await p.flush()
        finally:
            await p.stop()
    asyncio.run(run())


def _consume_confluent(bs, topic, n):
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "cc", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 30
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def _consume_kafka_python(bs, topic, n):
    kafka = pytest.importorskip("kafka")
    c = kafka.KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False,
                            auto_offset_reset="earliest", consumer_timeout_ms=20000)
    tp = kafka.TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    out = []
    for m in c:
        out.append((m.offset, m.key, m.value))
        if len(out) >= n:
            break
    c.close()
    return out


def _consume_aiokafka(bs, topic, n):
    aiokafka = pytest.importorskip("aiokafka")

    async def run():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False,
                                      auto_offset_reset="earliest")
        await c.start()
        out = []
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            deadline = time.time() + 30
            while len(out) < n and time.time() < deadline:
                got = await c.getmany(tp, timeout_ms=500)
                for m in got.get(tp, []):
                    out.append((m.offset, m.key, m.value))
        finally:
            await c.stop()
        return out
    return asyncio.run(run())


PRODUCERS = {"confluent": _produce_confluent, "kafka-python": _produce_kafka_python,
             "aiokafka": _produce_aiokafka}
CONSUMERS = {"confluent": _consume_confluent, "kafka-python": _consume_kafka_python,
             "aiokafka": _consume_aiokafka}


def test_every_client_every_codec(kafka_broker, java_runner):
    bs = kafka_broker.bootstrap_servers
    for name, produce in PRODUCERS.items():
        topic = f"from-{name}"
        kafka_broker.create_topic(topic, 1, {"segment.bytes": "20000"})
        expected = []
        for codec in CODECS:
            recs = _expected(name, codec)
            produce(bs, topic, codec, recs)
            expected += recs
        want = [(i, k, v) for i, (k, v) in enumerate(expected)]
        for cname, consume in CONSUMERS.items():
            got = consume(bs, topic, len(want))
            assert got == want, (name, cname, len(got), len(want))
    paths = [p.path for p in kafka_broker.partitions.partitions()
             if p.topic.name.startswith("from-")]
    kafka_broker.stop()                  # indexes trimmed, as Kafka leaves them at shutdown
    for path in paths:
        out = java_runner.run("LogFolderHelper", "read", path).stdout.decode()
        assert out.rstrip().endswith("OK"), out[-400:]
        assert out.count("\n") > len(CODECS)


def test_long_poll_woken_by_append(kafka_broker):
    ck = pytest.importorskip("confluent_kafka")
    from kafkawire.client import Client
    kafka_broker.create_topic("lp", 1)
    with Client(kafka_broker.bootstrap_servers) as cl:
        t0 = time.monotonic()
        res = cl.fetch("lp", 0, 0, max_wait_ms=300)
        assert time.monotonic() - t0 >= 0.25 and not res.records()
    p = ck.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 0})
    c = ck.Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "lp",
                     "fetch.wait.max.ms": 5000, "enable.auto.commit": False})
    c.assign([ck.TopicPartition("lp", 0, 0)])
    c.poll(0.5)                                   # the consumer is now waiting in a long poll
    t0 = time.monotonic()
    p.produce("lp", value=b"wake")
    p.flush(5)
    m = None
    while m is None and time.monotonic() - t0 < 5:
        m = c.poll(0.05)
    took = time.monotonic() - t0
    c.close()
    assert m is not None and m.value() == b"wake"
    assert took < 4.0                             # woken by the append, not by max_wait_ms (5 s)


def test_kcat_produces_and_consumes(kafka_broker, tmp_path):
    import shutil
    import subprocess
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    bs = kafka_broker.bootstrap_servers
    kafka_broker.create_topic("kc", 1)
    lines = [f"key{i}:value {i}" for i in range(200)]
    for codec in CODECS:
        p = subprocess.run([kcat, "-b", bs, "-P", "-t", "kc", "-p", "0", "-K:", "-z", codec],
                           input="\n".join(lines[:40]).encode() + b"\n", capture_output=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
    p = subprocess.run([kcat, "-b", bs, "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e",
                        "-f", "%o %k %s\\n"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    got = p.stdout.decode().splitlines()
    want = [f"{i} key{i % 40} value {i % 40}" for i in range(200)]
    assert got == want


def test_kafkawire_consumer_with_fetch_sessions(kafka_broker):
    import kafkawire
    ck = pytest.importorskip("confluent_kafka")
    kafka_broker.create_topic("sess", 3)
    p = ck.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 2})
    for i in range(600):
        p.produce("sess", value=b"%d" % i, partition=i % 3)
        if i == 300:
            p.flush(10)
    assert p.flush(10) == 0
    c = kafkawire.Consumer(kafka_broker.bootstrap_servers, auto_offset_reset="earliest")
    c.assign([("sess", q) for q in range(3)])
    got = []
    deadline = time.time() + 30
    while len(got) < 600 and time.time() < deadline:
        got += [r.value for r in c.poll(timeout_ms=200)]
    for i in range(600, 660):                     # more while the session is open
        p.produce("sess", value=b"%d" % i, partition=i % 3)
    p.flush(10)
    while len(got) < 660 and time.time() < deadline:
        got += [r.value for r in c.poll(timeout_ms=200)]
    assert len(kafka_broker.fetch_sessions.sessions) == 1    # the consumer fetches in a session
    c.close()
    assert sorted(int(v) for v in got) == list(range(660))
    assert not kafka_broker.fetch_sessions.sessions          # closed with the consumer
