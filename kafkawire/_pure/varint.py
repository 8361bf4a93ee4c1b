"""Varints (pure twin of ``kafkawire/_fast/varint.pyx``).

Kafka's zigzag varint (32-bit) and varlong (64-bit), as in protobuf, and the
unsigned varints of the flexible protocol versions.  Readers take a buffer and
a position and return ``(value, next_position)``; they reject encodings longer
than 5 bytes (32-bit) or 10 bytes (64-bit) with ``CorruptRecordError(reason=
"varint")`` and running off the buffer with ``reason="truncated"``.  Like
Kafka's ``ByteUtils``, bits past the 32nd/64th are dropped.  Writers return
bytes and raise ``ValueError`` for values out of range.
"""
from __future__ import annotations

from kafkawire.errors import CorruptRecordError
from kafkawire._pure.wire import flat, read_uvarint

__all__ = ["read_varint", "read_varlong", "read_unsigned_varint", "read_unsigned_varlong",
           "write_varint", "write_varlong", "write_unsigned_varint", "write_unsigned_varlong",
           "size_of_varint", "size_of_varlong", "size_of_unsigned_varint"]


def _read_unsigned(buf, pos: int, max_bytes: int):
    n = len(buf)
    if 0 <= pos < n:
        b = buf[pos]
        if b < 0x80:  # one-byte varint: most lengths and counts
            return b, pos + 1
    result, nxt = read_uvarint(buf, pos, n, max_bytes) if pos >= 0 else (-1, pos)
    if result == -1:
        raise CorruptRecordError("varint runs past the end of the data",
                                 position=pos, reason="truncated")
    if result == -2:
        raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position=pos,
                                 reason="varint")
    return result, nxt


_view = flat


def read_unsigned_varint(buf, pos: int):
    """Unsigned 32-bit varint at ``pos`` -> ``(value, next_pos)``."""
    v, pos = _read_unsigned(_view(buf), pos, 5)
    return v & 0xFFFFFFFF, pos


def read_unsigned_varlong(buf, pos: int):
    """Unsigned 64-bit varint at ``pos`` -> ``(value, next_pos)``."""
    v, pos = _read_unsigned(_view(buf), pos, 10)
    return v & 0xFFFFFFFFFFFFFFFF, pos


def read_varint(buf, pos: int):
    """Zigzag 32-bit varint at ``pos`` -> ``(value, next_pos)``."""
    v, pos = _read_unsigned(_view(buf), pos, 5)
    v &= 0xFFFFFFFF
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf, pos: int):
    """Zigzag 64-bit varint at ``pos`` -> ``(value, next_pos)``."""
    v, pos = _read_unsigned(_view(buf), pos, 10)
    v &= 0xFFFFFFFFFFFFFFFF
    return (v >> 1) ^ -(v & 1), pos


def _write_unsigned(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_unsigned_varint(value: int) -> bytes:
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _write_unsigned(value)


def write_unsigned_varlong(value: int) -> bytes:
    if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        raise ValueError(f"unsigned varlong out of range: {value}")
    return _write_unsigned(value)


def write_varint(value: int) -> bytes:
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ValueError(f"varint out of 32-bit range: {value}")
    return _write_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(value: int) -> bytes:
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong out of 64-bit range: {value}")
    return _write_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def size_of_unsigned_varint(value: int) -> int:
    """Bytes needed for an unsigned varint/varlong."""
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def size_of_varint(value: int) -> int:
    return size_of_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    return size_of_unsigned_varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
