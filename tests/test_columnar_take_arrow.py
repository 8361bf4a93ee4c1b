"""``ColumnBuilder.take_arrow``: one Arrow batch straight from the builder's buffers.

The compiled twin hands the buffers to pyarrow through Arrow's C data interface; the
pure twin builds the same batch from numpy arrays.  Both must equal the batch that
``ColumnChunk.to_arrow`` makes from ``take()``, on every backend (the autouse
``backend`` fixture), and the batches must stay valid after the builder moves on or
is gone.
"""
from __future__ import annotations

import gc
import threading

import pytest

pa = pytest.importorskip("pyarrow")

from kafkawire import _columnar_common as CC  # noqa: E402
from kafkawire import _kernels as K  # noqa: E402
from kafkawire.records import BatchBuilder, control_batch  # noqa: E402
from kafkawire.records.columnar import (ColumnChunk, arrow_schema, constant_columns,  # noqa: E402
                                        scan_columns)

TS = 1_700_000_000_000
SCHEMA = arrow_schema(include_headers=False, with_topic=True)


def batch_bytes(n: int, start: int = 0) -> bytes:
    """``n`` records from offset ``start``: some null or empty keys, some null values."""
    b = BatchBuilder(2, "none", base_offset=start)
    for i in range(start, start + n):
        key = None if i % 5 == 0 else (b"" if i % 9 == 4 else b"k%d" % i)
        value = None if i % 7 == 0 else b"value-%d-" % i + b"x" * (i % 31)
        b.append(value, key=key, timestamp=TS + i)
    return bytes(b.build())


def builder(max_records: int = 10_000, include_headers: bool = False):
    return K.ColumnBuilder(include_headers, max_records, CC.MAX_CHUNK_BYTES, None, None)


def reference(data: bytes, topic: str, partition: int):
    b = builder()
    scan_columns(b, data)
    return ColumnChunk(b.take()).to_arrow(False, topic, partition)


def take(b, topic: str = "events", partition: int = 3):
    return b.take_arrow(SCHEMA, *constant_columns(topic, partition, len(b)))


def test_equals_the_chunk_path_with_nulls_and_empty_values():
    data = batch_bytes(500) + batch_bytes(300, start=500)
    b = builder()
    scan_columns(b, data)
    got = take(b)
    got.validate(full=True)
    assert got.schema.equals(SCHEMA)
    assert got.equals(reference(data, "events", 3))
    assert got.column("key").null_count == 160 and got.column("value").null_count == 115
    assert got.column("timestamp")[7].value == (TS + 7) * 1000    # microseconds
    assert len(b) == 0


def test_builder_goes_on_and_batches_outlive_it():
    first, second = batch_bytes(40), batch_bytes(25, start=40)
    b = builder()
    scan_columns(b, first)
    one = take(b, "a", 0)
    scan_columns(b, second)
    two = take(b, "b", 1)
    del b
    gc.collect()
    assert one.equals(reference(first, "a", 0)) and two.equals(reference(second, "b", 1))
    assert one.column("offset").to_pylist() == list(range(40))
    assert two.column("offset").to_pylist() == list(range(40, 65))


def test_no_nulls_means_no_validity_bitmap():
    b = BatchBuilder(2, "none")
    for i in range(10):
        b.append(b"v%d" % i, key=b"k%d" % i, timestamp=TS)
    bld = builder()
    scan_columns(bld, bytes(b.build()))
    got = take(bld)
    assert got.column("key").null_count == 0 and got.column("value").null_count == 0
    got.validate(full=True)


def test_empty_builder_and_control_records_only():
    got = take(builder())
    assert got.num_rows == 0 and got.schema.equals(SCHEMA)
    got.validate(full=True)
    b = builder()
    scan_columns(b, bytes(control_batch("commit", producer_id=7, producer_epoch=0)))
    got = take(b)
    assert got.num_rows == 0
    got.validate(full=True)


def test_several_partitions_in_one_batch():
    data = batch_bytes(30)
    b = builder()
    scan_columns(b, data)
    topic = pa.array(["t"] * 10 + ["u"] * 20)
    partition = pa.array([0] * 10 + [4] * 20, pa.int32())
    got = b.take_arrow(SCHEMA, topic, partition)
    got.validate(full=True)
    assert got.column("topic").to_pylist() == ["t"] * 10 + ["u"] * 20
    assert got.column("partition").to_pylist() == [0] * 10 + [4] * 20
    assert got.column("value").equals(reference(data, "t", 0).column("value"))


def test_a_full_builder_hands_out_its_limit():
    data = batch_bytes(100)
    b = builder(max_records=64)
    scan_columns(b, data)
    got = take(b)
    assert got.num_rows == 64 and got.column("offset").to_pylist() == list(range(64))


def test_batches_dropped_on_other_threads():
    # The compiled twin's release callback runs wherever pyarrow drops the last buffer.
    b = builder()
    batches = []
    for k in range(8):
        scan_columns(b, batch_bytes(50, start=50 * k))
        batches.append(take(b))
    cols = [batch.column("value") for batch in batches]
    threads = [threading.Thread(target=batches.pop) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    for k, col in enumerate(cols):
        assert col.equals(reference(batch_bytes(50, start=50 * k), "events", 3).column("value"))


def test_refuses_headers_and_wrong_lengths():
    with pytest.raises(ValueError, match="without headers"):
        take(builder(include_headers=True))
    b = builder()
    scan_columns(b, batch_bytes(5))
    with pytest.raises(ValueError, match="5 rows"):
        b.take_arrow(SCHEMA, *constant_columns("t", 0, 4))
    assert len(b) == 5          # nothing was taken
    assert take(b).num_rows == 5


def test_a_schema_that_does_not_fit_fails_and_leaves_the_builder_empty():
    b = builder()
    scan_columns(b, batch_bytes(5))
    with pytest.raises((ValueError, TypeError, pa.ArrowException)):
        b.take_arrow(arrow_schema(include_headers=True, with_topic=True),
                     *constant_columns("t", 0, 5))
    assert len(b) == 0
    scan_columns(b, batch_bytes(3))
    assert take(b).num_rows == 3
