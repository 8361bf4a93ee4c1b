"""RecordBatch.validate() and the validate_records_v2 kernel: the same verdict, error
positions and reasons as decoding every record, on both backends, without records."""
from __future__ import annotations

import random

import pytest

from kafkawire import _kernels as K
from kafkawire.errors import CorruptRecordError
from kafkawire.records.batch import RecordBatch
from kafkawire.records.builder import BatchBuilder


def _region(n=12, seed=1):
    rnd = random.Random(seed)
    keys = [None if i % 5 == 0 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(9)))
            for i in range(n)]
    values = [None if i % 7 == 3 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
              for i in range(n)]
    headers = [[("h%d" % j, None if j == 1 else b"v" * j) for j in range(i % 3)] for i in range(n)]
    return K.encode_records_v2(list(range(n)), [i * 300 for i in range(n)], keys, values,
                               headers)


def _outcome(fn):
    try:
        return ("ok", fn())
    except CorruptRecordError as exc:
        return ("error", exc.position, exc.offset, exc.reason)


def _decode_verdict(buf, count, base, last):
    try:
        recs = K.decode_records_v2(buf, 0, len(buf), count, base, 1000, 9000, 0)
    except CorruptRecordError as exc:
        return ("error", exc.position, exc.offset, exc.reason)
    outside = [r.offset for r in recs if not base <= r.offset <= last]
    return ("ok", outside[0] if outside else None)


def test_validate_records_agrees_with_decoding_on_damaged_regions(backend):
    region = _region()
    rnd = random.Random(7)
    cases = [(region, 12), (region, 11), (region, 13), (region + b"\0", 12), (region[:-1], 12)]
    for _ in range(400):
        b = bytearray(region)
        for _ in range(rnd.randrange(1, 4)):
            b[rnd.randrange(len(b))] = rnd.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rnd.randrange(256)])
        cases.append((bytes(b), 12))
    for buf, count in cases:
        for base, last in ((100, 111), (100, 105)):
            got = _outcome(lambda: K.validate_records_v2(buf, 0, len(buf), count, base, last))
            assert got == _decode_verdict(buf, count, base, last), (buf.hex(), count)


def test_validate_records_twins_agree():
    if not K.fast_available():
        pytest.skip("compiled backend not built")
    fast, pure = K._load("fast")["records"], K._load("pure")["records"]
    region = _region(20, seed=3)
    rnd = random.Random(11)
    for _ in range(600):
        b = bytearray(region)
        b[rnd.randrange(len(b))] = rnd.randrange(256)
        buf = bytes(b)
        assert (_outcome(lambda: fast.validate_records_v2(buf, 0, len(buf), 20, 0, 19))
                == _outcome(lambda: pure.validate_records_v2(buf, 0, len(buf), 20, 0, 19)))


def test_validate_records_bad_utf8_header_key_and_on_error(backend):
    buf = K.encode_records_v2([0], [0], [b"k"], [b"v"], [[(b"\xff\xfe", b"x")]])
    with pytest.raises(CorruptRecordError) as ei:
        K.validate_records_v2(buf, 0, len(buf), 1, 5, 5)
    assert ei.value.reason == "utf8" and ei.value.offset == 5
    with pytest.raises(KeyError):
        K.validate_records_v2(buf, 0, len(buf), 1, 5, 5, lambda exc: KeyError(exc.position))


def test_batch_validate_reports_a_record_outside_the_batch_range(backend):
    bb = BatchBuilder(base_offset=10)
    for i in range(4):
        bb.append(b"v%d" % i, key=b"k", headers=[("a", b"b")])
    data = bytearray(bb.build())
    RecordBatch.from_buffer(bytes(data)).validate()
    # lastOffsetDelta 3 -> 1, with the CRC recomputed: records 12 and 13 lie outside
    data[23:27] = (1).to_bytes(4, "big")
    data[17:21] = K.crc32c(bytes(data), 21, len(data)).to_bytes(4, "big")
    b = RecordBatch.from_buffer(bytes(data), base_position=1000)
    with pytest.raises(CorruptRecordError) as ei:
        b.validate()
    assert (ei.value.reason, ei.value.offset, ei.value.position) == ("offset", 12, 1000)
    assert not b.is_valid()


def test_a_last_offset_past_int64_wraps_as_in_java_and_is_refused(backend):
    top = (1 << 63) - 1
    bb = BatchBuilder(base_offset=top - 1)
    for i in range(4):                 # lastOffsetDelta 3: base + 3 is past the largest long
        bb.append(b"v%d" % i)
    data = bb.build()
    b = RecordBatch.from_buffer(data)
    assert b.last_offset == top - 1 + 3 - (1 << 64)      # a long's wrap, on both backends
    with pytest.raises(CorruptRecordError) as ei:
        b.validate()
    assert ei.value.reason == "offset"


def test_batch_validate_relocates_a_record_error(backend):
    bb = BatchBuilder(base_offset=0)
    for i in range(3):
        bb.append(b"value-%d" % i, key=b"key")
    data = bytearray(bb.build())
    data[61] = 0x7F   # the first record's length: runs past the batch
    data[17:21] = K.crc32c(bytes(data), 21, len(data)).to_bytes(4, "big")
    b = RecordBatch.from_buffer(bytes(data), base_position=500)
    with pytest.raises(CorruptRecordError) as ei:
        b.validate()
    with pytest.raises(CorruptRecordError) as ed:
        b.records()
    assert (ei.value.position, ei.value.reason, str(ei.value)) == \
        (ed.value.position, ed.value.reason, str(ed.value))
    assert ei.value.position == 561
