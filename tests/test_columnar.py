"""Columnar decoding equals the record-object path, chunks stay bounded, Arrow is zero-copy.

Every test runs on both kernel backends (the autouse ``backend`` fixture);
the reference is ``kafkawire.iter_batches`` → ``Record`` on the pure backend.
"""
from __future__ import annotations

import numpy as np
import pytest

import kafkawire
from kafkawire import compression
from kafkawire.errors import CorruptRecordError, KafkaWireError
from kafkawire.records import BatchBuilder, control_batch
from kafkawire.records.columnar import arrow_schema, decode_columns, iter_column_chunks, to_arrow

from columnar_support import records_of, rows_of

TS = 1_700_000_000_000
CODECS = [c for c in ("none", "gzip", "snappy", "lz4", "zstd") if compression.available(c)]


def payload(i: int):
    key = None if i % 7 == 3 else (b"" if i % 11 == 5 else b"key-%d" % i)
    value = None if i % 5 == 4 else (b"" if i % 13 == 6 else b"value-%d-" % i + b"x" * (i % 37))
    return key, value


def make_log(magic: int, codec: str, *, n_batches=5, per_batch=23, headers=False,
             timestamp_type="CreateTime", gaps=False, start=0) -> bytes:
    out = []
    offset = start
    for b in range(n_batches):
        kw = {}
        if timestamp_type == "LogAppendTime":
            kw["log_append_time"] = TS + 10_000 + b
        builder = BatchBuilder(magic, codec, base_offset=offset, timestamp_type=timestamp_type, **kw)
        for i in range(per_batch):
            key, value = payload(offset + i)
            hs = ()
            if headers and i % 3:
                hs = [("h%d" % j, None if (i + j) % 4 == 0 else b"hv%d" % j) for j in range(i % 4)]
            off = None
            if gaps and i and i % 4 == 0:
                off = builder.last_offset + 3
            builder.append(value, key=key, timestamp=TS + offset + i if magic else None,
                           headers=hs, offset=off)
        offset = builder.last_offset + 1
        out.append(builder.build())
    return b"".join(out)


MAGIC_CODEC = [(m, c) for m in (0, 1, 2) for c in CODECS if not (c == "zstd" and m < 2)]


@pytest.mark.parametrize("magic,codec", MAGIC_CODEC)
def test_columns_equal_record_objects(magic, codec):
    data = make_log(magic, codec, gaps=magic != 0 or codec == "none")
    chunk = decode_columns(data, include_headers=True)
    assert rows_of(chunk) == records_of(data)
    assert chunk.next_offset == records_of(data)[-1][0] + 1
    assert chunk.start_position == 0 and chunk.end_position == len(data)


@pytest.mark.parametrize("codec", CODECS)
def test_headers_and_log_append_time_v2(codec):
    data = make_log(2, codec, headers=True, timestamp_type="LogAppendTime")
    chunk = decode_columns(data, include_headers=True)
    assert rows_of(chunk) == records_of(data)
    assert set(chunk.timestamp_type.tolist()) == {1}
    # Spark's Kafka source shows null (not []) for a record without headers.
    assert chunk.header_valid.tolist() == [bool(h) for h in chunk.headers()]


@pytest.mark.parametrize("codec", [c for c in CODECS if c != "zstd"])
def test_legacy_log_append_time_wrapper_wins(codec):
    data = make_log(1, codec, timestamp_type="LogAppendTime")
    chunk = decode_columns(data)
    assert rows_of(chunk) == records_of(data)
    assert set(chunk.timestamp_type.tolist()) == {1}


def test_without_headers_columns_are_none():
    data = make_log(2, "none", headers=True)
    chunk = decode_columns(data)
    assert chunk.header_offsets is None and not chunk.has_headers
    assert [r[:5] for r in rows_of(chunk)] == [r[:5] for r in records_of(data)]


