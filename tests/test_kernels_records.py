"""The records-core kernels (crc, varint, scan, records) on both backends."""
from __future__ import annotations

import os
import random
import zlib

import numpy as np
import pytest

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import CorruptRecordError

from fuzz import samples as S


# ----------------------------------------------------------------------- crc
@pytest.mark.parametrize("data,expected", [
    (b"", 0), (b"123456789", 0xE3069283), (b"\x00" * 32, 0x8A9136AA), (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
])
def test_crc32c_known_vectors(data, expected):
    assert K.crc32c(data) == expected


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 255, 767, 768, 769, 3000, 12287, 12288, 12289, 40000])
def test_crc32c_matches_reference_at_every_size_and_alignment(n):
    data = os.urandom(n + 3)
    for start in (0, 1, 3):
        assert K.crc32c(data, start, start + n) == S.crc32c(data[start:start + n])


def test_crc32c_range_chaining_and_buffer_types():
    data = os.urandom(100_000)
    whole = K.crc32c(data)
    assert K.crc32c(data, 0, 40_000, 0) == K.crc32c(data[:40_000])
    assert K.crc32c(data, 40_000, -1, K.crc32c(data, 0, 40_000)) == whole
    assert K.crc32c(bytearray(data)) == whole
    assert K.crc32c(memoryview(data)) == whole
    assert K.crc32c(data, 5, 5) == 0


def test_crc32c_impl_names_the_implementation(backend):
    name = K.crc32c_impl()
    assert isinstance(name, str) and name
    if backend == "fast":
        assert name in ("sse4.2", "armv8-crc", "slicing-by-8")


@pytest.mark.one_backend
def test_fast_crc32c_software_fallback_agrees():
    if not K.fast_available():
        pytest.skip("compiled backend not built")
    crc = K._load("fast")["crc"]
    data = os.urandom(50_000)
    best = crc.crc32c(data)
    crc._force_software(True)
    try:
        assert crc.crc32c_impl() == "slicing-by-8"
        for n in (0, 1, 9, 1000, 50_000):
            assert crc.crc32c(data, 0, n) == S.crc32c(data[:n])
        assert crc.crc32c(data) == best
    finally:
        crc._force_software(False)


def test_crc32_is_zlib():
    data = os.urandom(5000)
    assert K.crc32(data) == zlib.crc32(data)
    assert K.crc32(data, 10, 300) == zlib.crc32(data[10:300])
    assert K.crc32(memoryview(data), 10, -1, 7) == zlib.crc32(data[10:], 7)


# -------------------------------------------------------------------- varint
@pytest.mark.parametrize("value,encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-2**31, b"\xff\xff\xff\xff\x0f"),
])
def test_varint_vectors(value, encoded):
    assert K.write_varint(value) == encoded
    assert K.read_varint(encoded + b"\x99", 0) == (value, len(encoded))
    assert K.size_of_varint(value) == len(encoded)


def test_varlong_and_unsigned_round_trip():
    rnd = random.Random(5)
    for v in [0, -1, 2**63 - 1, -2**63] + [rnd.randint(-2**63, 2**63 - 1) for _ in range(300)]:
        enc = K.write_varlong(v)
        assert K.read_varlong(b"xx" + enc, 2) == (v, 2 + len(enc))
        assert K.size_of_varlong(v) == len(enc)
    for v in [0, 127, 128, 2**32 - 1]:
        assert K.read_unsigned_varint(K.write_unsigned_varint(v), 0) == (v, K.size_of_unsigned_varint(v))
    for v in [0, 2**64 - 1]:
        assert K.read_unsigned_varlong(K.write_unsigned_varlong(v), 0)[0] == v


def test_varint_rejects_overlong_and_truncated():
    with pytest.raises(CorruptRecordError) as e:
        K.read_varint(b"\x80\x80\x80\x80\x80\x00", 0)
    assert e.value.reason == "varint" and e.value.position == 0
    with pytest.raises(CorruptRecordError) as e:
        K.read_varlong(b"\x00" + b"\x80" * 10 + b"\x00", 1)
    assert e.value.reason == "varint" and e.value.position == 1
    with pytest.raises(CorruptRecordError) as e:
        K.read_varint(b"\x80\x80", 0)
    assert e.value.reason == "truncated"
    with pytest.raises(CorruptRecordError):
        K.read_unsigned_varint(b"", 0)
    # 10 bytes is the most a varlong may use; 5 for a varint (bits past 32 dropped, as Kafka)
    assert K.read_varlong(b"\xff" * 9 + b"\x01", 0)[1] == 10
    assert K.read_varint(b"\xff\xff\xff\xff\x7f", 0)[1] == 5


