"""Decoding batches through the public API (iter_batches, RecordBatch, LegacyBatch)."""
from __future__ import annotations

import gzip
import mmap
import os
import struct

import pytest

import kafkawire
from kafkawire.errors import CorruptRecordError, KafkaWireError
from kafkawire.records import LegacyBatch, RecordBatch

from fuzz import samples as S


def one(data, **kw):
    it = kafkawire.iter_batches(data, **kw)
    (b,) = list(it)
    return b


def fields(r):
    return (r.offset, r.timestamp, r.key, r.value, r.headers, r.timestamp_type)


# ------------------------------------------------------------------ v2 header
def test_v2_every_header_field():
    recs = [S.v2_record(0, 0, b"k", b"v", [("h", b"1")]), S.v2_record(5, 3, None, None)]
    data = S.v2_batch(recs, base_offset=1000, last_offset_delta=7, attributes=0x10,
                      base_timestamp=50, max_timestamp=53, producer_id=4242, producer_epoch=3,
                      base_sequence=17, partition_leader_epoch=6)
    b = one(data, base_position=4096)
    assert isinstance(b, RecordBatch)
    assert (b.base_offset, b.last_offset, b.magic, b.compression, b.timestamp_type) == (
        1000, 1007, 2, "none", "CreateTime")
    assert (b.first_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch) == (50, 53, 4242, 3)
    assert (b.base_sequence, b.last_sequence, b.partition_leader_epoch) == (17, 24, 6)
    assert (b.is_transactional, b.is_control, b.delete_horizon, b.record_count) == (True, False, None, 2)
    assert (b.crc, b.size, b.position, b.attributes) == (S.crc32c(data[21:]), len(data), 4096, 0x10)
    assert (b.control_type, b.coordinator_epoch) == (None, None)
    assert bytes(b.raw) == data
    assert b.compute_crc() == b.crc
    b.validate()
    assert [fields(r) for r in b] == [(1000, 50, b"k", b"v", [("h", b"1")], "CreateTime"),
                                      (1005, 53, None, None, [], "CreateTime")]
    assert b.records() == list(b)


def test_last_sequence_wraps_like_kafka():
    data = S.v2_batch([S.v2_record(0, 0, None, b"v")] * 1, last_offset_delta=4,
                      base_sequence=2**31 - 2, producer_id=1, producer_epoch=0)
    assert one(data).last_sequence == 2
    assert one(S.v2_batch([S.v2_record(0, 0, None, b"v")])).last_sequence == -1


def test_log_append_time_every_record_reports_max_timestamp():
    recs = [S.v2_record(i, i * 10, None, b"v") for i in range(3)]
    b = one(S.v2_batch(recs, attributes=0x08, base_timestamp=100, max_timestamp=777))
    assert b.timestamp_type == "LogAppendTime"
    assert [(r.timestamp, r.timestamp_type) for r in b] == [(777, "LogAppendTime")] * 3


def test_delete_horizon_and_negative_deltas():
    recs = [S.v2_record(0, -500, b"k", None), S.v2_record(1, -20, b"k2", b"v")]
    b = one(S.v2_batch(recs, attributes=0x40, base_timestamp=10_000, max_timestamp=9_980))
    assert b.delete_horizon == 10_000 and b.has_delete_horizon
    assert [r.timestamp for r in b] == [9_500, 9_980]


def test_empty_batch_left_by_compaction():
    data = S.v2_batch([], base_offset=50, last_offset_delta=9, base_timestamp=-1,
                      max_timestamp=-1, producer_id=3, producer_epoch=1, base_sequence=0)
    b = one(data)
    assert (b.record_count, b.base_offset, b.last_offset, b.first_timestamp) == (0, 50, 59, -1)
    assert list(b) == [] and b.records() == []
    b.validate()


def test_compaction_gaps_keep_offsets():
    recs = [S.v2_record(d, 0, b"k%d" % d, b"v") for d in (0, 3, 4)]
    b = one(S.v2_batch(recs, base_offset=10, last_offset_delta=9))
    assert [r.offset for r in b] == [10, 13, 14] and b.last_offset == 19
    b.validate()


@pytest.mark.parametrize("commit", [True, False])
def test_control_batches(commit):
    b = one(S.v2_batch([S.control_record(commit, 42)], attributes=0x30, producer_id=9,
                       producer_epoch=2))
    assert b.is_control and b.is_transactional
    assert b.control_type == ("commit" if commit else "abort")
    assert b.coordinator_epoch == 42
    b.validate()


