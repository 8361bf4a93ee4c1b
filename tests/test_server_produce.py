"""Produce as Kafka validates it: error codes for damaged and oversized batches, LogAppendTime,
and the idempotent producer state (duplicates, sequence and epoch checks, .snapshot files)."""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from kafkawire import Log
from kafkawire.log.files import read_producer_snapshot
from kafkawire.protocol import (FetchRequest, ProduceRequest, decode_response, encode_request)
from kafkawire.records import BatchBuilder, RecordBatch, iter_batches
from kafkawire.server.codes import (CORRUPT_MESSAGE, DUPLICATE_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
                                    INVALID_RECORD, MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    UNKNOWN_TOPIC_OR_PARTITION)
from kafkawire.testing import kafka_broker, running_broker  # noqa: F401  (the fixture)

pytestmark = pytest.mark.one_backend


class Conn:
    def __init__(self, broker):
        self.sock = socket.create_connection(broker.address)
        self.sock.settimeout(10)
        self.corr = 0

    def call(self, msg, version):
        self.corr += 1
        self.sock.sendall(encode_request(msg, version, self.corr, "t"))
        data = b""
        while len(data) < 4 or len(data) - 4 < struct.unpack(">i", data[:4])[0]:
            chunk = self.sock.recv(1 << 20)
            assert chunk, "connection closed"
            data += chunk
        return decode_response(type(msg).API_KEY, version, data).message

    def produce(self, topic, data, partition=0, acks=-1):
        resp = self.call(ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
            dict(name=topic, partition_data=[dict(index=partition, records=data)])]), 9)
        return resp.responses[0].partition_responses[0]


def _batch(n=3, **kw):
    b = BatchBuilder(2, kw.pop("compression", "none"), **kw)
    for i in range(n):
        b.append(b"v%d" % i, key=b"k", timestamp=1_700_000_000_000 + i)
    return b.build()


def test_validation_error_codes(kafka_broker):
    kafka_broker.create_topic("v", 1, {"max.message.bytes": "2000"})
    c = Conn(kafka_broker)
    good = _batch()
    assert c.produce("v", good).error_code == 0
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    assert c.produce("v", bytes(bad_crc)).error_code == CORRUPT_MESSAGE
    assert c.produce("v", good[:-3]).error_code == CORRUPT_MESSAGE
    assert c.produce("v", good + good).error_code == INVALID_RECORD      # two batches
    legacy = BatchBuilder(1, "none")
    legacy.append(b"x", timestamp=1)
    assert c.produce("v", legacy.build()).error_code == INVALID_RECORD   # magic 1
    big = BatchBuilder(2, "none")
    big.append(os.urandom(3000))
    assert c.produce("v", big.build()).error_code == MESSAGE_TOO_LARGE
    assert c.produce("nope", good).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert c.produce("v", good, partition=7).error_code == UNKNOWN_TOPIC_OR_PARTITION
    with Log.open(kafka_broker.partitions.partition("v", 0).path) as log:
        assert log.next_offset == 3 and log.verify().ok


def test_log_append_time(kafka_broker):
    kafka_broker.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    c = Conn(kafka_broker)
    r = c.produce("lat", _batch(compression="lz4"))
    assert r.error_code == 0 and r.log_append_time_ms > 1_700_000_000_000
    fetched = c.call(FetchRequest(max_wait_ms=0, min_bytes=0, isolation_level=0, topics=[
        dict(topic="lat", partitions=[dict(partition=0, fetch_offset=0,
                                           partition_max_bytes=1 << 20)])]), 11)
    records = fetched.responses[0].partitions[0].records
    batch = RecordBatch.from_buffer(bytes(records))
    batch.validate()
    assert batch.timestamp_type == "LogAppendTime"
    assert [r.timestamp for r in batch] == [r.log_append_time_ms] * 3


