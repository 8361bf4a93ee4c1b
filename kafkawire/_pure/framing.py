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
is given the headers' positions too.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from kafkawire._pure.wire import read_uvarint

__all__ = ["RecordFault", "RecordFields", "read_record", "utf8_valid",
           "WALK_UTF8", "WALK_RANGE"] + [
    "VARINT", "LENGTH", "PAST_END", "OFFSET_RANGE", "KEY_LENGTH", "KEY_PAST", "VALUE_LENGTH",
    "VALUE_PAST", "HEADER_COUNT", "HKEY_LENGTH", "HKEY_UTF8", "HVALUE_LENGTH", "HVALUE_PAST",
    "FIELDS"]

# What went wrong in a record (RecordFault.code); the same numbers as framing_impl.h.
(VARINT, LENGTH, PAST_END, OFFSET_RANGE, KEY_LENGTH, KEY_PAST, VALUE_LENGTH, VALUE_PAST,
 HEADER_COUNT, HKEY_LENGTH, HKEY_UTF8, HVALUE_LENGTH, HVALUE_PAST, FIELDS) = range(1, 15)

_INT64_MAX = (1 << 63) - 1

#: Walk options: check header keys are UTF-8; check offsets lie in the batch's range.
WALK_UTF8 = 1
WALK_RANGE = 2


class RecordFault(Exception):
    """A record the walker refused: ``code`` (what), ``at`` (the position), ``has_offset``
    (its offset delta was read), ``off_delta``, ``bad`` (the wrong length or count; for
    ``FIELDS`` the bytes the fields used), ``varint_err`` (1 truncated, 2 overlong),
    ``length`` (the record's length, once read)."""

    def __init__(self, code: int, at: int, *, length: int = 0, off_delta: Optional[int] = None,
                 bad: int = 0, varint_err: int = 0, has_offset: Optional[bool] = None) -> None:
        super().__init__(code, at)
        self.code = code
        self.at = at
        self.length = length
        self.off_delta = off_delta
        self.has_offset = off_delta is not None if has_offset is None else has_offset
        self.bad = bad
        self.varint_err = varint_err


class _Overrun(Exception):
    """A varint runs past its limit (kind 1) or is overlong (kind 2), at ``at``."""

    def __init__(self, kind: int, at: int) -> None:
        super().__init__(kind, at)
        self.kind = kind
        self.at = at


def _varint(buf: Any, pos: int, end: int, max_bytes: int) -> Tuple[int, int]:
    """``(value, next_pos)`` of the zigzag varint at ``pos`` (32-bit when ``max_bytes`` is 5,
    64-bit when 10), or _Overrun."""
    if pos + 1 < end:                      # one or two bytes: most lengths and deltas
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        c = buf[pos + 1]
        if c < 0x80:
            u = (b & 0x7F) | (c << 7)
            return (u >> 1) ^ -(u & 1), pos + 2
    u, nxt = read_uvarint(buf, pos, end, max_bytes)
    if u < 0:
        raise _Overrun(-u, pos)
    if max_bytes == 5:
        u &= 0xFFFFFFFF
    return (u >> 1) ^ -(u & 1), nxt


def utf8_valid(data: Any) -> bool:
    """Is ``data`` valid UTF-8?"""
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


#: What read_record returns, field by field.
RecordFields = Tuple[int, int, int, int, int, int, int, int, int,
                     List[Tuple[int, int, int, int]]]