def test_varint_writers_check_range():
    for fn, bad in ((K.write_varint, 2**31), (K.write_varlong, 2**63), (K.write_unsigned_varint, -1)):
        with pytest.raises(ValueError):
            fn(bad)


# Every length and delta of a v2 record is a varint; the record kernels read them with
# the wire layer's readers (one- and two-byte values inline, longer ones in a loop).
@pytest.mark.parametrize("ts_delta", [0, -1, 1, 63, -64, 64, 8191, -8192, 8192, 2**31 - 1, -2**31,
                                      2**63 - 1, -2**63])
@pytest.mark.parametrize("off_delta", [0, 63, 64, 8191, 8192, 2**31 - 1])
def test_record_varints_round_trip_at_every_width(ts_delta, off_delta):
    region = K.encode_records_v2([off_delta], [ts_delta], [b"k" * 70], [b"v" * 9000], [None])
    (r,) = K.decode_records_v2(region, 0, len(region), 1, 5, 0, 0, 0)
    assert (r.offset, r.timestamp, r.key, r.value) == (5 + off_delta, ts_delta, b"k" * 70, b"v" * 9000)
    assert K.validate_records_v2(region, 0, len(region), 1, 5, 5 + 2**31) is None


def test_record_varints_overlong_and_truncated():
    region = bytearray(K.encode_records_v2([0], [0], [b"k"], [b"v"], [None]))
    # the timestamp delta (after length and attributes) made 11 bytes long: overlong
    overlong = bytes(region[:2]) + b"\x80" * 10 + b"\x00" + bytes(region[3:])
    overlong = bytes([len(overlong) - 1 << 1]) + overlong[1:]
    with pytest.raises(CorruptRecordError) as e:
        K.decode_records_v2(overlong, 0, len(overlong), 1, 0, 0, 0, 0)
    assert (e.value.reason, e.value.position) == ("varint", 2)
    # a record of 6 bytes whose timestamp delta runs to its end
    cut = b"\x0c\x00" + b"\x80" * 5
    with pytest.raises(CorruptRecordError) as e:
        K.decode_records_v2(cut, 0, len(cut), 1, 0, 0, 0, 0)
    assert (e.value.reason, e.value.position) == ("truncated", 2)


# ---------------------------------------------------------------------- scan
def test_scan_columns_for_every_kind():
    v2 = S.v2_batch([S.v2_record(0, 0, b"k", b"v")], base_offset=40, last_offset_delta=4,
                    attributes=0x18, base_timestamp=11, max_timestamp=22, producer_id=33,
                    producer_epoch=2, base_sequence=7, partition_leader_epoch=9, count=1)
    m0 = S.legacy_message(50, b"x", magic=0)
    m1 = S.legacy_message(51, b"y", magic=1, timestamp=77, attributes=0x08)
    w1 = S.legacy_wrapper(60, S.legacy_message(0, b"z"), timestamp=88)
    buf = v2 + m0 + m1 + w1
    rows, stop, status = K.scan_batches(buf, 0, -1, -1, True)
    assert status == C.OK and stop == len(buf)
    assert rows.dtype == np.int64 and rows.shape == (4, C.NFIELDS)
    r = rows[0]
    assert (r[C.POSITION], r[C.SIZE], r[C.BASE_OFFSET], r[C.LAST_OFFSET], r[C.MAGIC]) == (0, len(v2), 40, 44, 2)
    assert (r[C.ATTRIBUTES], r[C.PARTITION_LEADER_EPOCH], r[C.FIRST_TIMESTAMP], r[C.MAX_TIMESTAMP]) == (0x18, 9, 11, 22)
    assert (r[C.PRODUCER_ID], r[C.PRODUCER_EPOCH], r[C.BASE_SEQUENCE], r[C.RECORD_COUNT]) == (33, 2, 7, 1)
    assert r[C.CRC] == S.crc32c(v2[21:])
    r = rows[1]
    assert list(r) == [len(v2), len(m0), 50, 50, 0, 0, zlib.crc32(m0[16:]), -1, -1, -1, -1, -1, -1, 1]
    r = rows[2]
    assert (r[C.MAGIC], r[C.ATTRIBUTES], r[C.FIRST_TIMESTAMP], r[C.MAX_TIMESTAMP], r[C.RECORD_COUNT]) == (1, 8, 77, 77, 1)
    r = rows[3]
    assert (r[C.BASE_OFFSET], r[C.LAST_OFFSET], r[C.RECORD_COUNT], r[C.ATTRIBUTES] & 7) == (60, 60, -1, 1)


