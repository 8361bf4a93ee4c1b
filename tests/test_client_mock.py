"""The client against a real peer: librdkafka's mock cluster (via confluent-kafka) on loopback.

kafkawire creates topics (auto-creation: the mock has no CreateTopics),
produces with every codec, fetches, lists offsets and commits offsets; a
confluent-kafka consumer reads what kafkawire produced and kafkawire fetches
what confluent-kafka produced, record for record.
"""
from __future__ import annotations

import time

import pytest

import kafkawire
from kafkawire.client import Client, RequestTimeoutError, partition_for_key
from kafkawire.compression import CODECS
from kafkawire.errors import UnsupportedVersionError

ck = pytest.importorskip("confluent_kafka")

from mock_cluster import unique_name  # noqa: E402

@pytest.fixture
def client(mock_cluster):
    with Client(mock_cluster[0], client_id="kafkawire-test", request_timeout_ms=10_000,
                allow_auto_create_topics=True) as c:
        yield c


def _records(codec: str, n: int = 40):
    out = []
    for i in range(n):
        headers = [("i", str(i).encode()), ("codec", codec.encode())] if i % 3 else []
        if i % 7 == 0:
            headers.append(("null", None))
        out.append({"key": None if i % 5 == 0 else f"key-{i}".encode(),
                    "value": None if i % 11 == 4 else (f"value-{codec}-{i}-".encode() * (i % 9 + 1)),
                    "headers": headers, "timestamp": 1_700_000_000_000 + i * 1000})
    return out


def _fetch_all(c: Client, topic: str, partition: int, end: int):
    out, offset = [], 0
    while offset < end:
        res = c.fetch(topic, partition, offset, max_wait_ms=100)
        recs = res.records()
        if not res.batches:
            break
        out.extend(recs)
        offset = res.next_offset
    return out


def _as_tuple(r):
    return (r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp)


def _want(rec):
    return (rec["key"], rec["value"], list(rec["headers"]), rec["timestamp"])


@pytest.mark.one_backend
def test_negotiated_versions(client):
    meta = client.metadata()
    assert len(meta.brokers) == 3
    used = []
    for node in meta.brokers:
        conn = client._node(node)
        for api in (0, 1, 2, 3, 8, 9, 10):
            lo, hi = conn.api_versions[api]
            ours = kafkawire.protocol.request_class(api).VERSIONS
            assert client._version(conn, api) == min(hi, ours[1])
        used.append(conn.api_versions_version)
    # The mock speaks ApiVersions up to v2 and refuses v4 with an answer that is not in the
    # v0 layout: the first connection fell back to v0 (the bootstrap one, kept for its broker);
    # the others started at the highest version both speak.
    common = min(conn.api_versions[18][1], max(kafkawire.protocol.ApiVersionsRequest.VERSIONS))
    assert sorted(used) in ([0, common, common], [common] * 3)


@pytest.mark.one_backend
def test_metadata_and_topic_creation(client):
    topic = unique_name("meta")
    meta = client.metadata([topic], allow_auto_topic_creation=True)
    info = meta.topics[topic]
    assert info.error_code == 0 and info.num_partitions == 4
    assert {p.leader for p in info.partitions.values()} <= set(meta.brokers)
    assert info.topic_id is not None
    assert topic in client.metadata().topics


@pytest.mark.one_backend
def test_create_topics_is_not_offered_by_the_mock(client):
    with pytest.raises(UnsupportedVersionError, match="CreateTopics"):
        client.create_topics(unique_name("ct"))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_fetch_round_trip(client, codec):
    topic = unique_name(f"rt-{codec}")
    recs = _records(codec)
    results = client.produce(topic, recs, partition=2, compression=codec, acks="all")
    assert [(r.partition, r.base_offset, r.record_count) for r in results] == [(2, 0, len(recs))]
    got = _fetch_all(client, topic, 2, len(recs))
    assert [r.offset for r in got] == list(range(len(recs)))
    assert [_as_tuple(r) for r in got] == [_want(x) for x in recs]
    res = client.fetch(topic, 2, 0, max_wait_ms=10)
    assert res.batches[0].compression == codec and res.high_watermark == len(recs)