def read_record(buf: Any, pos: int, end: int, flags: int = 0, base_offset: int = 0,
                last_offset: int = 0) -> RecordFields:
    """Read the record at ``buf[pos:end]`` (see the module docstring).

    Returns ``(end, length, attributes, ts_delta, off_delta, key, klen, value, vlen,
    headers)``: the position after the record, its length varint's value, its
    attributes and deltas, the positions and lengths of key and value (-1: null),
    and ``(key_pos, key_len, value_pos, value_len)`` for each header.

    ``flags``: ``WALK_UTF8`` checks header keys, ``WALK_RANGE`` checks
    ``base_offset + offsetDelta`` lies in ``[base_offset, last_offset]``.  A fault's
    position is a varint's first byte; the record's start for LENGTH, PAST_END,
    OFFSET_RANGE and FIELDS; otherwise the first byte a wrong length describes.
    """
    # (one-byte varints, most lengths and deltas, are read inline; longer ones by _varint)
    start = pos
    length = 0
    off_delta = None
    try:
        length, pos = _varint(buf, pos, end, 5)
        if length < 6:
            raise RecordFault(LENGTH, start, length=length)
        if length > end - pos:
            raise RecordFault(PAST_END, start, length=length)
        rend = pos + length
        attributes = buf[pos]
        pos += 1
        b = buf[pos] if pos < rend else 0x80
        if b < 0x80:
            ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            ts_delta, pos = _varint(buf, pos, rend, 10)
        b = buf[pos] if pos < rend else 0x80
        if b < 0x80:
            off_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            off_delta, pos = _varint(buf, pos, rend, 5)
        if flags & WALK_RANGE and not (0 <= off_delta <= last_offset - base_offset
                                       and base_offset + off_delta <= _INT64_MAX):
            raise RecordFault(OFFSET_RANGE, start, length=length, off_delta=off_delta,
                              has_offset=False)
        b = buf[pos] if pos < rend else 0x80
        if b < 0x80:
            klen, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            klen, pos = _varint(buf, pos, rend, 5)
        key = pos
        if klen >= 0:
            if klen > rend - pos:
                raise RecordFault(KEY_PAST, pos, length=length, off_delta=off_delta)
            pos += klen
        elif klen != -1:
            raise RecordFault(KEY_LENGTH, pos, length=length, off_delta=off_delta, bad=klen)
        b = buf[pos] if pos < rend else 0x80
        if b < 0x80:
            vlen, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            vlen, pos = _varint(buf, pos, rend, 5)
        value = pos
        if vlen >= 0:
            if vlen > rend - pos:
                raise RecordFault(VALUE_PAST, pos, length=length, off_delta=off_delta)
            pos += vlen
        elif vlen != -1:
            raise RecordFault(VALUE_LENGTH, pos, length=length, off_delta=off_delta, bad=vlen)
        b = buf[pos] if pos < rend else 0x80
        if b < 0x80:
            nh, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            nh, pos = _varint(buf, pos, rend, 5)
        spans = []
        if nh:
            if nh < 0 or nh > rend - pos:
                raise RecordFault(HEADER_COUNT, pos, length=length, off_delta=off_delta, bad=nh)
            for _ in range(nh):
                b = buf[pos] if pos < rend else 0x80
                if b < 0x80:
                    hklen, pos = (b >> 1) ^ -(b & 1), pos + 1
                else:
                    hklen, pos = _varint(buf, pos, rend, 5)
                if hklen < 0 or hklen > rend - pos:
                    raise RecordFault(HKEY_LENGTH, pos, length=length, off_delta=off_delta,
                                      bad=hklen)
                if flags & WALK_UTF8:
                    try:
                        str(buf[pos:pos + hklen], "utf-8")
                    except UnicodeDecodeError:
                        raise RecordFault(HKEY_UTF8, pos, length=length,
                                          off_delta=off_delta) from None
                hkey = pos
                pos += hklen
                b = buf[pos] if pos < rend else 0x80
                if b < 0x80:
                    hvlen, pos = (b >> 1) ^ -(b & 1), pos + 1
                else:
                    hvlen, pos = _varint(buf, pos, rend, 5)
                if hvlen >= 0:
                    if hvlen > rend - pos:
                        raise RecordFault(HVALUE_PAST, pos, length=length, off_delta=off_delta)
                    spans.append((hkey, hklen, pos, hvlen))
                    pos += hvlen
                elif hvlen != -1:
                    raise RecordFault(HVALUE_LENGTH, pos, length=length, off_delta=off_delta,
                                      bad=hvlen)
                else:
                    spans.append((hkey, hklen, pos, -1))
    except _Overrun as o:
        raise RecordFault(VARINT, o.at, length=length, off_delta=off_delta,
                          varint_err=o.kind) from None
    if pos != rend:
        raise RecordFault(FIELDS, start, length=length, off_delta=off_delta,
                          bad=length - (rend - pos))
    return rend, length, attributes, ts_delta, off_delta, key, klen, value, vlen, spans
