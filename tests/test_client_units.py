"""Client pieces without a broker: record shapes, bootstrap parsing, the metadata cache."""
from __future__ import annotations

import pytest

from kafkawire import protocol as P
from kafkawire.client import ProducerRecord
from kafkawire.client.cluster import ClusterMetadata, parse_bootstrap
from kafkawire.client.results import FetchResult, as_producer_record, normalize_record
from kafkawire.records.builder import BatchBuilder

pytestmark = pytest.mark.one_backend


def test_record_shapes():
    assert normalize_record(b"v") == (b"v", None, (), None, None)
    assert normalize_record((b"k", b"v")) == (b"v", b"k", (), None, None)
    assert normalize_record(("k", "v")) == (b"v", b"k", (), None, None)
    assert normalize_record((None, None)) == (None, None, (), None, None)
    assert normalize_record("text") == (b"text", None, (), None, None)
    assert normalize_record(bytearray(b"ba")) == (b"ba", None, (), None, None)
    d = {"value": b"v", "key": b"k", "headers": [("h", "x"), ("n", None)], "timestamp": 5,
         "partition": 2}
    assert normalize_record(d) == (b"v", b"k", [("h", b"x"), ("n", None)], 5, 2)
    r = ProducerRecord(b"v", b"k", [("a", b"1")], 9, 1)
    assert normalize_record(r) == tuple(r)
    assert as_producer_record((b"k", b"v")) == ProducerRecord(b"v", b"k")
    with pytest.raises(TypeError, match="unknown record field"):
        normalize_record({"valu": b"x"})
    with pytest.raises(TypeError, match="key, value"):
        normalize_record((1, 2, 3))
    with pytest.raises(TypeError):
        normalize_record(3.5)


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b ,[::1]:5") == [("a", 1), ("b", 9092), ("::1", 5)]
    assert parse_bootstrap(["h:9093", ("x", 7)]) == [("h", 9093), ("x", 7)]
    with pytest.raises(ValueError):
        parse_bootstrap(" , ")


def _metadata(leader=1, error=0, topics=("t",)):
    return P.MetadataResponse(
        brokers=[{"node_id": 1, "host": "h1", "port": 1}, {"node_id": 2, "host": "h2", "port": 2}],
        controller_id=2, cluster_id="c",
        topics=[{"name": t, "error_code": error, "partitions": [
            {"partition_index": p, "leader_id": leader if p else -1, "replica_nodes": [1, 2],
             "isr_nodes": [1]} for p in range(3)]} for t in topics])


def test_metadata_cache_staleness():
    m = ClusterMetadata(max_age=300)
    assert m.needs_refresh()
    m.update(_metadata(), all_topics=True)
    assert not m.needs_refresh(["t"])
    assert m.needs_refresh(["other"])
    assert m.leader("t", 1) == 1 and m.leader("t", 0) is None and m.leader("x", 0) is None
    assert m.topics["t"].available_partitions() == [1, 2]
    assert m.controller_id == 2 and m.cluster_id == "c" and m.broker(2).host == "h2"
    m.mark_stale(["t"])
    assert m.needs_refresh(["t"])
    m.update(_metadata(leader=2))
    assert not m.needs_refresh(["t"]) and m.leader("t", 1) == 2
    m.mark_stale()
    assert m.needs_refresh([])
    m.update(_metadata(topics=("u",)))  # a partial refresh leaves other topics stale
    assert m.needs_refresh(["t"]) and not m.needs_refresh(["u"])
    m.update(_metadata(topics=("u",)), all_topics=True)
    assert "t" not in m.topics


def test_metadata_keeps_good_entry_over_error():
    m = ClusterMetadata()
    m.update(_metadata())
    m.update(_metadata(error=5))  # a transient LEADER_NOT_AVAILABLE keeps the old layout
    assert m.topics["t"].error_code == 0