@pytest.mark.one_backend
def test_confluent_consumer_reads_what_kafkawire_produced(client, mock_cluster):
    topic = unique_name("to-ck")
    expected = {}
    for codec in CODECS:
        recs = _records(codec, 25)
        for r in client.produce(topic, recs, compression=codec):
            pass
        for rec in recs:
            part = partition_for_key(rec["key"], 4) if rec["key"] is not None else None
            expected.setdefault(part, []).append(_want(rec))
    consumer = ck.Consumer({"bootstrap.servers": mock_cluster[0], "group.id": "ck-reader",
                            "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(4)])
        got = {}
        deadline = time.time() + 30
        total = sum(len(v) for v in expected.values())
        while sum(len(v) for v in got.values()) < total and time.time() < deadline:
            m = consumer.poll(0.2)
            if m is None or m.error():
                continue
            assert m.timestamp()[0] == ck.TIMESTAMP_CREATE_TIME
            got.setdefault(m.partition(), []).append(
                (m.key(), m.value(), [(k, v) for k, v in (m.headers() or [])], m.timestamp()[1]))
    finally:
        consumer.close()
    keyed = sorted(x for p, v in expected.items() if p is not None for x in v)
    assert sum(len(v) for v in got.values()) == sum(len(v) for v in expected.values())
    # Keyed records sit where murmur2 puts them; every record arrives intact.
    for p, items in expected.items():
        if p is not None:
            for item in items:
                assert item in got[p]
    flat_got = sorted((x for v in got.values() for x in v), key=repr)
    flat_want = sorted((x for v in expected.values() for x in v), key=repr)
    assert flat_got == flat_want
    assert keyed


@pytest.mark.parametrize("codec", CODECS)
def test_kafkawire_fetches_what_confluent_produced(client, mock_cluster, codec):
    topic = unique_name(f"from-ck-{codec}")
    producer = ck.Producer({"bootstrap.servers": mock_cluster[0], "compression.type": codec,
                            "linger.ms": 20, "partitioner": "murmur2", "log_level": 0})
    sent = []
    # Delivery reports carry no headers (and the mock reports a fake log-append time), so
    # the expected headers and timestamps come from what was handed to the producer.
    given = {}

    def report(err, msg):
        assert err is None, err
        headers, ts = given[msg.value()]
        sent.append((msg.partition(), msg.offset(), msg.key(), msg.value(), headers, ts))

    for i in range(60):
        key = f"k{i}".encode() if i % 4 else None
        headers = [("n", str(i).encode())] if i % 2 else None
        value = f"ck-{codec}-{i}".encode() * (i % 5 + 1)
        given[value] = (headers or [], 1_600_000_000_000 + i)
        producer.produce(topic, value=value, key=key, headers=headers,
                         timestamp=1_600_000_000_000 + i, on_delivery=report)
    assert producer.flush(30) == 0
    assert len(sent) == 60
    for part, _, key, *_ in sent:
        if key is not None:  # librdkafka's murmur2 partitioner agrees with ours
            assert part == partition_for_key(key, 4)
    got = []
    for p in range(4):
        n = client.list_offsets(topic, p, "latest").offset
        got += [(p, r.offset, r.key, r.value, _as_tuple(r)[2], r.timestamp)
                for r in _fetch_all(client, topic, p, n)]
    assert sorted(got, key=repr) == sorted(sent, key=repr)


@pytest.mark.one_backend
def test_keyed_produce_lands_where_librdkafka_would(client):
    topic = unique_name("keys")
    keys = [f"user-{i}".encode() for i in range(50)]
    res = client.produce(topic, [(k, b"v") for k in keys])
    counts = {r.partition: r.record_count for r in res}
    want = {}
    for k in keys:
        p = partition_for_key(k, 4)
        want[p] = want.get(p, 0) + 1
    assert counts == want


@pytest.mark.one_backend
def test_keyless_records_rotate_partitions(client):
    topic = unique_name("sticky")
    parts = [client.produce(topic, [b"a", b"b"])[0].partition for _ in range(8)]
    assert len(set(parts)) == 4  # each call sticks to one partition, calls rotate


@pytest.mark.one_backend
def test_list_offsets(client):
    topic = unique_name("lo")
    assert client.list_offsets(topic, 1, "earliest").offset == 0
    assert client.list_offsets(topic, 1, "latest").offset == 0
    client.produce(topic, [b"x"] * 7, partition=1)
    client.produce(topic, [b"y"] * 3, partition=1, compression="zstd")
    assert client.list_offsets(topic, 1, "earliest").offset == 0
    assert client.list_offsets(topic, 1, "latest").offset == 10
    with pytest.raises(ValueError):
        client.list_offsets(topic, 1, "newest")


@pytest.mark.one_backend
@pytest.mark.parametrize("acks", [0, 1, -1, "all"])
def test_acks(client, acks):
    topic = unique_name("acks")
    res = client.produce(topic, [b"a", b"b", b"c"], partition=0, acks=acks)
    if acks == 0:
        assert res[0].base_offset == -1
        deadline = time.time() + 10
        while client.list_offsets(topic, 0, "latest").offset < 3 and time.time() < deadline:
            time.sleep(0.05)
    else:
        assert res[0].base_offset == 0
    assert [r.value for r in _fetch_all(client, topic, 0, 3)] == [b"a", b"b", b"c"]


@pytest.mark.one_backend
def test_commit_and_fetch_offsets_seen_by_confluent(client, mock_cluster):
    topic = unique_name("commit")
    client.produce(topic, [b"x"] * 5, partition=0)
    client.produce(topic, [b"x"] * 5, partition=3)
    coord = client.find_coordinator("kw-group")
    assert coord.node_id in client.metadata().brokers
    client.commit_offsets("kw-group", {(topic, 0): 3, (topic, 3): (5, "done")})
    got = client.fetch_offsets("kw-group", [(topic, 0), (topic, 3), (topic, 1)])
    assert got[(topic, 0)].offset == 3
    assert (got[(topic, 3)].offset, got[(topic, 3)].metadata) == (5, "done")
    assert got[(topic, 1)].offset == -1
    consumer = ck.Consumer({"bootstrap.servers": mock_cluster[0], "group.id": "kw-group",
                            "log_level": 0})
    try:
        seen = consumer.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 3)],
                                  timeout=10)
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset) for tp in seen] == [(0, 3), (3, 5)]