def test_compressed_v2_batch_gzip_hand_built():
    recs = [S.v2_record(i, i, b"key", b"value-%d" % i) for i in range(20)]
    data = S.v2_batch([], attributes=0x01, payload=gzip.compress(b"".join(recs)), count=20,
                      last_offset_delta=19, base_offset=7)
    b = one(data)
    assert b.compression == "gzip" and b.record_count == 20
    assert [(r.offset, r.value) for r in b] == [(7 + i, b"value-%d" % i) for i in range(20)]
    b.validate()


# ------------------------------------------------------------------- builder
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _builder():
    return pytest.importorskip("kafkawire.records.builder")


@pytest.mark.parametrize("codec", CODECS)
def test_builder_batches_decode_field_for_field(codec):
    B = _builder()
    bb = B.BatchBuilder(2, codec, base_offset=100, producer_id=5, producer_epoch=1,
                        base_sequence=0, is_transactional=True, partition_leader_epoch=3)
    expect = []
    for i in range(50):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else os.urandom(i * 3)
        hs = [("h%d" % j, b"x" * j) for j in range(i % 4)]
        off = bb.append(value, key=key, timestamp=1_000 + i, headers=hs)
        expect.append((off, 1_000 + i, key, value, hs, "CreateTime"))
    data = bb.build()
    b = one(data)
    assert (b.compression, b.record_count, b.base_offset, b.last_offset) == (codec, 50, 100, 149)
    assert (b.producer_id, b.producer_epoch, b.is_transactional, b.partition_leader_epoch) == (5, 1, True, 3)
    assert [fields(r) for r in b] == expect
    b.validate()


@pytest.mark.parametrize("magic,codec", [(0, "none"), (1, "none"), (0, "gzip"), (1, "gzip"),
                                         (1, "snappy"), (0, "lz4"), (1, "lz4")])
def test_builder_legacy_message_sets(magic, codec):
    B = _builder()
    bb = B.BatchBuilder(magic, codec, base_offset=40)
    for i in range(5):
        bb.append(b"v%d" % i, key=b"k", timestamp=500 + i)
    batches = list(kafkawire.iter_batches(bb.build()))
    assert all(isinstance(b, LegacyBatch) and b.magic == magic for b in batches)
    recs = [r for b in batches for r in b]
    assert [(r.offset, r.value, r.key) for r in recs] == [(40 + i, b"v%d" % i, b"k") for i in range(5)]
    if magic == 1:
        assert [r.timestamp for r in recs] == [500 + i for i in range(5)]
    else:
        assert {r.timestamp for r in recs} == {-1}
    for b in batches:
        b.validate()
    if codec != "none":
        (w,) = kafkawire.iter_batches(bb.build())
        assert (w.compression, w.last_offset, w.record_count) == (codec, 44, None)
        assert w.base_offset == 40 and w.record_count == 5


def test_builder_log_append_time_and_delete_horizon():
    B = _builder()
    bb = B.BatchBuilder(2, "none", timestamp_type="LogAppendTime", log_append_time=9_999)
    bb.append(b"a", timestamp=1)
    bb.append(b"b", timestamp=2)
    b = one(bb.build())
    assert [(r.timestamp, r.timestamp_type) for r in b] == [(9_999, "LogAppendTime")] * 2
    bb = B.BatchBuilder(2, "none", delete_horizon=50_000)
    bb.append(None, key=b"k", timestamp=10_000)
    b = one(bb.build())
    assert b.delete_horizon == 50_000 and [r.timestamp for r in b] == [10_000]


def test_builder_control_batch():
    B = _builder()
    data = B.control_batch("abort", base_offset=77, producer_id=4, producer_epoch=2,
                           coordinator_epoch=8)
    b = one(data)
    assert (b.is_control, b.control_type, b.coordinator_epoch, b.base_offset) == (True, "abort", 8, 77)