def test_scan_high_crc_is_unsigned():
    for _ in range(50):
        v2 = S.v2_batch([S.v2_record(0, 0, None, os.urandom(8))])
        if S.crc32c(v2[21:]) >= 2**31:
            break
    rows, _, _ = K.scan_batches(v2, 0, -1, -1, False)
    assert rows[0, C.CRC] == S.crc32c(v2[21:]) >= 2**31


def test_scan_statuses():
    good = S.v2_batch([S.v2_record(0, 0, None, b"v")])
    n = len(good)
    # partial: fewer than 12 bytes, then a length pointing past the end
    for tail in (good[:5], good[:12], good[:n - 1]):
        rows, stop, status = K.scan_batches(good + tail, 0, -1, -1, False)
        assert (len(rows), stop, status) == (1, n, C.PARTIAL)
    # zero-filled tail and small lengths
    rows, stop, status = K.scan_batches(good + b"\x00" * 100, 0, -1, -1, False)
    assert (len(rows), stop, status) == (1, n, C.CORRUPT_LENGTH)
    small = bytearray(good)
    small[8:12] = (13).to_bytes(4, "big")
    assert K.scan_batches(bytes(small), 0, -1, -1, False)[1:] == (0, C.CORRUPT_LENGTH)
    v2_too_small = bytearray(good)
    v2_too_small[8:12] = (30).to_bytes(4, "big")
    assert K.scan_batches(bytes(v2_too_small), 0, -1, -1, False)[1:] == (0, C.CORRUPT_LENGTH)
    bad_magic = bytearray(good)
    bad_magic[16] = 3
    assert K.scan_batches(bytes(bad_magic), 0, -1, -1, False)[1:] == (0, C.BAD_MAGIC)
    flipped = bytearray(good + good)
    flipped[n + 40] ^= 1
    assert K.scan_batches(bytes(flipped), 0, -1, -1, False)[1:] == (2 * n, C.OK)
    assert K.scan_batches(bytes(flipped), 0, -1, -1, True)[1:] == (n, C.CRC_MISMATCH)
    legacy = bytearray(S.legacy_message(1, b"abc"))
    legacy[-1] ^= 1
    assert K.scan_batches(bytes(legacy), 0, -1, -1, True)[1:] == (0, C.CRC_MISMATCH)
    assert K.scan_batches(b"", 0, -1, -1, True)[1:] == (0, C.OK)


def test_scan_start_end_and_max_count():
    good = S.v2_batch([S.v2_record(0, 0, None, b"v")])
    n = len(good)
    buf = b"junk" + good * 5
    rows, stop, status = K.scan_batches(buf, 4, -1, 2, True)
    assert (len(rows), stop, status) == (2, 4 + 2 * n, C.OK)
    assert list(rows[:, C.POSITION]) == [4, 4 + n]
    rows, stop, status = K.scan_batches(memoryview(buf), 4 + n, 4 + 3 * n, -1, False)
    assert (len(rows), stop, status) == (2, 4 + 3 * n, C.OK)
    rows, stop, status = K.scan_batches(bytearray(buf), 4, 4 + n + 10, -1, False)
    assert (len(rows), stop, status) == (1, 4 + n, C.PARTIAL)


# ------------------------------------------------------------------- records
def test_decode_records_v2_fields():
    recs = [S.v2_record(0, 0, b"k", b"v", [("a", b"1"), ("b", None)]),
            S.v2_record(2, -5, None, None), S.v2_record(3, 7, b"", b"")]
    buf = b"pre" + b"".join(recs)
    out = K.decode_records_v2(buf, 3, -1, 3, 100, 1000, 2000, 0)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers, r.timestamp_type) for r in out] == [
        (100, 1000, b"k", b"v", [("a", b"1"), ("b", None)], "CreateTime"),
        (102, 995, None, None, [], "CreateTime"),
        (103, 1007, b"", b"", [], "CreateTime")]
    lat = K.decode_records_v2(buf, 3, -1, 3, 100, 1000, 2000, 1)
    assert {(r.timestamp, r.timestamp_type) for r in lat} == {(2000, "LogAppendTime")}
    assert list(K.iter_records_v2(buf, 3, -1, 3, 100, 1000, 2000, 0)) == out


