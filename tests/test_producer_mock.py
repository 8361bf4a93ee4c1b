"""The producer against a real peer: librdkafka's mock cluster, read back by confluent-kafka.

What kafkawire's idempotent producer writes — every codec, keys, headers,
tombstones, explicit timestamps — a confluent-kafka consumer reads record
for record, in order per partition, with keyed records where Kafka's default
partitioner puts them.
"""
from __future__ import annotations

import time

import pytest

from kafkawire.client import partition_for_key
from kafkawire.client.producer import Producer
from kafkawire.compression import CODECS
from test_protocol_client_mock import _topic, mock_cluster  # noqa: F401 (a fixture)

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.one_backend

@pytest.fixture(scope="module")
def bootstrap(mock_cluster):
    return mock_cluster[0]


def consume_all(bootstrap: str, topic: str, n: int, timeout: float = 30.0, **extra):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "log_level": 0, **extra})
    c.subscribe([topic])
    out = []
    end = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < end:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    out.append(m)
    finally:
        c.close()
    return out


def _records(codec: str, n: int = 300):
    out = []
    for i in range(n):
        headers = [("i", str(i).encode()), ("codec", codec.encode())] if i % 3 else None
        out.append({"key": None if i % 5 == 0 else f"key-{i % 17}".encode(),
                    "value": None if i % 11 == 4 else f"value-{codec}-{i}-".encode() * (i % 9 + 1),
                    "headers": headers, "timestamp": 1_700_000_000_000 + i})
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_consumer_reads_what_kafkawire_produced(bootstrap, codec):
    topic = _topic(f"p-{codec}")
    recs = _records(codec)
    with Producer(bootstrap, compression_type=codec, linger_ms=2, batch_size=2000) as p:
        futures = [p.send(topic, r["value"], key=r["key"], headers=r["headers"],
                          timestamp=r["timestamp"]) for r in recs]
        assert p.flush(30) == 0
        n_parts = len(p.partitions_for(topic))
    mds = [f.result() for f in futures]
    for r, md in zip(recs, mds):
        if r["key"] is not None:
            assert md.partition == partition_for_key(r["key"], n_parts)
    got = consume_all(bootstrap, topic, len(recs))
    assert len(got) == len(recs)
    by_pos = {(m.partition(), m.offset()): m for m in got}
    for r, md in zip(recs, mds):
        m = by_pos[(md.partition, md.offset)]
        assert m.key() == r["key"] and m.value() == r["value"]
        assert (m.headers() or None) == (r["headers"] and [(k, v) for k, v in r["headers"]])
        assert m.timestamp() == (ck.TIMESTAMP_CREATE_TIME, r["timestamp"])
    # Per partition: offsets dense and in send order.
    for part in {md.partition for md in mds}:
        offs = [md.offset for md in mds if md.partition == part]
        assert offs == list(range(len(offs)))


def test_idempotent_batches_carry_producer_id_and_sequences(bootstrap):
    from kafkawire.client import Client
    topic = _topic("idem")
    with Producer(bootstrap, linger_ms=1, batch_size=500) as p:
        for i in range(200):
            p.send(topic, b"%d" % i, partition=0)
        assert p.flush(30) == 0
    batches, values, offset = [], [], 0
    with Client(bootstrap) as c:
        while offset < 200:
            res = c.fetch(topic, 0, offset)
            batches += res.batches
            values += [r.value for r in res.records()]
            offset = res.next_offset
    assert len(batches) > 3
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    seq = 0
    for b in batches:
        assert b.base_sequence == seq and b.producer_epoch == 0
        seq += b.last_offset - b.base_offset + 1
    assert values == [b"%d" % i for i in range(200)]