@pytest.mark.one_backend
def test_fetch_long_poll_and_timeout(client):
    topic = unique_name("poll")
    client.metadata([topic])
    t0 = time.monotonic()
    res = client.fetch(topic, 0, 0, max_wait_ms=400, min_bytes=1)
    waited = time.monotonic() - t0
    assert res.batches == [] and res.high_watermark == 0
    assert 0.3 <= waited < 5
    with pytest.raises(RequestTimeoutError):
        client.fetch(topic, 0, 0, max_wait_ms=3000, timeout_ms=300)
    client.produce(topic, [b"after"], partition=0)  # the client recovers
    assert client.fetch(topic, 0, 0, max_wait_ms=10).records()[0].value == b"after"


@pytest.mark.one_backend
def test_recovers_from_socket_error(client):
    topic = unique_name("sock")
    client.produce(topic, [b"1"], partition=0)
    leader = client.cluster.leader(topic, 0)
    client._node(leader)._sock.close()  # the connection dies under the client
    client.produce(topic, [b"2"], partition=0)
    assert [r.value for r in _fetch_all(client, topic, 0, 2)] == [b"1", b"2"]


@pytest.mark.one_backend
def test_pipelining_on_one_connection(client):
    client.metadata()
    from kafkawire import protocol as P
    node = next(iter(client.cluster.brokers))
    pend = [client.send(P.MetadataRequest(topics=[]), node_id=node) for _ in range(30)]
    assert pend[0].conn.in_flight == 30
    assert all(p.result().controller_id == pend[0].result().controller_id for p in pend[::-1])


@pytest.mark.one_backend
def test_large_produce_in_several_batches(mock_cluster):
    topic = unique_name("big")
    recs = [(b"k%d" % i, b"v%06d" % i * 20) for i in range(2000)]
    with Client(mock_cluster[0], allow_auto_create_topics=True, max_batch_bytes=16_384) as c:
        res = c.produce(topic, recs, partition=3, compression="lz4")
        assert (res[0].base_offset, res[0].record_count) == (0, 2000)
        got = _fetch_all(c, topic, 3, 2000)
    assert [(r.key, r.value) for r in got] == recs
