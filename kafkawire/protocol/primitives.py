"""Kafka's wire primitives as a bounded reader and a writer, for hand-rolled formats.

Message schemas do not use these (they compile to programs the kernels run);
they are for the odd structure a client builds by hand — consumer protocol
subscription bytes inside JoinGroup metadata, a SASL token, a test vector::

    r = Reader(frame)
    corr = r.int32()
    name = r.string(compact=True)
    tags = r.tagged_fields()

Every read is bounded by ``end`` and raises :class:`MessageDecodeError`
(naming the position) instead of reading past it.
"""
from __future__ import annotations

import builtins
import struct
import uuid as _uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar

from kafkawire.protocol.errors import MessageDecodeError

__all__ = ["Reader", "Writer"]

T = TypeVar("T")

_b, _h, _i, _q = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_H, _I, _d = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">d")


class Reader:
    """Reads primitives from ``data[pos:end]`` without copying records."""

    __slots__ = ("_mv", "pos", "end")

    def __init__(self, data: Any, pos: int = 0, end: Optional[int] = None) -> None:
        mv = memoryview(data)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        self._mv = mv
        self.end = mv.nbytes if end is None else end
        if not 0 <= pos <= self.end <= mv.nbytes:
            raise MessageDecodeError(f"bad bounds [{pos}, {end}) for {mv.nbytes} bytes",
                                     position=pos, reason="length")
        self.pos = pos

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, what: str) -> int:
        pos = self.pos
        if n > self.end - pos:
            raise MessageDecodeError(
                f"{what} needs {n} bytes but only {self.end - pos} remain (truncated)",
                position=pos, reason="truncated")
        self.pos = pos + n
        return pos

    def _fixed(self, st: struct.Struct, what: str) -> int:
        value: int = st.unpack_from(self._mv, self._take(st.size, what))[0]
        return value

    def int8(self) -> int:
        return self._fixed(_b, "int8")

    def bool(self) -> builtins.bool:
        return self._fixed(_b, "bool") != 0

    def int16(self) -> int:
        return self._fixed(_h, "int16")

    def uint16(self) -> int:
        return self._fixed(_H, "uint16")

    def int32(self) -> int:
        return self._fixed(_i, "int32")

    def uint32(self) -> int:
        return self._fixed(_I, "uint32")

    def int64(self) -> int:
        return self._fixed(_q, "int64")

    def float64(self) -> float:
        value: float = _d.unpack_from(self._mv, self._take(_d.size, "float64"))[0]
        return value

    def uuid(self) -> _uuid.UUID:
        pos = self._take(16, "uuid")
        return _uuid.UUID(bytes=self._mv[pos:pos + 16].tobytes())

    def uvarint(self) -> int:
        """Unsigned varint of at most 5 bytes (32 bits)."""
        return self._varint(35, signed=False)

    def varint(self) -> int:
        """Zig-zag signed 32-bit varint."""
        return self._varint(35, signed=True)

    def varlong(self) -> int:
        """Zig-zag signed 64-bit varint."""
        return self._varint(70, signed=True)

    def _varint(self, limit: int, signed: builtins.bool) -> int:
        start = self.pos
        result = shift = 0
        while True:
            b = self._mv[self._take(1, "varint")]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= limit:
                raise MessageDecodeError("varint too long", position=start, reason="varint")
        if not signed:
            if result > 0xFFFFFFFF:
                raise MessageDecodeError("unsigned varint over 32 bits", position=start,
                                         reason="varint")
            return result
        return (result >> 1) ^ -(result & 1)

    def _length(self, compact: builtins.bool, wide: builtins.bool, nullable: builtins.bool, what: str) -> int:
        start = self.pos
        if compact:
            n = self.uvarint() - 1
        else:
            n = self.int32() if wide else self.int16()
        if n < 0:
            if n == -1 and nullable:
                return -1
            raise MessageDecodeError(f"negative {what} length {n}", position=start,
                                     reason="length")
        if n > self.remaining and what != "array":
            raise MessageDecodeError(f"{what} length {n} runs past the end ({self.remaining} "
                                     "bytes remain)", position=start, reason="length")
        return n

    def string(self, *, compact: builtins.bool = False, nullable: builtins.bool = False) -> Optional[str]:
        n = self._length(compact, False, nullable, "string")
        if n < 0:
            return None
        pos = self._take(n, "string")
        try:
            return str(self._mv[pos:pos + n], "utf-8")
        except UnicodeDecodeError:
            raise MessageDecodeError("string is not valid UTF-8", position=pos,
                                     reason="utf8") from None

    def bytes(self, *, compact: builtins.bool = False, nullable: builtins.bool = False) -> Optional[builtins.bytes]:
        view = self.records(compact=compact, nullable=nullable)
        return None if view is None else view.tobytes()

    def records(self, *, compact: builtins.bool = False, nullable: builtins.bool = True) -> Optional[memoryview]:
        """A bytes field as a zero-copy view (how record data is read)."""
        n = self._length(compact, True, nullable, "bytes")
        if n < 0:
            return None
        pos = self._take(n, "bytes")
        return self._mv[pos:pos + n]

    def array(self, read: Callable[["Reader"], T], *, compact: builtins.bool = False,
              nullable: builtins.bool = False) -> Optional[List[T]]:
        """An array whose elements ``read(self)`` decodes."""
        start = self.pos
        n = self._length(compact, True, nullable, "array")
        if n < 0:
            return None
        if n > self.remaining:
            raise MessageDecodeError(f"array of {n} elements cannot fit in {self.remaining} bytes",
                                     position=start, reason="length")
        return [read(self) for _ in range(n)]

    def tagged_fields(self) -> Dict[int, builtins.bytes]:
        """A flexible version's tagged-field section as ``{tag: raw bytes}``."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            pos = self._take(size, f"tagged field {tag}")
            out[tag] = self._mv[pos:pos + size].tobytes()
        return out


class Writer:
    """Appends primitives to a bytearray; ``getvalue()`` returns the bytes."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def int8(self, v: int) -> "Writer":
        self.buf += _b.pack(v)
        return self

    def bool(self, v: builtins.bool) -> "Writer":
        self.buf.append(1 if v else 0)
        return self

    def int16(self, v: int) -> "Writer":
        self.buf += _h.pack(v)
        return self

    def uint16(self, v: int) -> "Writer":
        self.buf += _H.pack(v)
        return self

    def int32(self, v: int) -> "Writer":
        self.buf += _i.pack(v)
        return self

    def uint32(self, v: int) -> "Writer":
        self.buf += _I.pack(v)
        return self

    def int64(self, v: int) -> "Writer":
        self.buf += _q.pack(v)
        return self

    def float64(self, v: float) -> "Writer":
        self.buf += _d.pack(v)
        return self

    def uuid(self, v: _uuid.UUID) -> "Writer":
        self.buf += v.bytes
        return self

    def uvarint(self, v: int) -> "Writer":
        if not 0 <= v <= 0xFFFFFFFF:
            raise ValueError(f"{v} does not fit an unsigned 32-bit varint")
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def varint(self, v: int) -> "Writer":
        if not -(1 << 31) <= v < 1 << 31:
            raise ValueError(f"{v} does not fit a 32-bit varint")
        return self._zigzag(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> "Writer":
        if not -(1 << 63) <= v < 1 << 63:
            raise ValueError(f"{v} does not fit a 64-bit varint")
        return self._zigzag(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def _zigzag(self, z: int) -> "Writer":
        while z >= 0x80:
            self.buf.append((z & 0x7F) | 0x80)
            z >>= 7
        self.buf.append(z)
        return self

    def _length(self, n: int, compact: builtins.bool, wide: builtins.bool) -> None:
        if compact:
            self.uvarint(n + 1)
        elif wide:
            self.int32(n)
        else:
            self.int16(n)

    def string(self, v: Optional[str], *, compact: builtins.bool = False) -> "Writer":
        if v is None:
            self._length(-1, compact, False)
            return self
        b = v.encode("utf-8")
        self._length(len(b), compact, False)
        self.buf += b
        return self

    def bytes(self, v: Any, *, compact: builtins.bool = False) -> "Writer":
        if v is None:
            self._length(-1, compact, True)
            return self
        m = memoryview(v)
        self._length(m.nbytes, compact, True)
        self.buf += m
        return self

    records = bytes

    def array(self, items: Optional[Sequence[T]], write: Callable[["Writer", T], object], *,
              compact: builtins.bool = False) -> "Writer":
        """An array (None for null) whose elements ``write(self, item)`` encodes."""
        if items is None:
            self._length(-1, compact, True)
            return self
        self._length(len(items), compact, True)
        for item in items:
            write(self, item)
        return self

    def tagged_fields(self, fields: Optional[Dict[int, builtins.bytes]] = None) -> "Writer":
        """A tagged-field section from ``{tag: raw bytes}`` (sorted by tag)."""
        fields = fields or {}
        self.uvarint(len(fields))
        for tag in sorted(fields):
            raw = fields[tag]
            self.uvarint(tag)
            self.uvarint(len(raw))
            self.buf += raw
        return self
