"""The broker's skeleton: identity and locks, the network loop's framing rules, ApiVersions
from the handler registry, and a round trip with librdkafka (confluent-kafka)."""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from kafkawire.errors import LogLockedError
from kafkawire.log.checkpoints import (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT,
                                       read_offset_checkpoint, read_properties)
from kafkawire.protocol import (ApiKey, ApiVersionsRequest, MetadataRequest, decode_response,
                                encode_request)
from kafkawire.server import Broker
from kafkawire.testing import kafka_broker, running_broker  # noqa: F401  (the fixture)

pytestmark = pytest.mark.one_backend


def _recv_frame(sock: socket.socket, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while len(data) < 4 or len(data) - 4 < struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _read_frames(sock: socket.socket, count: int, timeout: float = 60.0):
    """``count`` whole response frames (size prefix included), in arrival order."""
    sock.settimeout(timeout)
    buf, out = b"", []
    while len(out) < count:
        while len(buf) >= 4 and len(buf) - 4 >= struct.unpack(">i", buf[:4])[0]:
            n = 4 + struct.unpack(">i", buf[:4])[0]
            out.append(buf[:n])
            buf = buf[n:]
        if len(out) < count:
            chunk = sock.recv(1 << 20)
            assert chunk, "the broker closed the connection"
            buf += chunk
    assert not buf
    return out


def _call(broker: Broker, message, version: int, corr: int = 1):
    with socket.create_connection(broker.address) as s:
        s.sendall(encode_request(message, version, corr, "test"))
        return decode_response(type(message).API_KEY, version, _recv_frame(s)).message


def test_identity_lock_and_clean_shutdown(tmp_path):
    d = str(tmp_path / "logs")
    with running_broker(d) as b:
        props = read_properties(os.path.join(d, "meta.properties"))
        assert props["version"] == "1" and props["node.id"] == "1"
        assert props["cluster.id"] == b.cluster_id and len(b.cluster_id) == 22
        assert os.path.exists(os.path.join(d, ".lock"))
        with pytest.raises(LogLockedError):
            Broker(d).start()
        b.create_topic("orders", 2)
        assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        tid = b.partitions.topics["orders"].topic_id
    assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    assert read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)) == {
        ("orders", 0): 0, ("orders", 1): 0}
    meta = open(os.path.join(d, "orders-1", "partition.metadata")).read()
    assert meta.startswith("version: 0\ntopic_id: ")
    with running_broker(d) as b2:
        assert b2.cluster_id == props["cluster.id"]
        assert b2.partitions.topics["orders"].topic_id == tid
        assert sorted(b2.partitions.topics["orders"].partitions) == [0, 1]


def test_api_versions_come_from_the_registry(kafka_broker):
    resp = _call(kafka_broker, ApiVersionsRequest(client_software_name="t",
                                                  client_software_version="1"), 3)
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got[ApiKey.API_VERSIONS] == (0, 4)
    assert got[ApiKey.PRODUCE] == (3, 11) and got[ApiKey.FETCH] == (4, 17)
    assert got[ApiKey.METADATA] == (0, 12)
    for key in got:
        assert kafka_broker.dispatcher.handler(key) is not None
    kafka_broker.dispatcher.unregister(ApiKey.METADATA)
    resp = _call(kafka_broker, ApiVersionsRequest(), 0)
    assert ApiKey.METADATA not in {k.api_key for k in resp.api_keys}
    # a request for an API without a handler closes the connection instead of a wrong answer
    with socket.create_connection(kafka_broker.address) as s:
        s.sendall(encode_request(MetadataRequest(topics=None), 12, 1, "t"))
        assert _closed(s)


def test_api_versions_too_new_gets_v0_unsupported(kafka_broker):
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 42, 1) + b"x" + b"\0" * 8
    with socket.create_connection(kafka_broker.address) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        frame = _recv_frame(s)
    corr, resp = decode_response(ApiKey.API_VERSIONS, 0, frame)
    assert corr == 42 and resp.error_code == 35 and resp.api_keys


