"""``encode_columns_into``: Arrow-layout columns encode exactly as ``encode_records_v2`` does.

Both backends run these; the results must match the per-record kernel byte
for byte, and hostile buffers (short, offsets out of order or past the data)
raise ``ValueError`` on both, never read outside a buffer.
"""
from __future__ import annotations

import struct

import pytest

from kafkawire import _kernels as K

pa = pytest.importorskip("pyarrow")


def _col(arr):
    if arr is None:
        return None
    validity, offsets, data = arr.buffers()
    width = 8 if pa.types.is_large_binary(arr.type) else 4
    return (validity, offsets, data if data is not None else b"", width, arr.offset)


def _encode(start, stop, timestamps, base, keys, values):
    """``encode_columns_into`` into a buffer with room to spare; the records written."""
    out = bytearray(1 << 20)
    return bytes(out[:K.encode_columns_into(out, 0, start, stop, timestamps, base, keys, values)])


def _ref(values, keys, ts, base, start, stop):
    rows = range(start, stop)
    return K.encode_records_v2([i - start for i in rows],
                               [ts[i] - base if ts is not None else 0 for i in rows],
                               [keys[i] if keys is not None else None for i in rows],
                               [values[i] for i in rows], [None] * (stop - start))


@pytest.mark.parametrize("large", [False, True])
def test_matches_the_per_record_encoder(large):
    typ = pa.large_binary() if large else pa.binary()
    values = [b"v" * (i % 200) if i % 7 else None for i in range(500)]
    keys = [b"key-%d" % i if i % 3 else None for i in range(500)]
    ts = [1_700_000_000_000 + (i * 37) % 1000 - 500 for i in range(500)]
    va, ka = pa.array(values, typ), pa.array(keys, typ)
    tsa = pa.array(ts, pa.int64())
    for start, stop in [(0, 500), (10, 20), (499, 500), (5, 5)]:
        got = _encode(start, stop, tsa.buffers()[1], ts[start] if stop > start else 0,
                      _col(ka), _col(va))
        assert got == _ref(values, keys, ts, ts[start] if stop > start else 0, start, stop)
    # sliced arrays carry an offset into their buffers
    sv, sk = va.slice(100, 50), ka.slice(100, 50)
    got = _encode(0, 50, None, 0, _col(sk), _col(sv))
    assert got == _ref(values[100:150], keys[100:150], None, 0, 0, 50)
    assert _encode(0, 3, None, 0, None, _col(va)) == \
        _ref(values, None, None, 0, 0, 3)


def test_hostile_buffers_are_refused():
    offs = struct.pack("=3i", 0, 5, 2)  # row 1 goes backwards
    with pytest.raises(ValueError, match="out of order"):
        _encode(0, 2, None, 0, None, (None, offs, b"hello", 4, 0))
    with pytest.raises(ValueError, match="past the data"):
        _encode(0, 1, None, 0, None, (None, struct.pack("=2i", 0, 99), b"hello", 4, 0))
    with pytest.raises(ValueError, match="offsets buffer"):
        _encode(0, 5, None, 0, None, (None, struct.pack("=2i", 0, 1), b"h", 4, 0))
    with pytest.raises(ValueError, match="validity"):
        _encode(0, 9, None, 0, None, (b"\xff", struct.pack("=10i", *[0] * 10), b"", 4, 0))
    with pytest.raises(ValueError, match="timestamps"):
        _encode(0, 3, struct.pack("=q", 1), 0, None, None)
    with pytest.raises(ValueError, match="varlong"):
        _encode(0, 1, struct.pack("=q", -(1 << 63)), 1, None, None)
    with pytest.raises(ValueError, match="width"):
        _encode(0, 1, None, 0, None, (None, b"\0" * 8, b"", 2, 0))
