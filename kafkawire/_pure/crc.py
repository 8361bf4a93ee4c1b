"""Checksums (pure twin of ``kafkawire/_fast/crc.pyx``).

``crc32c`` is CRC-32C (Castagnoli), the v2 batch checksum; ``crc32`` is the
zlib CRC-32 of v0/v1 messages.  Both take a buffer and a ``[start, end)``
range (``end=-1``: to the end) and an initial ``value`` to continue a running
checksum, so callers never slice (copy) the buffer.
"""
from __future__ import annotations

import zlib

__all__ = ["crc32c", "crc32", "crc32c_impl"]


def _make_table(poly: int):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_TABLE = _make_table(0x82F63B78)


def _span(buf, start: int, end: int):
    n = len(buf) if isinstance(buf, (bytes, bytearray)) else memoryview(buf).nbytes
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    return start, end


def crc32c(data, start: int = 0, end: int = -1, value: int = 0) -> int:
    """CRC-32C of ``data[start:end]``, continuing from ``value``."""
    start, end = _span(data, start, end)
    if start >= end:
        return value & 0xFFFFFFFF
    chunk = data[start:end] if isinstance(data, (bytes, bytearray)) else memoryview(data).cast("B")[start:end]
    t = _TABLE
    c = (value & 0xFFFFFFFF) ^ 0xFFFFFFFF
    for b in bytes(chunk) if not isinstance(chunk, (bytes, bytearray)) else chunk:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc32(data, start: int = 0, end: int = -1, value: int = 0) -> int:
    """zlib CRC-32 of ``data[start:end]``, continuing from ``value``."""
    start, end = _span(data, start, end)
    if start >= end:
        return value & 0xFFFFFFFF
    if start == 0 and end == len(data) and isinstance(data, (bytes, bytearray)):
        return zlib.crc32(data, value)
    return zlib.crc32(memoryview(data).cast("B")[start:end], value)


def crc32c_impl() -> str:
    """Name of the CRC-32C implementation in use."""
    return "python-table"
