"""A small reader for Kafka's generated-message encoding (the coordinator records).

Only what the ``__consumer_offsets`` and ``__transaction_state`` decoders need:
big-endian ints, legacy and compact (flexible-version) strings, bytes and
arrays, and tagged-field sections.  Every read is bounds-checked and raises
:class:`DecodeError` naming the byte position.
"""
from __future__ import annotations

import base64
import struct
from typing import Callable, Dict, List, Optional, TypeVar

from kafkawire.cli.javastr import java_utf8
from kafkawire.errors import KafkaWireError

T = TypeVar("T")


class DecodeError(KafkaWireError):
    """A coordinator record key or value that does not match its schema."""


class Reader:
    """Sequential reader over one key or value buffer."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = bytes(buf)
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise DecodeError(f"truncated at byte {self.pos}: need {n} bytes, "
                              f"{len(self.buf) - self.pos} left")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def _unpack(self, fmt: str, n: int) -> int:
        value: int = struct.unpack(fmt, self._take(n))[0]
        return value

    def int8(self) -> int:
        return self._unpack(">b", 1)

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def int64(self) -> int:
        return self._unpack(">q", 8)

    def uvarint(self) -> int:
        result = shift = 0
        start = self.pos
        while True:
            if shift > 28:
                raise DecodeError(f"unsigned varint too long at byte {start}")
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def _length(self, legacy: Callable[[], int]) -> int:
        """Length of a string/bytes/array: -1 means null."""
        if self.flexible:
            return self.uvarint() - 1
        return legacy()

    def nullable_string(self) -> Optional[str]:
        n = self._length(self.int16)
        if n < 0:
            return None
        return java_utf8(self._take(n))

    def string(self) -> str:
        at = self.pos
        s = self.nullable_string()
        if s is None:
            raise DecodeError(f"null string at byte {at} where the schema forbids null")
        return s

    def nullable_bytes(self) -> Optional[bytes]:
        n = self._length(self.int32)
        if n < 0:
            return None
        return self._take(n)

    def bytes_(self) -> bytes:
        at = self.pos
        b = self.nullable_bytes()
        if b is None:
            raise DecodeError(f"null bytes at byte {at} where the schema forbids null")
        return b

    def nullable_array(self, item: Callable[["Reader"], T]) -> Optional[List[T]]:
        at = self.pos
        n = self._length(self.int32)
        if n < 0:
            return None
        # every element takes at least one byte: refuse absurd counts early
        if n > len(self.buf) - self.pos:
            raise DecodeError(f"array length {n} at byte {at} exceeds the remaining bytes")
        return [item(self) for _ in range(n)]

    def array(self, item: Callable[["Reader"], T]) -> List[T]:
        at = self.pos
        a = self.nullable_array(item)
        if a is None:
            raise DecodeError(f"null array at byte {at} where the schema forbids null")
        return a

    def tagged_fields(self) -> Dict[int, bytes]:
        """Read a tagged-field section (flexible versions only); returns tag -> raw bytes."""
        if not self.flexible:
            return {}
        out: Dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = self._take(size)
        return out

    def remaining(self) -> int:
        return len(self.buf) - self.pos


def b64(data: Optional[bytes]) -> Optional[str]:
    """Base64 text of bytes, as Jackson writes a binary node; None stays None."""
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")
