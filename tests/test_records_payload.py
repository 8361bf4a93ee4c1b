"""``RecordBatch.records_bytes()``: the records region, decompressed when needed."""
from __future__ import annotations

import pytest

import kafkawire
from kafkawire.errors import CorruptRecordError, RecordTooLargeError
from kafkawire.records import BatchBuilder


def _build(codec):
    b = BatchBuilder(2, codec, base_offset=7)
    for i in range(40):
        b.append(b"value %d " % i * 5, key=b"k%d" % i, timestamp=1000 + i,
                 headers=[("h", b"x")] if i % 2 else ())
    return b.build()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_records_bytes_matches_the_uncompressed_batch(codec):
    plain = next(iter(kafkawire.iter_batches(_build("none"))))
    packed = next(iter(kafkawire.iter_batches(_build(codec))))
    region = plain.records_bytes()
    assert isinstance(region, memoryview)
    assert bytes(region) == bytes(plain.raw[61:])
    assert packed.records_bytes() == bytes(region)


def test_records_bytes_is_bounded_and_checked():
    data = _build("zstd")
    batch = next(iter(kafkawire.iter_batches(data, max_decompressed_size=100)))
    with pytest.raises(RecordTooLargeError):
        batch.records_bytes()
    broken = bytearray(_build("lz4"))
    broken[70:90] = b"\xff" * 20
    batch = next(iter(kafkawire.iter_batches(bytes(broken), base_position=500)))
    with pytest.raises(CorruptRecordError) as info:
        batch.records_bytes()
    assert info.value.position == 500
