"""Hostile input for the columnar decoder: truncations, flips and random bytes.

Every mutation either decodes or raises a ``kafkawire.errors`` exception (never
IndexError, MemoryError or a crash), and the fast and pure kernels agree on
the outcome: the same columns, or the same error class and position.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire import _kernels
from kafkawire.errors import KafkaWireError
from kafkawire.records import BatchBuilder, control_batch
from kafkawire.records.columnar import iter_column_chunks

from fuzz.harness import columns_outcome

TS = 1_700_000_000_000


def _corpus() -> bytes:
    parts = []
    offset = 0
    for magic, codec in ((2, "none"), (2, "gzip"), (1, "none"), (1, "gzip"), (0, "none"),
                         (2, "snappy"), (0, "gzip")):
        b = BatchBuilder(magic, codec, base_offset=offset)
        for i in range(4):
            hs = [("h", b"v" if i % 2 else None)] if magic == 2 and i else ()
            b.append(b"value-%d" % i if i != 2 else None, key=b"k%d" % i if i != 1 else None,
                     timestamp=TS + i if magic else None, headers=hs)
        offset = b.last_offset + 1
        parts.append(b.build())
    parts.append(control_batch("commit", base_offset=offset, producer_id=1, producer_epoch=0,
                               timestamp=TS))
    return b"".join(parts)


CORPUS = _corpus()


def _both(data: bytes, max_records: int = 5):
    if not _kernels.fast_available():
        pytest.skip("compiled backend not built")
    previous = _kernels.backend
    try:
        _kernels.use("fast")
        fast = columns_outcome(data, max_records)
        _kernels.use("pure")
        pure = columns_outcome(data, max_records)
    finally:
        _kernels.use(previous)
    assert fast == pure
    return fast


@pytest.mark.one_backend
def test_every_truncation():
    for cut in range(0, len(CORPUS), 3):
        _both(CORPUS[:cut])


@pytest.mark.one_backend
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_byte_flips(data):
    raw = bytearray(CORPUS)
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    _both(bytes(raw), data.draw(st.integers(1, 40)))


@pytest.mark.one_backend
@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_random_bytes(blob):
    _both(blob)
    _both(CORPUS[:61] + blob)


@pytest.mark.slow
@pytest.mark.one_backend
@settings(max_examples=20000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_byte_flips_long(data):
    raw = bytearray(CORPUS)
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    _both(bytes(raw), data.draw(st.integers(1, 40)))


def test_hostile_record_count_does_not_allocate_unbounded():
    b = BatchBuilder(2, "none")
    b.append(b"v", timestamp=TS)
    raw = bytearray(b.build())
    raw[57:61] = (0x7FFFFFFF).to_bytes(4, "big")
    with pytest.raises(KafkaWireError):
        list(iter_column_chunks(bytes(raw)))
    assert np.iinfo(np.int32).max == 0x7FFFFFFF


def _columns_error(data: bytes):
    try:
        for _ in iter_column_chunks(data, include_headers=True, max_records=100):
            pass
    except KafkaWireError as exc:
        return (type(exc).__name__, exc.position, exc.reason, getattr(exc, "offset", None))
    return None


@pytest.mark.one_backend
def test_varint_damage_in_every_record_field_reported_alike():
    """A varint of each field of a record made overlong or cut short: the twins report the
    same class, position, reason and offset (the record walker's, in both)."""
    if not _kernels.fast_available():
        pytest.skip("compiled backend not built")
    b = BatchBuilder(2, "none", base_offset=40)
    b.append(b"vv", key=b"kk", timestamp=TS, headers=[("hk", b"hv")])
    b.append(b"ww", key=b"ll", timestamp=TS + 1, headers=[("hk", b"hv")])
    batch = b.build()
    # the second record's varints: length, attrs, ts, off, klen, key, vlen, value, hcount, ...
    first_len = (batch[61] >> 1) + 1
    rec = 61 + first_len
    varints = [rec, rec + 2, rec + 3, rec + 4, rec + 7, rec + 10, rec + 11, rec + 14]
    seen = set()
    for at in varints:
        for fill in (b"\xff" * 6, b"\x80"):
            data = bytearray(batch)
            data[at:at + len(fill)] = fill[:len(data) - at]
            previous = _kernels.backend
            try:
                _kernels.use("fast")
                fast = _columns_error(bytes(data))
                _kernels.use("pure")
                pure = _columns_error(bytes(data))
            finally:
                _kernels.use(previous)
            assert fast == pure, (at, fill)
            assert fast is not None
            seen.add(fast[2])
    assert {"varint", "truncated"} <= seen
