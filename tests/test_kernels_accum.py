"""The producer accumulator kernels: records encoded on append equal the batch encoder's;
the counters and the send fallback (both backends)."""
from __future__ import annotations

import random

import pytest

from kafkawire import _kernels as K


def _records(n, seed=1):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if rnd.random() < 0.3 else rnd.randbytes(rnd.randrange(0, 40))
        value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.randrange(0, 300))
        headers = None
        if rnd.random() < 0.3:
            headers = [(f"h{j}\u00e9", None if rnd.random() < 0.2 else rnd.randbytes(5))
                       for j in range(rnd.randrange(1, 4))]
        ts = 1_700_000_000_000 + rnd.randrange(-5000, 5000)
        out.append((ts, key, value, headers))
    return out


def test_appended_records_encode_as_the_batch_encoder_does():
    recs = _records(500)
    buf = K.RecordBuffer(61)
    for i, (ts, k, v, h) in enumerate(recs):
        assert buf.append(ts, k, v, h, 10) == i
    assert buf.count == 500 and buf.size == 61 + 5000 and len(buf) == 500
    first = recs[0][0]
    want = K.encode_records_v2(range(500), [r[0] - first for r in recs], [r[1] for r in recs],
                               [r[2] for r in recs],
                               [[(hk.encode(), hv) for hk, hv in r[3]] if r[3] else None
                                for r in recs])
    assert buf.first_timestamp == first
    assert buf.max_timestamp == max(r[0] for r in recs)
    assert buf.take() == want
    # timestamps stay after take(): the futures' metadata reads them
    assert [buf[i] for i in range(500)] == [r[0] for r in recs] and buf[-1] == recs[-1][0]
    with pytest.raises(IndexError):
        buf[500]


def test_empty_buffer_and_bad_fields():
    buf = K.RecordBuffer(61)
    assert buf.take() == b"" and buf.first_timestamp == -1 and buf.max_timestamp == -1
    assert not buf.closed
    buf.closed = True
    assert buf.closed
    for args in ((1, "k", b"v", None, 0), (1, None, "v", None, 0),
                 (1, None, b"v", [(b"k", b"v")], 0), (1, None, b"v", [("k", "v")], 0),
                 (1.5, None, b"v", None, 0)):
        with pytest.raises(TypeError):
            buf.append(*args)
    with pytest.raises(OverflowError):
        buf.append(1 << 63, None, b"v", None, 0)
    assert buf.count == 0 and len(buf) == 0


def test_appender_counts_and_falls_back():
    calls = []

    def general(*args):
        calls.append(args)
        return "general"

    a = K.Appender(general, {}, {}, {}, None, 1000, 100, 10_000, False)
    a.reserve(100, 2)
    a.reserve(50, 1)
    a.release(100, 2)
    assert (a.used, a.pending_records) == (50, 1)
    # an unknown topic, headers, callbacks, a bypassed appender: the general path, args as given
    assert a.send("t", b"v") == "general"
    assert a.send("t", b"v", b"k", [("h", b"1")], 1, 5, print) == "general"
    a.bypass = True
    assert a.send("t", value=b"v", partition=0) == "general"
    assert calls == [("t", b"v", None, None, None, None, None),
                     ("t", b"v", b"k", [("h", b"1")], 1, 5, print),
                     ("t", b"v", None, None, 0, None, None)]


def test_sticky_fields():
    s = K.Sticky()
    assert (s.partition, s.left) == (-1, 0)
    s.partition, s.left = 3, 100
    s.left -= 150
    assert (s.partition, s.left) == (3, -50)


def test_frame_buffer_is_a_bytearray_of_the_size_asked():
    for n in (0, 1, 70_000):
        buf = K.frame_buffer(n)
        assert type(buf) is bytearray and len(buf) == n
        buf[:] = b"\x01" * n          # writable, and the caller's bytes stay
        assert buf == b"\x01" * n
    with pytest.raises(ValueError):
        K.frame_buffer(-1)


def test_recv_exact_fills_the_buffer_across_writes_and_reports_timeouts_and_close():
    import socket
    import threading
    a, b = socket.socketpair()
    try:
        data = bytes(range(256)) * 4000
        buf = bytearray(len(data))
        writer = threading.Thread(target=lambda: [b.sendall(data[i:i + 70_000])
                                                  for i in range(0, len(data), 70_000)])
        writer.start()
        K.recv_exact(a, memoryview(buf), 30.0)      # many recv calls, one kernel call
        writer.join()
        assert buf == data
        with pytest.raises(socket.timeout):
            K.recv_exact(a, memoryview(buf)[:10], 0.05)
        b.sendall(b"xyz")
        b.close()
        with pytest.raises(ConnectionResetError):
            K.recv_exact(a, memoryview(buf)[:10], 30.0)
        assert buf[:3] == b"xyz"
        K.recv_exact(a, memoryview(buf)[:0], 0.0)    # nothing to read: nothing waited for
    finally:
        a.close()
        b.close()