# -------------------------------------------------------------------- legacy
def test_legacy_plain_messages():
    data = S.legacy_message(7, b"hello", b"k", magic=0) + \
        S.legacy_message(8, b"world", None, magic=1, timestamp=1234, attributes=0x08)
    b0, b1 = kafkawire.iter_batches(data)
    assert (b0.magic, b0.base_offset, b0.last_offset, b0.timestamp_type, b0.max_timestamp) == (
        0, 7, 7, "NoTimestampType", -1)
    assert (b1.magic, b1.base_offset, b1.timestamp_type, b1.max_timestamp, b1.record_count) == (
        1, 8, "LogAppendTime", 1234, 1)
    assert [fields(r) for r in b0] == [(7, -1, b"k", b"hello", [], "NoTimestampType")]
    assert [fields(r) for r in b1] == [(8, 1234, None, b"world", [], "LogAppendTime")]
    assert (b1.producer_id, b1.is_control, b1.delete_horizon, b1.control_type) == (-1, False, None, None)
    assert b0.compute_crc() == b0.crc
    b0.validate()
    b1.validate()


def test_legacy_magic1_wrapper_relative_offsets_with_gaps_and_log_append_time():
    inner = b"".join(S.legacy_message(o, b"v%d" % o, timestamp=100 + o) for o in (0, 2, 5))
    w = one(S.legacy_wrapper(25, inner, timestamp=999, log_append_time=True))
    assert (w.last_offset, w.compression, w.timestamp_type, w.record_count) == (25, "gzip", "LogAppendTime", None)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in w] == [
        (20, 999, "LogAppendTime"), (22, 999, "LogAppendTime"), (25, 999, "LogAppendTime")]
    assert w.base_offset == 20 and w.record_count == 3
    w.validate()
    create = one(S.legacy_wrapper(25, inner, timestamp=999))
    assert [(r.timestamp, r.timestamp_type) for r in create] == [(100, "CreateTime"), (102, "CreateTime"), (105, "CreateTime")]


def test_legacy_magic0_wrapper_absolute_offsets():
    inner = b"".join(S.legacy_message(o, b"x", magic=0) for o in (10, 11, 12))
    w = one(S.legacy_wrapper(12, inner, magic=0))
    assert [r.offset for r in w] == [10, 11, 12] and w.base_offset == 10


def test_legacy_nested_wrappers_are_refused():
    # Kafka: "Inner messages must not be compressed" (tests/test_records_legacy_rules.py
    # checks this against Kafka's own reader)
    deepest = S.legacy_message(0, b"a") + S.legacy_message(1, b"b")
    middle = S.legacy_wrapper(1, deepest) + S.legacy_message(2, b"c")
    w = one(S.legacy_wrapper(9, middle))
    with pytest.raises(CorruptRecordError) as e:
        list(w)
    assert e.value.reason == "compression"


def test_legacy_inner_garbage_is_corrupt_with_position_and_offset():
    inner = S.legacy_message(0, b"abc") + S.legacy_message(1, b"def")
    w = S.legacy_wrapper(1, inner[:-3])
    b = one(b"\x00" * 0 + w, base_position=1000)
    with pytest.raises(CorruptRecordError) as e:
        list(b)
    assert e.value.position == 1000 and e.value.reason == "truncated"
    bad = S.legacy_message(3, b"not gzip", attributes=1)
    with pytest.raises(CorruptRecordError) as e:
        one(bad).records()
    assert e.value.reason == "compression" and e.value.offset == 3


def test_legacy_wrapper_with_null_value():
    w = S.legacy_message(3, None, attributes=1)
    with pytest.raises(CorruptRecordError):
        one(w).records()


def test_legacy_validate_catches_inner_crc():
    inner = bytearray(S.legacy_message(0, b"abc"))
    inner[-1] ^= 1
    b = one(S.legacy_wrapper(0, bytes(inner)))
    assert [r.value for r in b] == [b"abb"]
    with pytest.raises(CorruptRecordError) as e:
        b.validate()
    assert e.value.reason == "crc"


# --------------------------------------------------------------- iteration
def test_partial_tail_ends_cleanly_and_is_reported():
    good = S.v2_batch([S.v2_record(0, 0, None, b"v")])
    for cut in (1, 11, 12, 30, len(good) - 1):
        it = kafkawire.iter_batches(good + good[:cut], base_position=100)
        assert len(list(it)) == 1
        assert it.partial_tail == 100 + len(good) and it.stop_position == 100 + len(good)
    it = kafkawire.iter_batches(good * 2)
    assert len(list(it)) == 2 and it.partial_tail is None and it.stop_position == 2 * len(good)


