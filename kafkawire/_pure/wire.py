"""The pure twins' wire layer: a caller's buffer as flat bytes, big-endian loads, varints.

The Python side of ``kafkawire/_fast/wire.pxd``.  Kernels read buffers through
:func:`flat`, which refuses what the compiled kernels refuse (non-contiguous
views raise ``BufferError``), so both twins give the same answer or the same error.
"""
from __future__ import annotations

import struct
from typing import Tuple, Union

__all__ = ["flat", "be_i16", "be_i32", "be_i64", "read_uvarint", "zigzag", "wrap64"]

Flat = Union[bytes, bytearray, memoryview]

be_i16 = struct.Struct(">h").unpack_from
be_i32 = struct.Struct(">i").unpack_from
be_i64 = struct.Struct(">q").unpack_from


def flat(buf) -> Flat:
    """``buf`` as a one-dimensional byte sequence (itself when it already is one)."""
    t = type(buf)
    if t is bytes or t is bytearray:
        return buf
    mv = memoryview(buf)
    if not mv.c_contiguous:
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return mv if mv.ndim == 1 and mv.format == "B" else mv.cast("B")


def wrap64(v: int) -> int:
    """``v`` as a signed 64-bit integer wraps it (Kafka's long arithmetic, the kernels' int64)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def zigzag(v: int) -> int:
    """Kafka's signed varint value of the unsigned ``v``."""
    return (v >> 1) ^ -(v & 1)


def read_uvarint(buf: Flat, pos: int, end: int, max_bytes: int) -> Tuple[int, int]:
    """``(value, next_pos)`` of the unsigned varint at ``pos``; value -1 when it runs
    past ``end`` and -2 when it is longer than ``max_bytes`` (next_pos is where it stopped)."""
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            return -1, pos
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    return -2, pos