@pytest.mark.parametrize("frame", [
    struct.pack(">i", -5),                                   # negative size
    struct.pack(">i", 1 << 20) + b"x" * 10,                  # over socket.request.max.bytes
    struct.pack(">i", 3) + b"abc",                           # shorter than a header
    struct.pack(">ihhi", 8, 3, 12, 7),                       # header cut off, no body
    struct.pack(">ihhih", 12, 999, 0, 7, 0) + b"\0\0",      # unknown API key
    struct.pack(">ihhih", 10, 3, 12, 7, 200),                # client id longer than the frame
])
def test_malformed_frames_close_only_that_connection(frame, tmp_path):
    with running_broker(str(tmp_path / "l"), config={"socket.request.max.bytes": 65536}) as b:
        with socket.create_connection(b.address) as good, \
                socket.create_connection(b.address) as bad:
            bad.sendall(frame)
            assert _closed(bad)
            good.sendall(encode_request(MetadataRequest(topics=None), 12, 5, "ok"))
            corr, resp = decode_response(ApiKey.METADATA, 12, _recv_frame(good))
            assert corr == 5 and resp.brokers[0].port == b.address[1]


def test_slow_client_does_not_stall_others(kafka_broker):
    with socket.create_connection(kafka_broker.address) as slow:
        req = encode_request(MetadataRequest(topics=None), 12, 9, "slow")
        slow.sendall(req[:7])          # half a request, then nothing
        t0 = time.monotonic()
        for i in range(20):
            resp = _call(kafka_broker, MetadataRequest(topics=None), 12, corr=i)
            assert resp.cluster_id == kafka_broker.cluster_id
        assert time.monotonic() - t0 < 10
        slow.sendall(req[7:])
        assert decode_response(ApiKey.METADATA, 12, _recv_frame(slow)).correlation_id == 9


def test_pipelined_requests_answered_in_order(kafka_broker):
    with socket.create_connection(kafka_broker.address) as s:
        s.sendall(b"".join(encode_request(MetadataRequest(topics=None), 12, c, "p")
                           for c in range(50)))
        seen = []
        buf = b""
        s.settimeout(5)
        while len(seen) < 50:
            buf += s.recv(65536)
            while len(buf) >= 4 and len(buf) - 4 >= struct.unpack(">i", buf[:4])[0]:
                n = struct.unpack(">i", buf[:4])[0]
                seen.append(struct.unpack(">i", buf[4:8])[0])
                buf = buf[4 + n:]
    assert seen == list(range(50))


def test_idle_connections_closed(tmp_path):
    """connections.max.idle.ms: a silent connection and a half-sent request are closed (no
    timing window: the test only waits, generously, for the close); others are served."""
    with running_broker(str(tmp_path / "logs"), config={"connections.max.idle.ms": 300}) as b:
        with socket.create_connection(b.address) as silent, \
                socket.create_connection(b.address) as half:
            req = encode_request(MetadataRequest(topics=None), 12, 1, "idle")
            half.sendall(req[:7])
            assert _closed(silent, timeout=30) and _closed(half, timeout=30)
        assert _call(b, MetadataRequest(topics=None), 12, corr=2).cluster_id == b.cluster_id


def test_confluent_kafka_roundtrip(kafka_broker):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    bs = kafka_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("rt", 3, 1)])["rt"].result(10)
    delivered = []
    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5})
    for i in range(300):
        p.produce("rt", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3,
                  on_delivery=lambda err, msg: delivered.append((err, msg.partition(),
                                                                  msg.offset())))
    assert p.flush(10) == 0
    assert all(err is None for err, _, _ in delivered) and len(delivered) == 300
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "g", "enable.auto.commit": False})
    c.assign([ck.TopicPartition("rt", i, 0) for i in range(3)])
    got = {}
    deadline = time.time() + 20
    while len(got) < 300 and time.time() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        got[m.key()] = (m.value(), m.partition(), m.offset())
    c.close()
    assert len(got) == 300
    for i in range(300):
        assert got[b"k%d" % i][:2] == (b"v%d" % i, i % 3)
    lo, hi = ck.Consumer({"bootstrap.servers": bs, "group.id": "g2"}).get_watermark_offsets(
        ck.TopicPartition("rt", 1), timeout=10)
    assert (lo, hi) == (0, 100)