def test_fetch_result_records_and_next_offset():
    b1 = BatchBuilder(base_offset=10)
    for i in range(3):
        b1.append(b"v%d" % i, timestamp=i)
    from kafkawire import iter_batches
    batches = list(iter_batches(b1.build()))
    res = FetchResult("t", 0, 11, 13, batches=batches)
    assert [r.offset for r in res.records()] == [11, 12]
    assert res.next_offset == 13
    assert FetchResult("t", 0, 5, 5).next_offset == 5


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_produce_batches_equal_the_batch_builders(codec):
    from kafkawire.client import _api
    plain = [(b"v%d" % i, None if i % 3 else b"k%d" % i, (), None, None) for i in range(50)]
    plain.append((None, b"tombstone", (), None, None))
    mixed = plain + [(b"h", None, [("a", b"1")], 1_700_000_000_123, None)]
    for records in (plain, mixed):
        b = BatchBuilder(magic=2, compression=codec)
        for value, key, headers, ts, _ in records:
            b.append(value, key, 1_700_000_000_000 if ts is None else ts, headers)
        assert _api.build_batch(records, codec, 1_700_000_000_000) == b.build()


def test_a_pooled_buffer_is_free_only_when_no_view_of_it_remains():
    import numpy
    import pyarrow

    from kafkawire.client import connection as CN
    buf = bytearray(b"x" * 1000)
    assert CN._unexported(buf) and len(buf) == 1000
    for make in (lambda: memoryview(buf)[5:10],
                 lambda: numpy.frombuffer(memoryview(buf)[8:], dtype=numpy.int64),
                 lambda: pyarrow.py_buffer(memoryview(buf)[100:200])):
        view = make()
        assert not CN._unexported(buf) and len(buf) == 1000
        del view
        assert CN._unexported(buf) and len(buf) == 1000


def test_large_response_frames_reuse_buffers_nothing_refers_to():
    import socket
    import struct
    import threading
    import time

    from kafkawire.client import connection as CN
    a, b = socket.socketpair()
    conn = CN.BrokerConnection("localhost", 1)
    conn._sock = a
    conn.frames = CN.FramePool()     # the process's shared pool may hold others' buffers
    pool = conn.frames.buffers
    try:
        size = CN._POOL_MIN + 1000

        def frame(fill):
            writer = threading.Thread(target=b.sendall,
                                      args=(struct.pack(">i", size) + bytes([fill]) * size,))
            writer.start()           # more than a socket buffer holds: written while read
            got = conn._read_frame(time.monotonic() + 30)
            writer.join()
            return got
        first = frame(1)
        assert len(first) == size and bytes(first[:2]) == b"\x01\x01"
        held = first[10:20]                 # a view into it: the buffer stays in use
        del first
        second = frame(2)
        assert held.obj is not second.obj and bytes(held) == b"\x01" * 10
        del held, second
        pooled = [id(buf) for buf in pool]     # ids: a reference would keep them in use
        assert len(pooled) == 2
        third = frame(3)                    # nothing refers to the pooled buffers: one reused
        assert id(third.obj) in pooled and len(pool) == 2
        assert bytes(third[-3:]) == b"\x03" * 3
        in_use = [third]
        for fill in range(4, 4 + CN._POOL_BUFFERS):    # more frames held than the pool keeps
            in_use.append(frame(fill))
        assert len(pool) == CN._POOL_BUFFERS
        assert all(bytes(f[:1]) == bytes([i + 3]) for i, f in enumerate(in_use))
        size += 100_000                              # larger than every pooled buffer
        del in_use[1:]
        bigger = frame(9)                            # free small ones make room for it
        assert len(pool) <= CN._POOL_BUFFERS and any(bigger.obj is b for b in pool)
        assert any(third.obj is b for b in pool)   # still in use: kept
        del bigger, third, in_use
        other = CN.BrokerConnection("localhost", 2)   # connections share the pool
        assert other.frames is CN._FRAMES and conn.frames is not CN._FRAMES
        small = (struct.pack(">i", 8) + b"12345678")
        b.sendall(small)
        assert type(conn._read_frame(time.monotonic() + 30)) is bytearray   # small: not pooled
    finally:
        a.close()
        b.close()


def test_threads_never_share_a_pooled_buffer():
    import threading

    from kafkawire.client import connection as CN
    pool = CN.FramePool()
    held: list = []
    lock = threading.Lock()
    clash = []

    def work():
        for _ in range(200):
            view = pool.take(CN._POOL_MIN)
            with lock:
                if any(v.obj is view.obj for v in held):
                    clash.append(view)
                held.append(view)
            with lock:
                held[:] = [v for v in held if v is not view]
            del view
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not clash and len(pool.buffers) <= CN._POOL_BUFFERS