def test_zero_filled_tail_is_corrupt():
    good = S.v2_batch([S.v2_record(0, 0, None, b"v")])
    it = kafkawire.iter_batches(good + b"\x00" * 64, base_position=10)
    with pytest.raises(CorruptRecordError) as e:
        list(it)
    assert e.value.position == 10 + len(good) and e.value.reason == "length"
    assert "record size 0 smaller than minimum record overhead" in str(e.value)


@pytest.mark.parametrize("length", [1, 13, 20, 48])
def test_small_length_is_corrupt(length):
    bad = bytearray(S.v2_batch([S.v2_record(0, 0, None, b"v")]))
    bad[8:12] = struct.pack(">i", length)
    with pytest.raises(CorruptRecordError) as e:
        list(kafkawire.iter_batches(bytes(bad)))
    assert e.value.position == 0 and e.value.reason == "length"


def test_bad_magic_and_crc():
    good = S.v2_batch([S.v2_record(0, 0, None, b"v")])
    bad = bytearray(good)
    bad[16] = 7
    with pytest.raises(CorruptRecordError) as e:
        list(kafkawire.iter_batches(good + bytes(bad)))
    assert (e.value.position, e.value.reason) == (len(good), "magic")
    flipped = bytearray(good)
    flipped[-1] ^= 1
    assert len(list(kafkawire.iter_batches(bytes(flipped)))) == 1
    with pytest.raises(CorruptRecordError) as e:
        list(kafkawire.iter_batches(bytes(flipped), verify_crc=True))
    assert e.value.reason == "crc"
    with pytest.raises(CorruptRecordError) as e:
        one(bytes(flipped)).validate()
    assert e.value.reason == "crc"
    assert not one(bytes(flipped)).is_valid()


def test_corrupt_record_inside_batch_names_position_and_offset():
    recs = [S.v2_record(0, 0, None, b"v"), S.v2_record(1, 0, b"k", b"w")]
    data = bytearray(S.v2_batch(recs, base_offset=500))
    pos = 61 + len(recs[0]) + 4  # the second record's key length
    data[pos] = 0x7E  # key length 63: past the record end
    b = one(bytes(data), base_position=2000)
    with pytest.raises(CorruptRecordError) as e:
        list(b)
    assert 2000 + pos <= e.value.position <= 2000 + pos + 1 and e.value.offset == 501
    assert e.value.reason == "truncated"
    with pytest.raises(CorruptRecordError):
        b.records()


def test_buffer_types_start_end_and_many_batches(tmp_path):
    batches = [S.v2_batch([S.v2_record(0, 0, None, b"v%d" % i)], base_offset=i) for i in range(3000)]
    data = b"".join(batches)
    p = tmp_path / "seg.log"
    p.write_bytes(b"HEAD" + data)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for wrap in (lambda m: m, memoryview):
            buf = wrap(mm)
            got = [(b.base_offset, b.position) for b in kafkawire.iter_batches(buf, start=4)]
            assert len(got) == 3000 and got[0] == (0, 4) and got[-1][0] == 2999
            del buf
        assert [r.value for b in kafkawire.iter_batches(mm, start=4) for r in b][-1] == b"v2999"
    n = len(batches[0])
    it = kafkawire.iter_batches(bytearray(data), start=n, end=3 * n)
    assert [b.base_offset for b in it] == [1, 2] and it.stop_position == 3 * n


def test_decompression_is_bounded():
    recs = [S.v2_record(0, 0, None, b"\x00" * 100_000)]
    data = S.v2_batch([], attributes=1, payload=gzip.compress(b"".join(recs)), count=1)
    b = one(data, max_decompressed_size=10_000)
    with pytest.raises(KafkaWireError):
        list(b)
    assert len(one(data).records()[0].value) == 100_000


def test_unknown_codec_is_corrupt():
    data = S.v2_batch([S.v2_record(0, 0, None, b"v")], attributes=0x06)
    with pytest.raises(CorruptRecordError) as e:
        one(data).records()
    assert e.value.reason == "attributes"


def test_public_names():
    assert kafkawire.iter_batches is kafkawire.records.iter_batches
    r = one(S.v2_batch([S.v2_record(0, 0, None, b"v")])).records()[0]
    assert isinstance(r, kafkawire.Record)