def test_idempotent_producer_state(tmp_path):
    d = str(tmp_path / "logs")
    with running_broker(d) as b:
        b.create_topic("idem", 1)
        c = Conn(b)
        pid = 4242

        def send(seq, n=3, epoch=0):
            return c.produce("idem", _batch(n, producer_id=pid, producer_epoch=epoch,
                                            base_sequence=seq))
        assert send(0).base_offset == 0
        assert send(3).base_offset == 3
        again = send(0)                                   # a retry of a cached batch
        assert again.error_code == 0 and again.base_offset == 0
        assert send(3).base_offset == 3
        assert send(9).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER   # a gap
        assert send(6).base_offset == 6
        assert send(0, epoch=1).base_offset == 9          # a bumped epoch restarts at 0
        assert send(3, epoch=0).error_code == INVALID_PRODUCER_EPOCH
        assert send(5, epoch=2).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        other = c.produce("idem", _batch(3, producer_id=7, producer_epoch=0, base_sequence=5))
        assert other.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER      # unknown producer, seq > 0
        assert DUPLICATE_SEQUENCE_NUMBER != other.error_code
    snaps = [f for f in os.listdir(os.path.join(d, "idem-0")) if f.endswith(".snapshot")]
    assert snaps == ["00000000000000000012.snapshot"]
    (entry,) = read_producer_snapshot(os.path.join(d, "idem-0", snaps[0]))
    assert (entry.producer_id, entry.producer_epoch, entry.last_sequence, entry.last_offset) == (
        pid, 1, 2, 11)
    with running_broker(d) as b:                          # state survives a restart
        c = Conn(b)
        assert c.produce("idem", _batch(3, producer_id=pid, producer_epoch=1,
                                        base_sequence=0)).base_offset == 9
        assert c.produce("idem", _batch(3, producer_id=pid, producer_epoch=1,
                                        base_sequence=3)).base_offset == 12


def test_snapshot_at_roll_and_rebuild_from_log(tmp_path):
    d = str(tmp_path / "logs")
    with running_broker(d, config={"log.segment.bytes": "300"}) as b:
        b.create_topic("roll", 1)
        c = Conn(b)
        for i in range(6):
            r = c.produce("roll", _batch(2, producer_id=9, producer_epoch=0, base_sequence=2 * i))
            assert r.error_code == 0
    part_dir = os.path.join(d, "roll-0")
    snaps = sorted(f for f in os.listdir(part_dir) if f.endswith(".snapshot"))
    assert snaps == ["00000000000000000006.snapshot", "00000000000000000012.snapshot"]
    for f in snaps:
        os.remove(os.path.join(part_dir, f))
    with running_broker(d) as b:                          # rebuilt from the batch headers
        c = Conn(b)
        assert c.produce("roll", _batch(2, producer_id=9, producer_epoch=0,
                                        base_sequence=10)).base_offset == 10
        assert c.produce("roll", _batch(2, producer_id=9, producer_epoch=0,
                                        base_sequence=13)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert c.produce("roll", _batch(2, producer_id=9, producer_epoch=0,
                                        base_sequence=12)).base_offset == 12


def test_read_committed_stops_at_open_transaction_and_lists_aborts(kafka_broker):
    ck = pytest.importorskip("confluent_kafka")
    b = kafka_broker
    b.txn_coordinator = None      # the partitions' side alone: no coordinator's bookkeeping
    b.create_topic("txn", 1)
    c = Conn(b)

    def txn_batch(pid, seq, tag):
        bb = BatchBuilder(2, "none", producer_id=pid, producer_epoch=0, base_sequence=seq,
                          is_transactional=True)
        for i in range(2):
            bb.append(b"%s-%d" % (tag, i), timestamp=1_700_000_000_000)
        return bb.build()

    assert c.produce("txn", _batch(2)).base_offset == 0                    # 0-1 plain
    assert c.produce("txn", txn_batch(1, 0, b"abort")).base_offset == 2    # 2-3 aborted later
    assert c.produce("txn", txn_batch(2, 0, b"commit")).base_offset == 4   # 4-5 committed later
    part = b.partitions.partition("txn", 0)
    assert part.last_stable_offset == 2 and part.high_watermark == 6

    def fetch(isolation):
        r = c.call(FetchRequest(max_wait_ms=0, min_bytes=0, isolation_level=isolation, topics=[
            dict(topic="txn", partitions=[dict(partition=0, fetch_offset=0,
                                               partition_max_bytes=1 << 20)])]), 11)
        return r.responses[0].partitions[0]

    p = fetch(1)
    assert p.last_stable_offset == 2 and p.high_watermark == 6
    assert [bt.last_offset for bt in _batches(p.records)] == [1]
    assert len(_batches(fetch(0).records)) == 3
    b.call(lambda: b.partitions.write_marker("txn", 0, "abort", producer_id=1, producer_epoch=0))
    b.call(lambda: b.partitions.write_marker("txn", 0, "commit", producer_id=2, producer_epoch=0))
    p = fetch(1)
    assert p.last_stable_offset == 8 and p.high_watermark == 8
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(1, 2)]
    cons = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "rc",
                        "isolation.level": "read_committed", "enable.auto.commit": False})
    cons.assign([ck.TopicPartition("txn", 0, 0)])
    seen = []
    deadline = time.time() + 15
    while len(seen) < 4 and time.time() < deadline:
        m = cons.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value())
    cons.close()
    assert seen == [b"v0", b"v1", b"commit-0", b"commit-1"]


def _batches(records):
    return list(iter_batches(bytes(records))) if records else []