def test_control_batches_are_excluded_but_reported():
    b = BatchBuilder(2, "none", base_offset=0, producer_id=7, producer_epoch=0, is_transactional=True)
    for i in range(3):
        b.append(b"t%d" % i, timestamp=TS + i)
    data = b.build() + control_batch("commit", base_offset=3, producer_id=7, producer_epoch=0,
                                     timestamp=TS + 9)
    b2 = BatchBuilder(2, "gzip", base_offset=4, producer_id=8, producer_epoch=0, is_transactional=True)
    b2.append(b"u", timestamp=TS + 10)
    data += b2.build() + control_batch("abort", base_offset=5, producer_id=8, producer_epoch=0,
                                       timestamp=TS + 11)
    chunk = decode_columns(data)
    assert chunk.offset.tolist() == [0, 1, 2, 4]
    assert chunk.is_transactional.all()
    assert chunk.producer_id.tolist() == [7, 7, 7, 8]
    assert chunk.control_offset.tolist() == [3, 5]
    assert chunk.control_type.tolist() == [1, 0]
    assert chunk.control_producer_id.tolist() == [7, 8]
    assert chunk.control_timestamp.tolist() == [TS + 9, TS + 11]
    assert chunk.next_offset == 6
    assert rows_of(chunk) == records_of(data)


def test_control_only_range_still_yields_its_markers():
    data = control_batch("commit", base_offset=3, producer_id=7, producer_epoch=0, timestamp=TS)
    chunks = list(iter_column_chunks(data))
    assert len(chunks) == 1 and len(chunks[0]) == 0
    assert chunks[0].control_offset.tolist() == [3]


def test_empty_and_compacted_batches():
    b = BatchBuilder(2, "none", base_offset=10)
    empty = b.build(last_offset=14)
    b = BatchBuilder(2, "none", base_offset=15)
    b.append(b"a", timestamp=TS)
    thinned = b.build(last_offset=20)
    data = empty + thinned
    chunk = decode_columns(data)
    assert chunk.offset.tolist() == [15]
    assert chunk.next_offset == 21
    assert decode_columns(empty).next_offset == 15 and len(decode_columns(empty)) == 0
    assert len(decode_columns(b"")) == 0 and decode_columns(b"").next_offset is None


@pytest.mark.parametrize("codec", ["none", "gzip"])
@pytest.mark.parametrize("magic", [1, 2])
@pytest.mark.parametrize("max_records,max_bytes", [(1, 1 << 20), (7, 1 << 20), (50, 1 << 20),
                                                   (1000, 40), (1000, 300), (3, 64)])
def test_chunks_are_bounded_and_concatenate_to_the_whole(magic, codec, max_records, max_bytes):
    data = make_log(magic, codec, n_batches=4, per_batch=17, headers=False)
    whole = rows_of(decode_columns(data))
    chunks = list(iter_column_chunks(data, max_records=max_records, max_bytes=max_bytes))
    got = [row for c in chunks for row in rows_of(c)]
    assert got == whole
    for c in chunks:
        assert 0 < len(c) <= max_records
        framed = len(c.key_data) + len(c.value_data)
        assert len(c) == 1 or framed <= max_bytes
    positions = [(c.start_position, c.end_position) for c in chunks]
    assert positions[0][0] == 0 and positions[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(positions, positions[1:]))
    assert chunks[-1].next_offset == whole[-1][0] + 1


def test_chunk_resumes_inside_a_batch_with_headers():
    data = make_log(2, "lz4" if "lz4" in CODECS else "none", n_batches=2, per_batch=40, headers=True)
    whole = rows_of(decode_columns(data, include_headers=True))
    got = [r for c in iter_column_chunks(data, max_records=9, include_headers=True) for r in rows_of(c)]
    assert got == whole


@pytest.mark.parametrize("magic,codec", [(2, "none"), (2, "gzip"), (1, "none"), (1, "snappy"),
                                         (0, "none")])
@pytest.mark.parametrize("lo,hi", [(None, None), (0, 1), (5, 50), (22, 23), (40, None), (None, 30),
                                   (200, None), (50, 50)])
def test_offset_bounds(magic, codec, lo, hi):
    data = make_log(magic, codec, n_batches=4, per_batch=17, gaps=magic > 0)
    want = [r for r in records_of(data) if (lo is None or r[0] >= lo) and (hi is None or r[0] < hi)]
    got = [r for c in iter_column_chunks(data, start_offset=lo, end_offset=hi, max_records=10)
           for r in rows_of(c)]
    assert got == want


def test_end_offset_stops_at_the_first_later_batch():
    data = make_log(2, "none", n_batches=4, per_batch=10)
    second = len(make_log(2, "none", n_batches=1, per_batch=10))
    it = iter_column_chunks(data, end_offset=10, base_position=1000)
    assert sum(len(c) for c in it) == 10
    assert it.stop_position == 1000 + second and it.partial_tail is None


