"""The v2 record-body walker: the pure twins' one reader of Kafka's v2 record layout.

The Python side of ``kafkawire/_fast/framing_impl.h`` (same checks, same order,
same positions).  A record is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | (headerKeyLength varint | headerKey |
                          headerValueLength varint | headerValue) * headerCount

Lengths of -1 mean null, except a header key's, which is never null.
:func:`read_record` reads one record, checking every field against the
record's end and the record's end against the region's, and returns its
fields; a malformed record raises :class:`RecordFault` naming what failed and
where, which each decoder turns into its own typed error.  :func:`headers`
walks the headers of a record ``read_record`` accepted.
"""
from __future__ import annotations

from typing import Any, Iterator, NamedTuple, Optional, Tuple

from kafkawire._pure.wire import read_uvarint

__all__ = ["RecordFault", "RecordFields", "read_record", "headers", "utf8_valid",
           "WALK_UTF8", "WALK_RANGE"] + [
    "VARINT", "LENGTH", "PAST_END", "OFFSET_RANGE", "KEY_LENGTH", "KEY_PAST", "VALUE_LENGTH",
    "VALUE_PAST", "HEADER_COUNT", "HKEY_LENGTH", "HKEY_UTF8", "HVALUE_LENGTH", "HVALUE_PAST",
    "FIELDS"]

# What went wrong in a record (RecordFault.code); the same numbers as framing_impl.h.
(VARINT, LENGTH, PAST_END, OFFSET_RANGE, KEY_LENGTH, KEY_PAST, VALUE_LENGTH, VALUE_PAST,
 HEADER_COUNT, HKEY_LENGTH, HKEY_UTF8, HVALUE_LENGTH, HVALUE_PAST, FIELDS) = range(1, 15)

#: Walk options: check header keys are UTF-8; check offsets lie in the batch's range.
WALK_UTF8 = 1
WALK_RANGE = 2


class RecordFault(Exception):
    """A record the walker refused: ``code`` (what), ``at`` (the position), ``has_offset``
    (its offset delta was read), ``off_delta``, ``bad`` (the wrong length or count; for
    ``FIELDS`` the bytes the fields used), ``varint_err`` (1 truncated, 2 overlong),
    ``length`` (the record's length, once read)."""

    def __init__(self, code: int, at: int, *, length: int = 0, off_delta: Optional[int] = None,
                 bad: int = 0, varint_err: int = 0) -> None:
        super().__init__(code, at)
        self.code = code
        self.at = at
        self.length = length
        self.off_delta = off_delta
        self.has_offset = off_delta is not None
        self.bad = bad
        self.varint_err = varint_err


class RecordFields(NamedTuple):
    """One record's fields: positions in the buffer, lengths (-1: null)."""

    end: int           # one past the record's last byte
    attributes: int
    ts_delta: int
    off_delta: int
    key: int           # the key's position (when klen >= 0)
    klen: int
    value: int
    vlen: int
    nh: int            # header count
    headers: int       # the first header's position


