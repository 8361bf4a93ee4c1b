"""The pure twin's v2 record decoder agrees with decoding record by record, on any bytes.

``kafkawire._pure.records`` decodes a region (``_decode_v2``) through the record
walker, one record at a time.  Here the same regions are decoded record by record
with ``_checked_record`` alone, and as bytes, bytearray and memoryview; all must give
the same records, or the same error (type, reason, position, offset) after the same
records.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire._pure import records as PR
from kafkawire.errors import CorruptRecordError

from fuzz import samples as S

pytestmark = pytest.mark.one_backend


def reference(buf, start, end, count, base_offset, base_ts, max_ts, ts_type):
    """Decode with the checked per-record decoder only -> (records, error)."""
    view, start, end = PR._region(buf, start, end)
    out = []
    if count < 0 or (count > 0 and count > (end - start) // 7):
        return out, ("count", start)
    lat = ts_type == 1
    name = "LogAppendTime" if lat else "CreateTime"
    pos = start
    try:
        for _ in range(count):
            r, pos = PR._checked_record(view, pos, end, base_offset, base_ts, max_ts, lat, name)
            out.append(r)
    except CorruptRecordError as exc:
        return out, (exc.reason, exc.position, exc.offset, exc.message)
    if pos != end:
        return out, ("count", pos)
    return out, None


def outcome(records, err):
    rows = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in records]
    return rows, err


def decode(buf, start, end, *args):
    return PR._decode_v2(*PR._region(buf, start, end), *args)


def check(buf, start, end, count, ts_type=0):
    args = (start, end, count, 7, 1_000, 2_000, ts_type)
    got, err = decode(buf, *args)
    if err is not None:
        assert isinstance(err, CorruptRecordError)
        err = ((err.reason, err.position) if err.reason == "count" else
               (err.reason, err.position, err.offset, err.message))
    want = outcome(*reference(buf, *args))
    assert outcome(got, err) == want, (bytes(buf).hex(), start, end, count)
    for kind in (bytearray, memoryview):
        other, err2 = decode(kind(buf), *args)
        assert outcome(other, None)[0] == want[0]
        assert (err2 is None) == (want[1] is None)
    return want


#: big fields (> 8 KiB) take three-byte length varints; built cheaply by repetition
big = st.builds(lambda n, b: b * n, st.integers(8000, 9000), st.binary(min_size=1, max_size=1))
keys = st.one_of(st.none(), st.binary(max_size=20), big)
headers = st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=10))),
                   max_size=4)
records = st.lists(st.tuples(
    st.integers(-2**31, 2**31 - 1) | st.integers(0, 20_000),
    st.integers(-2**63, 2**63 - 1) | st.integers(-20_000, 20_000),
    keys, st.one_of(st.none(), st.binary(max_size=300), big), headers), min_size=1, max_size=6)


def encode(recs):
    return b"".join(S.v2_record(o, t, k, v, h) for o, t, k, v, h in recs)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(records, st.integers(0, 1))
def test_valid_regions_agree(recs, ts_type):
    buf = b"ab" + encode(recs)
    rows, err = check(buf, 2, -1, len(recs), ts_type)
    assert err is None and len(rows) == len(recs)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(records, st.data())
def test_damaged_regions_agree(recs, data):
    buf = bytearray(encode(recs))
    for _ in range(data.draw(st.integers(1, 3))):
        if not buf:
            break
        pos = data.draw(st.integers(0, len(buf) - 1))
        kind = data.draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if kind == "flip":
            buf[pos] ^= data.draw(st.integers(1, 255))
        elif kind == "set":
            buf[pos] = data.draw(st.sampled_from([0, 1, 2, 3, 0x7F, 0x80, 0x81, 0xFF]))
        elif kind == "cut":
            del buf[pos:]
        else:
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
    tail = data.draw(st.binary(max_size=4))  # bytes past `end` must never be read as records
    count = len(recs) + data.draw(st.integers(-1, 1))
    check(bytes(buf) + tail, 0, len(buf), count)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 4))
def test_random_bytes_agree(blob, count):
    check(blob, 0, -1, count)


@pytest.mark.parametrize("body", [
    b"\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01\x00\x01\x01\x00",  # 10-byte varlong delta
    b"\x00\x00\x80\x00\x01\x01\x00",                                 # overlong offset delta
    b"\x00\x00\x00\x01\x01\x02\x02\xc3\xa9\x01",                     # UTF-8 header key
    b"\x00\x00\x00\x01\x01\x02\x02\xff\xfe\x01",                     # bad UTF-8 header key
    b"\x00\x00\x00\x03\x01\x00",                                     # key length -2
    b"\x00\x00\x00\x01\x01\x03",                                     # header count -2
])
def test_unusual_records_agree(body):
    rec = S.varint(len(body)) + body
    check(rec + rec, 0, -1, 2)
    check(rec, 0, -1, 1)


def test_big_regions_decode_lazily(monkeypatch):
    recs = [(i, i * 3, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else []) for i in range(20)]
    buf = b"zz" + encode(recs)
    args = (2, -1, len(recs), 7, 1_000, 2_000, 0)
    want = outcome(*decode(buf, *args))
    monkeypatch.setattr(PR, "_EAGER_MAX", 16)
    for kind in (bytes, memoryview):
        it = PR.iter_records_v2(kind(buf), *args)
        assert type(it).__name__ == "generator"
        assert outcome(list(it), None) == want
        assert outcome(PR.decode_records_v2(kind(buf), *args), None) == want
    bad = buf[:-1]  # the last record is cut short
    got = []
    def relocate(exc):
        return exc.at(position_delta=100)

    with pytest.raises(CorruptRecordError) as e:
        for r in PR.iter_records_v2(memoryview(bad), *args, on_error=relocate):
            got.append(r)
    assert len(got) == len(recs) - 1 and e.value.reason == "truncated"
    assert e.value.position == 100 + sum(len(S.v2_record(*r)) for r in recs[:-1]) + 2
    with pytest.raises(CorruptRecordError):
        PR.decode_records_v2(memoryview(bad), *args)