def test_large_pipelined_and_trickled_requests(kafka_broker):
    """Requests arrive whole in one read, cut at every byte, and as several MiB of produce
    requests a client sends without reading the answers (the broker stops reading until it
    can answer): each is answered, in order, with its records written once."""
    import threading

    from kafkawire.protocol import ProduceRequest
    from kafkawire.records import BatchBuilder

    b = kafka_broker
    b.create_topic("big", 1)

    def produce(corr, n, size):
        bb = BatchBuilder()
        for i in range(n):
            bb.append(bytes([corr % 251]) * size, key=b"%d-%d" % (corr, i))
        return encode_request(ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000,
                                             topic_data=[dict(name="big", partition_data=[
                                                 dict(index=0, records=bb.build())])]),
                              9, corr, "big")

    sizes = [(1, 10), (300, 1024), (2, 10), (900, 1024), (1, 100)] * 4
    reqs = [produce(c, n, size) for c, (n, size) in enumerate(sizes)]
    with socket.create_connection(b.address) as s:
        sender = threading.Thread(target=s.sendall, args=(b"".join(reqs),), daemon=True)
        sender.start()
        time.sleep(0.2)            # let the broker's buffers fill before reading anything
        answers = [decode_response(ApiKey.PRODUCE, 9, f) for f in _read_frames(s, len(reqs))]
        sender.join(30)
    assert [corr for corr, _ in answers] == list(range(len(reqs)))
    offsets = [r.responses[0].partition_responses[0].base_offset for _, r in answers]
    expected, at = [], 0
    for n, _ in sizes:
        expected.append(at)
        at += n
    assert offsets == expected
    with socket.create_connection(b.address) as s:      # one byte at a time
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = produce(99, 3, 50) + encode_request(MetadataRequest(topics=None), 12, 100, "t")
        for i in range(len(data)):
            s.sendall(data[i:i + 1])
        first, second = _read_frames(s, 2)
        corr, r = decode_response(ApiKey.PRODUCE, 9, first)
        assert corr == 99 and r.responses[0].partition_responses[0].base_offset == at
        assert decode_response(ApiKey.METADATA, 12, second).correlation_id == 100
    assert b.call(lambda: b.partitions.partition("big", 0).high_watermark) == at + 3


def test_requests_sent_before_a_half_close_are_answered(kafka_broker):
    with socket.create_connection(kafka_broker.address) as s:
        s.sendall(b"".join(encode_request(MetadataRequest(topics=None), 12, c, "h")
                           for c in (1, 2)))
        s.shutdown(socket.SHUT_WR)
        s.settimeout(30)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    corrs = []
    while data:
        n = struct.unpack(">i", data[:4])[0]
        corrs.append(struct.unpack(">i", data[4:8])[0])
        data = data[4 + n:]
    assert corrs == [1, 2]


def test_many_small_requests_from_a_client_reading_late(kafka_broker):
    """Thousands of small pipelined requests from a client that reads nothing at first: the
    broker stops reading while its answers wait (the queue counts each request's objects,
    not only its bytes) and answers every one, in order, once the client reads."""
    import threading

    n = 8000
    data = b"".join(encode_request(ApiVersionsRequest(), 0, c, "s") for c in range(n))
    with socket.create_connection(kafka_broker.address) as s:
        sender = threading.Thread(target=s.sendall, args=(data,), daemon=True)
        sender.start()
        time.sleep(0.5)
        s.settimeout(60)
        buf, seen = b"", 0
        while seen < n:
            chunk = s.recv(1 << 16)
            assert chunk, "the broker closed the connection"
            buf += chunk
            at = 0
            while len(buf) - at >= 4 and len(buf) - at - 4 >= struct.unpack_from(">i", buf, at)[0]:
                size = struct.unpack_from(">i", buf, at)[0]
                assert struct.unpack_from(">i", buf, at + 4)[0] == seen
                seen += 1
                at += 4 + size
            buf = buf[at:]
        sender.join(30)


