"""Checksums (pure twin of ``kafkawire/_fast/crc.pyx``).

``crc32c`` is CRC-32C (Castagnoli), the v2 batch checksum; ``crc32`` is the
zlib CRC-32 of v0/v1 messages.  Both take a buffer and a ``[start, end)``
range (``end=-1``: to the end) and an initial ``value`` to continue a running
checksum, so callers never slice (copy) the buffer.

CRC-32C has no C implementation in the standard library, so long inputs are
folded four bytes per step with two 65536-entry tables (built with numpy on
first use, kept as compact ``array('I')`` so lookups stay in cache), short
ones and ragged ends a byte per step.
"""
from __future__ import annotations

import sys
import zlib
from array import array

from kafkawire._pure.wire import flat

__all__ = ["crc32c", "crc32", "crc32c_impl"]

_POLY = 0x82F63B78  # CRC-32C, reflected


def _make_table(poly: int):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_TABLE = _make_table(_POLY)
#: (low, high): the CRC register after 32 zero-input steps from a register holding
#: i in its low (resp. high) 16 bits; None until first needed.
_WORD_TABLES = None
#: below this many bytes the byte loop is cheaper than building/using word tables
_WORD_MIN = 64
#: words are read in native order: the fold needs little-endian 32-bit words
_LITTLE = sys.byteorder == "little" and array("I").itemsize == 4


def _word_tables():
    global _WORD_TABLES
    if _WORD_TABLES is None:
        import numpy as np
        t = np.array(_TABLE, dtype=np.uint32)
        lo = np.arange(1 << 16, dtype=np.uint32)
        hi = lo << np.uint32(16)
        for _ in range(4):
            lo = t[lo & 0xFF] ^ (lo >> np.uint32(8))
            hi = t[hi & 0xFF] ^ (hi >> np.uint32(8))
        _WORD_TABLES = (array("I", lo.tobytes()), array("I", hi.tobytes()))
    return _WORD_TABLES


def _span(buf, start: int, end: int):
    n = len(buf) if isinstance(buf, (bytes, bytearray)) else memoryview(buf).nbytes
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    return start, end


def _bytes_crc(c, data):
    t = _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c


def crc32c(data, start: int = 0, end: int = -1, value: int = 0) -> int:
    """CRC-32C of ``data[start:end]``, continuing from ``value``."""
    start, end = _span(data, start, end)
    if start >= end:
        return value & 0xFFFFFFFF
    mv = memoryview(flat(data))[start:end]
    c = (value & 0xFFFFFFFF) ^ 0xFFFFFFFF
    n = end - start
    if n < _WORD_MIN or not _LITTLE:
        return _bytes_crc(c, mv) ^ 0xFFFFFFFF
    lo, hi = _word_tables()
    words = n & ~3
    ws = array("I")
    ws.frombytes(mv[:words])
    for w in ws:
        w ^= c
        c = lo[w & 0xFFFF] ^ hi[w >> 16]
    return _bytes_crc(c, mv[words:]) ^ 0xFFFFFFFF


def crc32(data, start: int = 0, end: int = -1, value: int = 0) -> int:
    """zlib CRC-32 of ``data[start:end]``, continuing from ``value``."""
    start, end = _span(data, start, end)
    if start >= end:
        return value & 0xFFFFFFFF
    if start == 0 and end == len(data) and isinstance(data, (bytes, bytearray)):
        return zlib.crc32(data, value)
    return zlib.crc32(memoryview(flat(data))[start:end], value)


def crc32c_impl() -> str:
    """Name of the CRC-32C implementation in use."""
    return "python-words" if _LITTLE else "python-table"