def test_range_and_base_position():
    one = make_log(2, "none", n_batches=1, per_batch=5)
    data = one + make_log(2, "none", n_batches=1, per_batch=5, start=5)
    chunk = decode_columns(data, start=len(one), base_position=4096)
    assert chunk.offset.tolist() == list(range(5, 10))
    assert chunk.start_position == 4096 + len(one) and chunk.end_position == 4096 + len(data)
    assert decode_columns(memoryview(data)[:len(one)]).offset.tolist() == list(range(5))
    assert decode_columns(bytearray(data), end=len(one)).offset.tolist() == list(range(5))


def test_partial_tail_ends_cleanly():
    data = make_log(2, "none", n_batches=3, per_batch=5)
    cut = data[:-7]
    it = iter_column_chunks(cut, base_position=100)
    assert sum(len(c) for c in it) == 10
    first_two = len(make_log(2, "none", n_batches=2, per_batch=5))
    assert it.partial_tail == 100 + first_two == it.stop_position
    it = iter_column_chunks(data[:first_two + 5])
    list(it)
    assert it.partial_tail == first_two


def test_zero_filled_tail_is_corrupt_with_position():
    data = make_log(2, "none", n_batches=2, per_batch=5)
    with pytest.raises(CorruptRecordError) as info:
        list(iter_column_chunks(data + bytes(64), base_position=10))
    assert info.value.position == 10 + len(data)


def test_corrupt_record_names_position_and_offset():
    b = BatchBuilder(2, "none", base_offset=40)
    b.append(b"v" * 20, key=b"k", timestamp=TS)
    b.append(b"w" * 20, key=b"k", timestamp=TS)
    raw = bytearray(b.build())
    # First record: length @61, attributes @62, timestamp delta @63, offset delta @64, key length @65.
    raw[65] = 0x7E  # zigzag 63: longer than the record
    with pytest.raises(CorruptRecordError) as info:
        decode_columns(bytes(raw), base_position=500)
    assert info.value.position == 500 + 61
    assert info.value.offset == 40


def test_bad_compressed_payload_is_corrupt():
    b = BatchBuilder(2, "gzip", base_offset=0)
    b.append(b"v" * 100, timestamp=TS)
    raw = bytearray(b.build())
    raw[70:80] = b"\xff" * 10
    with pytest.raises(KafkaWireError) as info:
        decode_columns(bytes(raw), base_position=7)
    assert getattr(info.value, "position", 7) == 7


def test_decompression_is_bounded():
    b = BatchBuilder(2, "gzip", base_offset=0)
    b.append(b"\0" * 200_000, timestamp=TS)
    with pytest.raises(kafkawire.errors.RecordTooLargeError):
        decode_columns(b.build(), max_decompressed_size=10_000)


def test_filter():
    data = make_log(2, "none", headers=True, n_batches=2, per_batch=30)
    chunk = decode_columns(data, include_headers=True)
    mask = (chunk.offset % 3 == 1) | ~chunk.value_valid
    kept = chunk.filter(mask)
    assert rows_of(kept) == [r for r, m in zip(rows_of(chunk), mask) if m]
    assert len(chunk.filter(np.zeros(len(chunk), bool))) == 0
    with pytest.raises(ValueError):
        chunk.filter([True])


def test_to_numpy_has_every_column():
    chunk = decode_columns(make_log(2, "none", n_batches=1, per_batch=4))
    cols = chunk.to_numpy()
    assert cols["offset"].dtype == np.int64 and cols["key_offsets"].dtype == np.int32
    assert cols["key_valid"].dtype == np.bool_ and len(cols["key_offsets"]) == 5
    assert cols["header_offsets"] is None


def test_invalid_arguments():
    with pytest.raises(ValueError):
        iter_column_chunks(b"", max_records=0)
    with pytest.raises(ValueError):
        iter_column_chunks(b"abc", start=2, end=1)
    with pytest.raises(ValueError):
        iter_column_chunks(b"abc", end=10)


# ------------------------------------------------------------------- Arrow

pa = pytest.importorskip("pyarrow")


def _address(np_array):
    return np_array.__array_interface__["data"][0]