def _produce_frame(topic: str, partition: int, corr: int, values, acks: int = 1) -> bytes:
    from kafkawire.protocol import ProduceRequest
    from kafkawire.records import BatchBuilder
    bb = BatchBuilder()
    for v in values:
        bb.append(v)
    return encode_request(ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000,
                                         topic_data=[dict(name=topic, partition_data=[
                                             dict(index=partition, records=bb.build())])]),
                          9, corr, "order")


def _fetch_frame(topic: str, partition: int, corr: int, offset: int, *, min_bytes: int = 0,
                 max_wait_ms: int = 0, max_bytes: int = 1 << 20) -> bytes:
    from kafkawire.protocol import FetchRequest
    return encode_request(FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                       max_bytes=max_bytes, isolation_level=0, topics=[dict(
                                           topic=topic, partitions=[dict(
                                               partition=partition, fetch_offset=offset,
                                               partition_max_bytes=max_bytes)])]),
                          11, corr, "order")


def test_pipelined_produce_fetch_and_others_answered_in_order(kafka_broker):
    """Produce and Fetch (answered as they arrive on an idle connection) pipelined with
    other APIs, a Fetch that waits for records, and an acks=0 Produce (no answer): every
    answer in request order, each request seeing exactly the records produced before it."""
    from kafkawire.records import iter_batches
    b = kafka_broker
    b.create_topic("order", 1)
    reqs = [
        _produce_frame("order", 0, 1, [b"a", b"b"]),
        # waits up to 300 ms for 1 MiB that never comes (the next Produce is behind it)
        _fetch_frame("order", 0, 2, 0, min_bytes=1 << 20, max_wait_ms=300),
        _produce_frame("order", 0, 3, [b"c"]),
        encode_request(MetadataRequest(topics=None), 12, 4, "order"),
        _fetch_frame("order", 0, 5, 0),
        encode_request(ApiVersionsRequest(), 0, 6, "order"),
        _produce_frame("order", 0, 7, [b"d"], acks=0),
        _fetch_frame("order", 0, 8, 3),
        _produce_frame("order", 0, 9, [b"e"]),
    ]
    with socket.create_connection(b.address) as s:
        s.sendall(b"".join(reqs))
        frames = _read_frames(s, 8)
    corrs = [struct.unpack(">i", f[4:8])[0] for f in frames]
    assert corrs == [1, 2, 3, 4, 5, 6, 8, 9]
    answers = dict(zip(corrs, frames))

    def produced(corr):
        r = decode_response(ApiKey.PRODUCE, 9, answers[corr]).message
        p = r.responses[0].partition_responses[0]
        assert p.error_code == 0
        return p.base_offset

    def fetched(corr):
        r = decode_response(ApiKey.FETCH, 11, answers[corr]).message
        p = r.responses[0].partitions[0]
        assert p.error_code == 0
        values = [rec.value for batch in iter_batches(bytes(p.records or b""))
                  for rec in batch]
        return values, p.high_watermark

    assert [produced(c) for c in (1, 3, 9)] == [0, 2, 4]
    assert fetched(2) == ([b"a", b"b"], 2)
    assert fetched(5) == ([b"a", b"b", b"c"], 3)
    assert fetched(8) == ([b"d"], 4)


def test_large_fetch_to_a_client_reading_late(tmp_path):
    """Fetch answers larger than the socket takes at once (records sent from the segment
    file), to a client that reads nothing for a while, with requests pipelined behind
    them: other connections are served meanwhile, and the late reader gets every answer
    whole, in order, its records byte for byte those of the segment file."""
    import threading
    with running_broker(str(tmp_path / "l")) as b:
        b.create_topic("late", 1)
        with socket.create_connection(b.address) as s:
            for i in range(8):          # 8 batches of ~1 MiB, one produce each
                s.sendall(_produce_frame("late", 0, i, [os.urandom(1000) for _ in range(1000)]))
                _recv_frame(s, timeout=60)
        with open(tmp_path / "l" / "late-0" / "00000000000000000000.log", "rb") as f:
            log_bytes = f.read()
        reqs = [_fetch_frame("late", 0, 1, 0, max_bytes=len(log_bytes)),
                encode_request(MetadataRequest(topics=None), 12, 2, "late"),
                _fetch_frame("late", 0, 3, 0, max_bytes=len(log_bytes)),
                _produce_frame("late", 0, 4, [b"last"])]
        with socket.socket() as late:
            late.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            late.connect(b.address)
            sender = threading.Thread(target=late.sendall, args=(b"".join(reqs),), daemon=True)
            sender.start()
            for c in range(5):          # the broker answers others while the late one waits
                assert _call(b, MetadataRequest(topics=None), 12, corr=c).cluster_id == \
                    b.cluster_id
            frames = _read_frames(late, 4)
            sender.join(30)
    assert [struct.unpack(">i", f[4:8])[0] for f in frames] == [1, 2, 3, 4]
    for f in (frames[0], frames[2]):
        r = decode_response(ApiKey.FETCH, 11, f).message
        assert bytes(r.responses[0].partitions[0].records) == log_bytes
    r = decode_response(ApiKey.PRODUCE, 9, frames[3]).message
    assert r.responses[0].partition_responses[0].base_offset == 8000


