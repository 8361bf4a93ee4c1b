"""How the producer writes Produce requests: framed around its batches' buffers, never
over ``max_request_size``; and the column encoder behind ``send_batch``."""
from __future__ import annotations

import random

import pytest

from kafkawire import _kernels as K
from kafkawire import protocol as P
from kafkawire.client.bulk import _column
from kafkawire.client.producer import Producer
from kafkawire.client.sender import ProduceFrame, request_overhead
from fake_brokers import FakeCluster, IdempotentLog

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")


@pytest.mark.one_backend
@pytest.mark.parametrize("version", range(3, 12))
def test_frame_is_what_the_generic_encoder_writes(version):
    rnd = random.Random(version)
    for trial in range(20):
        txn = rnd.choice([None, "", "txn-\u00e9" * rnd.randrange(0, 40)])
        client_id = rnd.choice([None, "", "client-1", "c" * 300])
        topics = {}
        for t in range(rnd.randrange(1, 4)):
            name = "topic-" + "t" * rnd.randrange(0, 200) + str(t)
            topics[name] = [(rnd.randrange(0, 100), bytes(61),
                             bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300))))
                            for _ in range(rnd.randrange(1, 150 if trial == 0 else 4))]
        frame = ProduceFrame(version, 77, client_id, txn, -1, 30000)
        for name, parts in topics.items():
            for index, head, records in parts:
                expected = frame.size_with(name, index, len(head) + len(records))
                frame.add(name, index, head, memoryview(records))
                assert frame.size == expected
        written = b"".join(bytes(x) for x in frame.parts())
        req = P.ProduceRequest(transactional_id=txn, acks=-1, timeout_ms=30000, topic_data=[
            {"name": n, "partition_data": [{"index": i, "records": h + r} for i, h, r in ps]}
            for n, ps in topics.items()])
        assert written == P.encode_request(req, version, 77, client_id)
        assert len(written) == frame.size


def test_encode_columns_into_matches_the_records_encoder():
    rnd = random.Random(5)
    for trial in range(150):
        n = rnd.randrange(0, 40)
        values = [None if rnd.random() < 0.2 else
                  bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 200))) for _ in range(n)]
        keys = [None if rnd.random() < 0.3 else
                bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 20))) for _ in range(n)]
        vtype = pa.large_binary() if rnd.random() < 0.3 else pa.binary()
        skip = rnd.randrange(0, max(n, 1))
        va, ka = pa.array(values, vtype).slice(skip), pa.array(keys, pa.binary()).slice(skip)
        m = len(va)
        ts = np.array([rnd.randrange(-2**40, 2**40) for _ in range(m)], dtype=np.int64) \
            if rnd.random() < 0.7 else None
        base = int(ts[0]) if ts is not None and m else 0
        kc, vc = _column(ka, pa), _column(va, pa)
        a, b = sorted([rnd.randrange(0, m + 1), rnd.randrange(0, m + 1)])
        rows = range(a, b)
        want = K.encode_records_v2([i - a for i in rows],
                                   [int(ts[i]) - base if ts is not None else 0 for i in rows],
                                   ka.to_pylist()[a:b], va.to_pylist()[a:b], [None] * (b - a))
        out = bytearray(10 + len(want) + 3)
        end = K.encode_columns_into(out, 10, a, b, ts, base, kc, vc)
        assert bytes(out[10:end]) == want
        if want:
            with pytest.raises(ValueError, match="fit"):
                K.encode_columns_into(bytearray(9 + len(want)), 10 if len(want) > 1 else 9,
                                      a, b, ts, base, kc, vc)


def test_encode_columns_into_refuses_bad_input():
    va = pa.array([b"a", b"bc"])
    vc = _column(va, pa)
    with pytest.raises(ValueError):
        K.encode_columns_into(bytearray(100), 0, 0, 3, None, 0, None, vc)   # past the offsets
    with pytest.raises(ValueError):
        K.encode_columns_into(bytearray(100), 101, 0, 2, None, 0, None, vc)
    with pytest.raises((TypeError, BufferError)):
        K.encode_columns_into(b"\0" * 100, 0, 0, 2, None, 0, None, vc)     # read-only
    bad = (None, np.array([0, 5, 1], dtype=np.int32).tobytes(), b"abcdef", 4, 0)
    with pytest.raises(ValueError, match="offsets"):
        K.encode_columns_into(bytearray(100), 0, 0, 2, None, 0, None, bad)
    ts = np.array([-(2**63), 2**62], dtype=np.int64)
    with pytest.raises(ValueError, match="range"):
        K.encode_columns_into(bytearray(100), 0, 0, 2, ts, 2**62, None, vc)


@pytest.fixture
def fake():
    cluster = FakeCluster(1)
    yield cluster
    cluster.close()


@pytest.mark.one_backend
def test_requests_never_exceed_max_request_size(fake):
    broker = IdempotentLog(fake)
    sizes = []
    answer = broker.produce

    def produce(node, req):
        sizes.append(len(P.encode_request(req.message, req.api_version, req.correlation_id,
                                          req.client_id)))
        return answer(node, req)
    fake.handlers[0] = produce
    limit = 6000
    values = [(b"%05d-" % i) * (1 + i % 37) for i in range(3000)]
    # batch_size over the limit: batches are capped so that a request holds one
    with Producer(fake.bootstrap, max_request_size=limit, batch_size=1 << 20, linger_ms=50) as p:
        for v in values[:1500]:
            p.send("t", v, partition=0)
        p.send_batch("t", pa.table({"value": pa.array(values[1500:], pa.binary()),
                                    "partition": pa.array([0] * 1500, pa.int32())})).result(30)
        assert p.flush(30) == 0
    assert sizes and max(sizes) <= limit
    assert broker.values("t", 0) == values     # in order, once each


@pytest.mark.one_backend
def test_a_record_that_cannot_fit_a_request_is_refused(fake):
    IdempotentLog(fake)
    limit = 2000
    room = limit - request_overhead("kafkawire", None) - 61
    with Producer(fake.bootstrap, max_request_size=limit) as p:
        assert p.send("t", b"x" * (room - 12), partition=0).result(30).offset == 0
        with pytest.raises(Exception, match="max_request_size"):
            p.send("t", b"x" * (room - 11), partition=0)