def test_arrow_is_zero_copy():
    data = make_log(2, "none", headers=True, n_batches=2, per_batch=20)
    chunk = decode_columns(data, include_headers=True)
    batch = chunk.to_arrow(topic="events", partition=3)
    key = batch.column("key")
    value = batch.column("value")
    assert key.buffers()[1].address == _address(chunk.key_offsets)
    assert key.buffers()[2].address == _address(chunk.key_data)
    assert value.buffers()[1].address == _address(chunk.value_offsets)
    assert value.buffers()[2].address == _address(chunk.value_data)
    assert batch.column("offset").buffers()[1].address == _address(chunk.offset)
    assert batch.column("timestampType").buffers()[1].address == _address(chunk.timestamp_type)
    headers = batch.column("headers")
    assert headers.buffers()[1].address == _address(chunk.header_offsets)
    hkey = headers.values.field("key")
    assert hkey.buffers()[2].address == _address(chunk.header_key_data)
    batch.validate(full=True)


def test_arrow_rows_and_spark_schema():
    data = make_log(2, "none", headers=True, n_batches=2, per_batch=20)
    chunk = decode_columns(data, include_headers=True)
    batch = chunk.to_arrow(topic="events", partition=3)
    assert batch.schema == arrow_schema(include_headers=True)
    assert batch.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType", "headers"]
    rows = batch.to_pylist()
    ref = records_of(data)
    assert [r["key"] for r in rows] == [r[3] for r in ref]
    assert [r["value"] for r in rows] == [r[4] for r in ref]
    assert [r["offset"] for r in rows] == [r[0] for r in ref]
    assert {r["topic"] for r in rows} == {"events"} and {r["partition"] for r in rows} == {3}
    assert [int(r["timestamp"].timestamp() * 1000) for r in rows] == [r[1] for r in ref]
    assert [r["headers"] for r in rows] == [
        [{"key": k, "value": v} for k, v in r[5]] or None for r in ref]
    plain = chunk.to_arrow(include_headers=False)
    assert plain.schema.names == ["key", "value", "offset", "timestamp", "timestampType"]


def test_arrow_schema_matches_pyspark():
    types = pytest.importorskip("pyspark.sql.types")
    from pyspark.sql.pandas.types import to_arrow_schema
    T = types
    kafka = T.StructType([
        T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()), T.StructField("timestamp", T.TimestampType()),
        T.StructField("timestampType", T.IntegerType())])
    assert to_arrow_schema(kafka, timezone="UTC").equals(arrow_schema())
    with_headers = T.StructType(kafka.fields + [T.StructField("headers", T.ArrayType(T.StructType([
        T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])))])
    assert to_arrow_schema(with_headers, timezone="UTC").equals(arrow_schema(include_headers=True))


def test_to_arrow_table_and_empty_chunks():
    data = make_log(1, "gzip", n_batches=3, per_batch=10)
    table = to_arrow(data, topic="t", partition=0, max_records=7)
    assert table.num_rows == 30 and table.column("offset").to_pylist() == list(range(30))
    empty = decode_columns(b"").to_arrow(topic="t", partition=0)
    assert empty.num_rows == 0 and empty.schema == arrow_schema()
    assert to_arrow(b"", topic="t", partition=0).num_rows == 0


def test_nulls_become_arrow_nulls():
    b = BatchBuilder(2, "none")
    b.append(None, key=None, timestamp=TS)
    b.append(b"", key=b"", timestamp=TS)
    batch = decode_columns(b.build()).to_arrow(topic="t", partition=0)
    assert batch.column("key").to_pylist() == [None, b""]
    assert batch.column("value").null_count == 1


def test_mmap_can_be_closed_after_iteration(tmp_path):
    import mmap

    path = tmp_path / "seg.log"
    path.write_bytes(make_log(2, "gzip", n_batches=2, per_batch=5))
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        it = iter_column_chunks(m)
        assert sum(len(c) for c in it) == 10
        m.close()


@pytest.mark.parametrize("codec", ["none", "zstd" if "zstd" in CODECS else "gzip"])
def test_delete_horizon_batches(codec):
    b = BatchBuilder(2, codec, base_offset=3, delete_horizon=TS + 86_400_000)
    b.append(b"a", key=b"k1", timestamp=TS)
    b.append(None, key=b"k2", timestamp=TS + 5)
    data = b.build()
    chunk = decode_columns(data)
    assert rows_of(chunk) == records_of(data)
    assert chunk.timestamp.tolist() == [TS, TS + 5]