def test_fetch_answers_keep_the_brokers_fetch_max_bytes(tmp_path):
    """The broker's fetch.max.bytes caps a consumer's answer below its own max_bytes, as
    Kafka's does (the first batch still goes whole); answers cut by a limit end with whole
    batches."""
    from kafkawire.records import iter_batches
    with running_broker(str(tmp_path / "f"), config={"fetch.max.bytes": "3000"}) as b:
        b.create_topic("capped", 1)
        with socket.create_connection(b.address) as s:
            for i in range(6):          # batches of ~1.1 KB
                s.sendall(_produce_frame("capped", 0, i, [b"x" * 100 for _ in range(10)]))
                _recv_frame(s, timeout=60)
            for corr, max_bytes, want in ((10, 1 << 20, 2), (11, 500, 1)):
                s.sendall(_fetch_frame("capped", 0, corr, 0, max_bytes=max_bytes))
                r = decode_response(ApiKey.FETCH, 11, _recv_frame(s, timeout=60)).message
                data = bytes(r.responses[0].partitions[0].records)
                batches = list(iter_batches(data))
                assert len(batches) == want and sum(bb.size for bb in batches) == len(data)


def test_a_fetch_session_moves_answered_partitions_to_the_end(tmp_path):
    """As in Kafka's incremental sessions, a partition in an answer goes to the end of the
    session's order: with a byte budget that holds one batch, successive answers take
    turns between partitions instead of draining the first one before the other."""
    from kafkawire.protocol import FetchRequest
    from kafkawire.records import iter_batches

    def fetch(s, corr, session_id, epoch, offsets, max_bytes):
        req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
                           session_id=session_id, session_epoch=epoch,
                           topics=[dict(topic="rot", partitions=[
                               dict(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                               for p, o in offsets.items()])] if offsets else [],
                           forgotten_topics_data=[], rack_id="")
        s.sendall(encode_request(req, 12, corr, "rot"))
        r = decode_response(ApiKey.FETCH, 12, _recv_frame(s, timeout=60)).message
        got = {p.partition_index: list(iter_batches(bytes(p.records or b"")))
               for t in r.responses for p in t.partitions}   # whole batches (a cut one: none)
        return r.session_id, {p: n for p, n in got.items() if n}

    with running_broker(str(tmp_path / "r")) as b:
        b.create_topic("rot", 2)
        with socket.create_connection(b.address) as s:
            for i in range(6):          # three batches of ~1.1 KB in each partition
                s.sendall(_produce_frame("rot", i % 2, i, [b"x" * 100 for _ in range(10)]))
                _recv_frame(s, timeout=60)
            _, got = fetch(s, 9, 0, -1, {0: 0}, 1 << 20)         # sessionless: a batch's size
            size = got[0][0].size                                 # (all the same here)
            sid, got = fetch(s, 10, 0, 0, {0: 0, 1: 0}, size)   # full: the order asked
            assert sid and list(got) == [0]
            served = [0]
            pos = {0: 10, 1: 0}
            for epoch in range(1, 5):
                _, got = fetch(s, 10 + epoch, sid, epoch, {p: pos[p] for p in got}, size)
                assert len(got) == 1
                (p,) = got
                served.append(p)
                pos[p] += 10
            assert served == [0, 0, 1, 0, 1]