def _varint(buf: Any, pos: int, end: int, bits: int, length: int,
            off_delta: Optional[int]) -> Tuple[int, int]:
    """The zigzag varint (32 or 64 bits) at ``pos``, or RecordFault(VARINT)."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:                       # one byte: most lengths and deltas
            return (b >> 1) ^ -(b & 1), pos + 1
    u, nxt = read_uvarint(buf, pos, end, 5 if bits == 32 else 10)
    if u < 0:
        raise RecordFault(VARINT, pos, length=length, off_delta=off_delta,
                          varint_err=1 if u == -1 else 2)
    u &= (1 << bits) - 1
    return (u >> 1) ^ -(u & 1), nxt


def utf8_valid(data: Any) -> bool:
    """Is ``data`` valid UTF-8?"""
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_record(buf: Any, pos: int, end: int, flags: int = 0, base_offset: int = 0,
                last_offset: int = 0) -> RecordFields:
    """Read the record at ``buf[pos:end]`` (see the module docstring).

    ``flags``: ``WALK_UTF8`` checks header keys, ``WALK_RANGE`` checks
    ``base_offset + offsetDelta`` lies in ``[base_offset, last_offset]``.  A fault's
    position is a varint's first byte; the record's start for LENGTH, PAST_END,
    OFFSET_RANGE and FIELDS; otherwise the first byte a wrong length describes.
    """
    start = pos
    length, pos = _varint(buf, pos, end, 32, 0, None)
    if length < 6:
        raise RecordFault(LENGTH, start, length=length)
    if length > end - pos:
        raise RecordFault(PAST_END, start, length=length)
    rend = pos + length
    attributes = buf[pos]
    ts_delta, pos = _varint(buf, pos + 1, rend, 64, length, None)
    off_delta, pos = _varint(buf, pos, rend, 32, length, None)
    if flags & WALK_RANGE and not 0 <= off_delta <= last_offset - base_offset:
        raise RecordFault(OFFSET_RANGE, start, length=length, off_delta=off_delta)
    klen, pos = _varint(buf, pos, rend, 32, length, off_delta)
    key = pos
    if klen >= 0:
        if klen > rend - pos:
            raise RecordFault(KEY_PAST, pos, length=length, off_delta=off_delta)
        pos += klen
    elif klen != -1:
        raise RecordFault(KEY_LENGTH, pos, length=length, off_delta=off_delta, bad=klen)
    vlen, pos = _varint(buf, pos, rend, 32, length, off_delta)
    value = pos
    if vlen >= 0:
        if vlen > rend - pos:
            raise RecordFault(VALUE_PAST, pos, length=length, off_delta=off_delta)
        pos += vlen
    elif vlen != -1:
        raise RecordFault(VALUE_LENGTH, pos, length=length, off_delta=off_delta, bad=vlen)
    nh, pos = _varint(buf, pos, rend, 32, length, off_delta)
    first_header = pos
    if nh:
        if nh < 0 or nh > rend - pos:
            raise RecordFault(HEADER_COUNT, pos, length=length, off_delta=off_delta, bad=nh)
        for _ in range(nh):
            hklen, pos = _varint(buf, pos, rend, 32, length, off_delta)
            if hklen < 0 or hklen > rend - pos:
                raise RecordFault(HKEY_LENGTH, pos, length=length, off_delta=off_delta,
                                  bad=hklen)
            if flags & WALK_UTF8 and not utf8_valid(buf[pos:pos + hklen]):
                raise RecordFault(HKEY_UTF8, pos, length=length, off_delta=off_delta)
            pos += hklen
            hvlen, pos = _varint(buf, pos, rend, 32, length, off_delta)
            if hvlen >= 0:
                if hvlen > rend - pos:
                    raise RecordFault(HVALUE_PAST, pos, length=length, off_delta=off_delta)
                pos += hvlen
            elif hvlen != -1:
                raise RecordFault(HVALUE_LENGTH, pos, length=length, off_delta=off_delta,
                                  bad=hvlen)
    if pos != rend:
        raise RecordFault(FIELDS, start, length=length, off_delta=off_delta,
                          bad=length - (rend - pos))
    return RecordFields(rend, attributes, ts_delta, off_delta, key, klen, value, vlen, nh,
                        first_header)


def headers(buf: Any, rec: RecordFields) -> Iterator[Tuple[int, int, int, int]]:
    """``(key_pos, key_len, value_pos, value_len)`` of each header of an accepted record."""
    pos = rec.headers
    for _ in range(rec.nh):
        klen, pos = _varint(buf, pos, rec.end, 32, 0, None)
        kpos = pos
        pos += klen
        vlen, pos = _varint(buf, pos, rec.end, 32, 0, None)
        yield kpos, klen, pos, vlen
        if vlen > 0:
            pos += vlen