@pytest.mark.parametrize("version", [4, 11, 12, 13, 17])
def test_fetch_every_version_small_and_sendfile_sized(kafka_broker, version):
    b = kafka_broker
    b.create_topic("fv", 2)
    c = Conn(b)
    small = _batch(3)
    big = BatchBuilder(2, "none")
    for i in range(40):
        big.append(os.urandom(1000), timestamp=1_700_000_000_000 + i)
    big = big.build()
    assert c.produce("fv", small, partition=0).error_code == 0
    assert c.produce("fv", big, partition=1).error_code == 0
    tid = b.partitions.topics["fv"].topic_id
    r = c.call(FetchRequest(max_wait_ms=0, min_bytes=1, isolation_level=0, session_id=0,
                            session_epoch=-1, topics=[dict(
                                topic="fv", topic_id=tid,
                                partitions=[dict(partition=p, fetch_offset=0,
                                                 partition_max_bytes=1 << 20)
                                            for p in (0, 1)])]), version)
    parts = {p.partition_index: p for p in r.responses[0].partitions}
    got0, got1 = _batches(parts[0].records), _batches(parts[1].records)
    assert [x.last_offset for x in got0] == [2] and [x.last_offset for x in got1] == [39]
    assert bytes(parts[1].records)[12:] == big[12:]            # the batch as produced
    assert parts[0].high_watermark == 3 and parts[1].high_watermark == 40
    r = c.call(FetchRequest(max_wait_ms=0, min_bytes=1, isolation_level=0, session_id=0,
                            session_epoch=-1, topics=[dict(
                                topic="fv", topic_id=tid,
                                partitions=[dict(partition=0, fetch_offset=99,
                                                 partition_max_bytes=1 << 20)])]), version)
    assert r.responses[0].partitions[0].error_code == 1      # OFFSET_OUT_OF_RANGE


def test_fetch_sessions(kafka_broker):
    b = kafka_broker
    b.create_topic("fs", 2)
    c = Conn(b)
    assert c.produce("fs", _batch(3), partition=0).error_code == 0

    def fetch(sid, epoch, parts=(), forget=()):
        return c.call(FetchRequest(max_wait_ms=0, min_bytes=0, isolation_level=0, session_id=sid,
                                   session_epoch=epoch, topics=[dict(topic="fs", partitions=[
                                       dict(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                                       for p, o in parts])] if parts else [],
                                   forgotten_topics_data=[dict(topic="fs", partitions=list(forget))]
                                   if forget else []), 11)

    def seen(resp):
        return sorted((p.partition_index, len(_batches(p.records)))
                      for t in resp.responses for p in t.partitions)
    full = fetch(0, 0, [(0, 0), (1, 0)])
    sid = full.session_id
    assert sid > 0 and seen(full) == [(0, 1), (1, 0)]
    assert seen(fetch(sid, 1, [(0, 3)])) == []                  # nothing new: nothing sent
    assert c.produce("fs", _batch(2), partition=1).error_code == 0
    assert seen(fetch(sid, 2)) == [(1, 1)]                       # partition 1 has records
    assert seen(fetch(sid, 3, [(1, 2)])) == []
    assert fetch(sid, 3).error_code == 71                        # INVALID_FETCH_SESSION_EPOCH
    assert fetch(sid + 1, 1).error_code == 70                    # FETCH_SESSION_ID_NOT_FOUND
    assert c.produce("fs", _batch(2), partition=0).error_code == 0
    assert seen(fetch(sid, 4, forget=[0])) == []                 # forgotten: not sent
    closed = fetch(sid, -1, [(0, 0)])
    assert closed.session_id == 0 and seen(closed) == [(0, 2)]
    assert fetch(sid, 5).error_code == 70


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_response_fast_encoding_matches_the_codec(version):
    """The produce handler encodes its answer directly: byte for byte what the protocol
    codec encodes from the message objects, for every version served."""
    from kafkawire.protocol import ProduceResponse, encode_response
    from kafkawire.server.handlers.produce import encode_produce_response

    topics = [("orders", [(0, 0, 12345, -1, 0, None), (3, 2, -1, -1, -1, "CRC mismatch ü")]),
              ("t" * 300, [(i, 0, i << 33, 1_700_000_000_000 + i, i, None)
                           for i in range(130)]),
              ("empty", [])]
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    msg = ProduceResponse(throttle_time_ms=0, responses=[
        T(name=name, partition_responses=[
            P(index=i, error_code=c, base_offset=b, log_append_time_ms=t, log_start_offset=s,
              record_errors=[], error_message=m) for i, c, b, t, s, m in parts])
        for name, parts in topics])
    for corr in (0, 7, -5, 1 << 30):
        assert encode_produce_response(version, corr, topics) == \
            encode_response(msg, version, corr)