def test_record_type_behaviour():
    r = K.Record(5, 6, b"k", b"v", [("h", b"x")], "CreateTime")
    assert (r.offset, r.timestamp, r.key, r.value, r.headers, r.timestamp_type) == (
        5, 6, b"k", b"v", [("h", b"x")], "CreateTime")
    assert r == K.Record(5, 6, b"k", b"v", [("h", b"x")])
    assert r != K.Record(5, 6, b"k", b"w", [("h", b"x")])
    a, b = K.decode_records_v2(S.v2_record(0, 0, None, b"x") * 2, 0, -1, 2, 0, 0, 0, 0)
    a.headers.append(("x", None))
    assert b.headers == []  # a fresh list per record
    r.offset = 9
    assert r.offset == 9 and "offset=9" in repr(r)
    import pickle
    assert pickle.loads(pickle.dumps(r)) == r


@pytest.mark.parametrize("bad,reason", [
    (S.v2_record(0, 0, b"k", b"v")[:-1], "truncated"),            # record runs past the end
    (b"\x0c\x00\x00\x00\x08kv", "truncated"),                    # key runs past the record
    (b"\x80\x80\x80\x80\x80\x01\x00\x00", "varint"),               # overlong length
    (b"\x0c\x00\x00\x00\x03\x00\x00", "length"),                   # key length -2
])
def test_decode_records_v2_errors(bad, reason):
    with pytest.raises(CorruptRecordError) as e:
        K.decode_records_v2(b"xx" + bad, 2, -1, 1, 0, 0, 0, 0)
    assert e.value.reason == reason
    assert e.value.position is not None and e.value.position >= 2


def test_decode_records_v2_count_checks():
    rec = S.v2_record(0, 0, None, b"v")
    with pytest.raises(CorruptRecordError) as e:
        K.decode_records_v2(rec * 2, 0, -1, 1, 0, 0, 0, 0)
    assert e.value.reason == "count"
    with pytest.raises(CorruptRecordError):
        K.decode_records_v2(rec, 0, -1, 2, 0, 0, 0, 0)
    with pytest.raises(CorruptRecordError) as e:
        K.decode_records_v2(rec, 0, -1, 2**31 - 1, 0, 0, 0, 0)  # no huge allocation
    assert e.value.reason == "count"
    with pytest.raises(CorruptRecordError):
        list(K.iter_records_v2(rec * 2, 0, -1, 1, 0, 0, 0, 0))
    assert K.decode_records_v2(b"", 0, -1, 0, 0, 0, 0, 0) == []


def test_header_key_must_be_utf8():
    body = b"\x00\x00\x00\x01\x02v\x02\x04\xff\xfe\x01"
    rec = S.varint(len(body)) + body
    with pytest.raises(CorruptRecordError) as e:
        K.decode_records_v2(rec, 0, -1, 1, 0, 0, 0, 0)
    assert e.value.reason == "utf8"


def test_encode_records_v2_matches_hand_built_bytes():
    hs = [("a", b"1"), ("b", None)]
    got = K.encode_records_v2([0, 2, 3], [0, -5, 7], [b"k", None, bytearray(b"")],
                              [memoryview(b"v"), None, b""], [hs, None, ()])
    assert got == S.v2_record(0, 0, b"k", b"v", hs) + S.v2_record(2, -5, None, None) + \
        S.v2_record(3, 7, b"", b"")
    assert K.encode_records_v2([], [], [], [], []) == b""
    with pytest.raises(ValueError):
        K.encode_records_v2([2**31], [0], [None], [None], [None])
    with pytest.raises(ValueError):
        K.encode_records_v2([0, 1], [0], [None], [None], [None])
    with pytest.raises(TypeError):
        K.encode_records_v2([0], [0], ["str"], [None], [None])


def test_encode_decode_round_trip_random():
    rnd = random.Random(3)
    n = 300
    od = sorted(rnd.sample(range(10_000), n))
    td = [rnd.randint(-2**40, 2**40) for _ in range(n)]
    ks = [None if rnd.random() < .2 else os.urandom(rnd.randint(0, 200)) for _ in range(n)]
    vs = [None if rnd.random() < .2 else os.urandom(rnd.randint(0, 2000)) for _ in range(n)]
    hs = [[(f"h{j}é", None if rnd.random() < .3 else os.urandom(3)) for j in range(rnd.randint(0, 10))]
          for _ in range(n)]
    buf = K.encode_records_v2(od, td, ks, vs, hs)
    out = K.decode_records_v2(buf, 0, -1, n, 10, 5000, 0, 0)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == \
        [(10 + o, 5000 + t, k, v, h) for o, t, k, v, h in zip(od, td, ks, vs, hs)]


def test_decode_legacy_messages():
    m0 = S.legacy_message(5, b"v0", b"k0", magic=0)
    m1 = S.legacy_message(6, b"v1", None, magic=1, timestamp=77, attributes=0x08)
    out = K.decode_legacy_messages(m0 + m1, 0, -1, -1, -1, -1, 0, True)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in out] == [
        (5, -1, "NoTimestampType", b"k0", b"v0", []), (6, 77, "LogAppendTime", None, b"v1", [])]
    # inner set of a magic-1 wrapper at offset 20: relative offsets 0, 2, 3 -> 17, 19, 20
    inner = b"".join(S.legacy_message(o, b"x", timestamp=o) for o in (0, 2, 3))
    out = K.decode_legacy_messages(inner, 0, -1, 20, 1, 999, 0, False)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in out] == [
        (17, 0, "CreateTime"), (19, 2, "CreateTime"), (20, 3, "CreateTime")]
    out = K.decode_legacy_messages(inner, 0, -1, 20, 1, 999, 1, False)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in out] == [
        (17, 999, "LogAppendTime"), (19, 999, "LogAppendTime"), (20, 999, "LogAppendTime")]
    # magic 0 wrappers keep absolute inner offsets
    inner0 = b"".join(S.legacy_message(o, b"x", magic=0) for o in (8, 9))
    assert [r.offset for r in K.decode_legacy_messages(inner0, 0, -1, 9, 0, -1, 0, False)] == [8, 9]
    # a compressed message comes back as a tuple for the caller
    w = S.legacy_wrapper(30, inner, timestamp=5)
    (item,) = K.decode_legacy_messages(w, 0, -1, -1, -1, -1, 0, True)
    assert item[:5] == (0, 30, 1, 1, 5) and isinstance(item[5], bytes)


@pytest.mark.parametrize("cut", [5, 12, 20, 27])
def test_decode_legacy_messages_truncated(cut):
    m = S.legacy_message(5, b"value", b"key")
    with pytest.raises(CorruptRecordError) as e:
        K.decode_legacy_messages(m[:cut], 0, -1, -1, -1, -1, 0, False)
    assert e.value.position is not None


def test_decode_legacy_messages_crc():
    m = bytearray(S.legacy_message(5, b"value"))
    m[-1] ^= 0x40
    K.decode_legacy_messages(bytes(m), 0, -1, -1, -1, -1, 0, False)
    with pytest.raises(CorruptRecordError) as e:
        K.decode_legacy_messages(bytes(m), 0, -1, -1, -1, -1, 0, True)
    assert (e.value.reason, e.value.offset) == ("crc", 5)


def test_record_with_a_deleted_field_raises_not_crashes():
    r = K.Record(1, 2, b"k", b"v")
    del r.key
    with pytest.raises(AttributeError):
        r.key
    with pytest.raises(AttributeError):
        repr(r)
    r.__init__(5, key=b"x")
    assert (r.offset, r.key) == (5, b"x")


def test_decode_records_v2_as_builds_the_given_tuple_class():
    """The consumer's record path: the same fields as decode_records_v2, framed by constants."""
    import collections

    from kafkawire.records.builder import BatchBuilder
    import kafkawire

    Rec = collections.namedtuple("Rec", "topic partition offset timestamp timestamp_type key "
                                        "value headers epoch")
    b = BatchBuilder(base_offset=7)
    for i in range(5):
        b.append(None if i == 2 else b"v%d" % i, b"k" if i % 2 else None, 1000 + i,
                 [("h", b"x")] if i == 3 else None)
    batch = next(iter(kafkawire.iter_batches(b.build())))
    plain = batch.records()
    built = K.decode_records_v2_as(Rec, ("t", 3), (9,), *batch._args())
    assert [type(r) for r in built] == [Rec] * 5
    assert [tuple(r) for r in built] == [
        ("t", 3, r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers), 9)
        for r in plain]
    with pytest.raises(TypeError, match="tuple subclass"):
        K.decode_records_v2_as(list, (), (), *batch._args())
    args = list(batch._args())
    args[3] += 1   # one record more than the region holds
    with pytest.raises(CorruptRecordError):
        K.decode_records_v2_as(Rec, ("t", 3), (9,), *args)
