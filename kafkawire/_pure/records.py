"""Record decode/encode kernels (pure twin of ``kafkawire/_fast/records.pyx``).

Kernels (same names and signatures in both backends):

``Record(offset=0, timestamp=-1, key=None, value=None, headers=None, timestamp_type="CreateTime")``
    One decoded record: ``offset``, ``timestamp`` (ms), ``timestamp_type``
    (``"CreateTime"``, ``"LogAppendTime"``, or ``"NoTimestampType"`` for magic 0),
    ``key``/``value`` (bytes or None), ``headers`` (a list of ``(str, bytes|None)``;
    a fresh list per record).  Compares equal field for field.

``decode_records_v2(buf, start, end, count, base_offset, base_timestamp, max_timestamp, timestamp_type) -> list[Record]``
    Decode the records region ``buf[start:end]`` of a v2 batch (after the
    61-byte header, decompressed if the batch was compressed), which must hold
    exactly ``count`` records and nothing else.  Offsets are ``base_offset +
    offsetDelta``, timestamps ``base_timestamp + timestampDelta`` (deltas may be
    negative under the delete-horizon flag); with ``timestamp_type == 1``
    (LogAppendTime) every record reports ``max_timestamp``.  Malformed input
    raises ``CorruptRecordError`` with ``position`` (in ``buf``), ``offset``
    (when known) and ``reason`` (``"truncated"``, ``"varint"``, ``"length"``,
    ``"utf8"``, ``"count"``).

``decode_legacy_messages(buf, start, end, wrapper_offset, wrapper_magic, wrapper_timestamp, wrapper_timestamp_type, check_crc) -> list``
    Decode the v0/v1 message set ``buf[start:end]`` (12-byte offset+length
    prefix, crc, magic, attributes, [timestamp], key, value).  With
    ``wrapper_magic == -1`` it is a top-level set: offsets and timestamps as
    stored.  Otherwise it is the decompressed inner set of a wrapper message
    with that magic/offset/timestamp/timestamp type (0 CreateTime, 1
    LogAppendTime): under a magic-1 wrapper inner offsets are relative
    (absolute = wrapper_offset - last inner offset + inner offset), except
    under a wrapper whose offset is 0 (produce-side data, before a broker
    assigned offsets), where they stand as they are, as in Kafka; a nonzero
    wrapper offset below the last inner offset is corrupt.  Under a
    LogAppendTime magic-1 wrapper every record takes the wrapper's timestamp
    and type.  Uncompressed messages become ``Record``s; a compressed
    top-level message (a wrapper) becomes a tuple ``(position, offset, magic,
    attributes, timestamp, value)`` for the caller to decompress and decode
    as an inner set.  An inner set must hold at least one message, none of
    them compressed (Kafka refuses nested wrappers).  ``check_crc`` verifies
    each message's CRC-32.  Malformed input raises ``CorruptRecordError``.

``iter_records_v2(buf, start, end, count, base_offset, base_timestamp, max_timestamp, timestamp_type, on_error=None)``
    The same decode, lazily: an iterator yielding one ``Record`` at a time
    (errors surface when the bad record is reached).  ``decode_records_v2``
    takes the same ``on_error``: a callable mapping the kernel's
    ``CorruptRecordError`` to the exception to raise (callers relocate
    positions with it).

``validate_records_v2(buf, start, end, count, base_offset, last_offset, on_error=None, consecutive=False) -> int | None``
    Check the records region ``buf[start:end]`` of a v2 batch as
    ``decode_records_v2`` would read it, without making a record: ``count``
    records, each well-formed (lengths, varints, headers, UTF-8 header keys),
    and nothing after them.  Raises the ``CorruptRecordError`` (through
    ``on_error``) that ``decode_records_v2`` would raise; otherwise returns the
    offset of the first record outside ``[base_offset, last_offset]``, or None
    when every record lies in that range.  With ``consecutive`` (a produced
    batch, as Kafka's ``LogValidator`` checks inner offsets) a record is also
    out of place when its offset is not ``base_offset`` plus its index.

``check_batch_v2(buf, position, size, crc, count, base_offset, last_offset) -> bool``
    Whether the uncompressed v2 batch ``buf[position:position + size]`` passes
    every check ``RecordBatch.validate()`` makes of one: its CRC-32C (from the
    attributes to its end) equals ``crc``, ``count >= 0``, ``last_offset >=
    base_offset``, and ``validate_records_v2`` accepts its records region with
    every offset in ``[base_offset, last_offset]``.  False for anything else,
    with no error: the caller finds the error the checked way.  (The compiled
    kernel walks the records skipping every field, in one C call with the CRC.)

``encode_records_v2(offset_deltas, timestamp_deltas, keys, values, headers) -> bytes``
    Encode records for a v2 batch's records region (what goes after the
    61-byte header, before compression).  The five arguments are sequences of
    equal length n: ``offset_deltas`` (int32, relative to the batch base
    offset), ``timestamp_deltas`` (int64, relative to the base timestamp),
    ``keys``/``values`` (bytes-like or None), ``headers`` (per record: None or
    a sequence of ``(str|bytes key, bytes-like|None value)``; str keys are
    UTF-8 encoded).  Each record is written as Kafka does: length varint,
    attributes 0, timestampDelta varlong, offsetDelta varint, key, value,
    header count and headers.  Raises ``ValueError`` for out-of-range deltas
    or mismatched lengths and ``TypeError`` for wrong value types.
"""
from __future__ import annotations

import struct
import zlib
from itertools import chain

from kafkawire.errors import CorruptRecordError
from kafkawire._pure.wire import flat
from kafkawire._pure import framing as W
from kafkawire._pure.crc import crc32c as _crc32c

__all__ = ["Record", "decode_records_v2", "decode_records_v2_as", "iter_records_v2",
           "validate_records_v2", "check_batch_v2", "decode_legacy_messages", "encode_records_v2"]

_TS_NAMES = ("CreateTime", "LogAppendTime")


class Record:
    """One record of a batch (v2) or message set (v0/v1)."""

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(self, offset: int = 0, timestamp: int = -1, key=None, value=None,
                 headers=None, timestamp_type: str = "CreateTime") -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = [] if headers is None else list(headers)

    def __eq__(self, other):
        if not hasattr(other, "timestamp_type") or not hasattr(other, "headers"):
            return NotImplemented
        return (self.offset == other.offset and self.timestamp == other.timestamp
                and self.timestamp_type == other.timestamp_type and self.key == other.key
                and self.value == other.value and list(self.headers) == list(other.headers))

    __hash__ = None

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r}, "
                f"timestamp_type={self.timestamp_type!r})")


def _corrupt(msg, pos, offset=None, reason="truncated"):
    return CorruptRecordError(msg, position=pos, offset=offset, reason=reason)


_view = flat


#: Regions larger than this are decoded lazily, record by record, by the checked
#: decoder (no copy of the region, no list of every record held at once).
_EAGER_MAX = 16 << 20


def decode_records_v2(buf, start, end, count, base_offset, base_timestamp, max_timestamp,
                      timestamp_type, on_error=None):
    """Decode ``count`` v2 records from ``buf[start:end]``; see the module docstring."""
    view, start, end = _region(buf, start, end)
    if end - start > _EAGER_MAX and type(view) is not bytes:
        out = []
        try:
            out.extend(_checked_records(view, start, end, count, base_offset, base_timestamp,
                                        max_timestamp, timestamp_type))
            err = None
        except CorruptRecordError as exc:
            err = exc
    else:
        out, err = _decode_v2(view, start, end, count, base_offset, base_timestamp,
                              max_timestamp, timestamp_type)
    if err is not None:
        if on_error is None:
            raise err
        raise on_error(err) from None
    return out


def decode_records_v2_as(cls, prefix, suffix, buf, start, end, count, base_offset,
                         base_timestamp, max_timestamp, timestamp_type, on_error=None):
    """``decode_records_v2``, each record built as the tuple subclass ``cls`` holding
    ``prefix + (offset, timestamp, timestamp_type, key, value, headers) + suffix``;
    ``headers`` is a tuple of ``(key, value)`` pairs."""
    if not isinstance(cls, type) or not issubclass(cls, tuple) or \
            cls.__itemsize__ != tuple.__itemsize__ or cls.__basicsize__ != tuple.__basicsize__ \
            or cls.__dictoffset__ != 0:
        raise TypeError("cls must be a tuple subclass without instance attributes (a namedtuple class)")
    prefix, suffix = tuple(prefix), tuple(suffix)
    new = tuple.__new__
    return [new(cls, prefix + (r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                               tuple(r.headers)) + suffix)
            for r in decode_records_v2(buf, start, end, count, base_offset, base_timestamp,
                                       max_timestamp, timestamp_type, on_error)]


def iter_records_v2(buf, start, end, count, base_offset, base_timestamp, max_timestamp,
                    timestamp_type, on_error=None):
    """Lazy ``decode_records_v2``: an iterator of ``Record``s; see the module docstring.

    A batch's records are decoded up front (a list iterator costs far less per
    step than a generator); a decoding error is raised only once the records
    before it have been yielded, as a lazy decoder would.  Regions over
    ``_EAGER_MAX`` bytes are decoded one record per step.
    """
    view = buf if type(buf) is bytes else _view(buf)  # _region, inlined: once per batch
    n = len(view)
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    if end - start > _EAGER_MAX:
        gen = _checked_records(view, start, end, count, base_offset, base_timestamp,
                               max_timestamp, timestamp_type)
        return gen if on_error is None else _relocating(gen, on_error)
    out, err = _decode_v2(view, start, end, count, base_offset, base_timestamp, max_timestamp,
                          timestamp_type)
    if err is None:
        return iter(out)
    return chain(out, _raise_later(err, on_error))


def _region(buf, start, end):
    """``(view, start, end)``: ``buf`` as bytes or a byte view, the bounds clamped to it."""
    view = buf if type(buf) is bytes else _view(buf)
    n = len(view)
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    return view, start, end


def _raise_later(err, on_error):
    if on_error is None:
        raise err
    raise on_error(err) from None
    yield  # a generator: raises when reached


def _relocating(gen, on_error):
    try:
        yield from gen
    except CorruptRecordError as exc:
        raise on_error(exc) from None


def _record_error(fault, base_offset):
    """The decoders' ``CorruptRecordError`` for a record the walker refused."""
    code, at = fault.code, fault.at
    off = base_offset + fault.off_delta if fault.has_offset else None
    if code == W.VARINT:
        if fault.varint_err == 2:
            return _corrupt("overlong varint", at, off, "varint")
        return _corrupt("varint runs past the end of the record", at, off, "truncated")
    if code == W.LENGTH:
        return _corrupt(f"record length {fault.length} is invalid", at, None, "length")
    if code == W.PAST_END:
        return _corrupt(f"record length {fault.length} runs past the end of the batch", at,
                        None, "truncated")
    message, reason = _FAULTS.get(code, ("", "length"))
    if "{" in message:
        message = message.format(fault.bad)
    if code == W.FIELDS:
        message = f"record declares {fault.length} bytes but its fields use {fault.bad}"
    return _corrupt(message, at, off, reason)


_FAULTS = {
    W.KEY_PAST: ("key runs past the end of the record", "truncated"),
    W.KEY_LENGTH: ("invalid key length {}", "length"),
    W.VALUE_PAST: ("value runs past the end of the record", "truncated"),
    W.VALUE_LENGTH: ("invalid value length {}", "length"),
    W.HEADER_COUNT: ("invalid header count {}", "length"),
    W.HKEY_LENGTH: ("invalid header key length {}", "length"),
    W.HKEY_UTF8: ("header key is not valid UTF-8", "utf8"),
    W.HVALUE_PAST: ("header value runs past the end of the record", "truncated"),
    W.HVALUE_LENGTH: ("invalid header value length {}", "length"),
}


def validate_records_v2(buf, start, end, count, base_offset, last_offset, on_error=None,
                        consecutive=False):
    """Check a v2 records region without decoding it; see the module docstring."""
    view, start, end = _region(buf, start, end)
    start = min(start, end)
    err = _count_error(count, start, end, base_offset)
    outside = None
    pos = start
    if err is None:
        read = W.read_record
        try:
            for i in range(count):
                rec = read(view, pos, end, W.WALK_UTF8)
                pos = rec[0]
                off_delta = rec[4]
                if outside is None and (not 0 <= off_delta <= last_offset - base_offset
                                        or consecutive and off_delta != i):
                    outside = base_offset + off_delta
        except W.RecordFault as fault:
            err = _record_error(fault, base_offset)
        else:
            if pos != end:
                err = _corrupt(f"{end - pos} bytes left after the batch's {count} records", pos,
                               None, "count")
    if err is not None:
        if on_error is not None:
            err = on_error(err)
        raise err
    return outside


def check_batch_v2(buf, position, size, crc, count, base_offset, last_offset):
    """Whether an uncompressed v2 batch passes every check; see the module docstring."""
    view, _, n = _region(buf, 0, -1)
    # numbers outside a batch header's ranges are no batch (False), as in the compiled twin
    if not (0 <= position and 61 <= size <= n - position and 0 <= crc <= 0xFFFFFFFF
            and 0 <= count < 1 << 63 and -(1 << 63) <= base_offset <= last_offset < 1 << 63):
        return False
    if _crc32c(view, position + 21, position + size) != crc:
        return False
    try:
        outside = validate_records_v2(view, position + 61, position + size, count, base_offset,
                                      last_offset)
    except CorruptRecordError:
        return False
    return outside is None


def _count_error(count, start, end, base_offset):
    if count < 0 or (count > 0 and count > (end - start) // 7):
        return _corrupt(f"record count {count} impossible for {end - start} bytes of records",
                        start, base_offset, "count")
    return None


def _checked_records(view, start, end, count, base_offset, base_timestamp, max_timestamp,
                     timestamp_type):
    """Generator of the records of a (normalised) region, each through ``_checked_record``."""
    err = _count_error(count, start, end, base_offset)
    if err is not None:
        raise err
    lat = timestamp_type == 1
    ts_name = _TS_NAMES[1 if lat else 0]
    pos = start
    for _ in range(count):
        r, pos = _checked_record(view, pos, end, base_offset, base_timestamp, max_timestamp,
                                 lat, ts_name)
        yield r
    if pos != end:
        raise _corrupt(f"{end - pos} bytes left after the batch's {count} records", pos, None,
                       "count")


def _decode_v2(view, start, end, count, base_offset, base_timestamp, max_timestamp,
               timestamp_type):
    """Decode the v2 records of a region (normalised by ``_region``): ``(records, error)``.

    ``error`` is None or the ``CorruptRecordError`` met after ``records``.
    """
    out = []
    err = _count_error(count, start, end, base_offset)
    if err is not None:
        return out, err
    lat = timestamp_type == 1
    ts_name = _TS_NAMES[1 if lat else 0]
    pos = start
    append = out.append
    try:
        for _ in range(count):
            r, pos = _checked_record(view, pos, end, base_offset, base_timestamp, max_timestamp,
                                     lat, ts_name)
            append(r)
    except CorruptRecordError as exc:
        return out, exc
    if pos != end:
        return out, _corrupt(f"{end - pos} bytes left after the batch's {count} records", pos,
                             None, "count")
    return out, None


def _checked_record(buf, pos, end, base_offset, base_timestamp, max_timestamp, lat, ts_name):
    """Decode the record at ``pos`` checking every field -> ``(Record, next_pos)``, or raise."""
    # Header keys are checked as they are decoded; a record that fails is read again with
    # the walker's UTF-8 check, for the first fault in field order.
    try:
        (rend, _length, _attributes, ts_delta, off_delta, key, klen, value, vlen,
         spans) = W.read_record(buf, pos, end)
        headers = [(str(buf[hk:hk + hklen], "utf-8"),
                    None if hvlen < 0 else bytes(buf[hv:hv + hvlen]))
                   for hk, hklen, hv, hvlen in spans]
    except (W.RecordFault, UnicodeDecodeError):
        try:
            W.read_record(buf, pos, end, W.WALK_UTF8)
        except W.RecordFault as fault:
            raise _record_error(fault, base_offset) from None
        raise
    r = Record.__new__(Record)
    r.offset = base_offset + off_delta
    r.timestamp = max_timestamp if lat else base_timestamp + ts_delta
    r.timestamp_type = ts_name
    r.key = None if klen < 0 else bytes(buf[key:key + klen])
    r.value = None if vlen < 0 else bytes(buf[value:value + vlen])
    r.headers = headers
    return r, rend


_LEGACY_HEAD = struct.Struct(">qiIbb")          # offset, length, crc, magic, attributes
_LEGACY_HEAD_AT = _LEGACY_HEAD.unpack_from
_new = object.__new__
_LEGACY_PREFIX = struct.Struct(">qi").unpack_from
_V1_TS_KLEN = struct.Struct(">qi").unpack_from  # v1 timestamp, key length
_I32 = struct.Struct(">i").unpack_from


def decode_legacy_messages(buf, start, end, wrapper_offset, wrapper_magic, wrapper_timestamp,
                           wrapper_timestamp_type, check_crc):
    """Decode a v0/v1 message set; see the module docstring."""
    copy = type(buf) is not bytes  # slices of anything else need bytes()
    if copy:
        buf = _view(buf)
    n = len(buf)
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    out = []
    append = out.append
    pos = start
    lat_wrapper = wrapper_magic == 1 and wrapper_timestamp_type == 1
    last_raw = None
    while pos < end:
        if end - pos >= 18:
            offset, length, crc, magic, attrs = _LEGACY_HEAD_AT(buf, pos)
        elif end - pos < 12:
            raise _corrupt("message set ends in a partial message header", pos)
        else:
            offset, length = _LEGACY_PREFIX(buf, pos)  # too short: one of the next checks fails
        if length < 14:
            raise _corrupt(f"message size {length} smaller than minimum record overhead (14)",
                           pos, offset, "length")
        mend = pos + 12 + length
        if mend > end:
            raise _corrupt(f"message of {length} bytes runs past the end of its set", pos,
                           offset)
        attrs &= 0xFF
        if magic == 1:
            if length < 22:
                raise _corrupt(f"magic 1 message size {length} smaller than 22", pos, offset,
                               "length")
            timestamp, klen = _V1_TS_KLEN(buf, pos + 18)
            p = pos + 30
            ts_name = _TS_NAMES[1 if attrs & 0x08 else 0]
        elif magic == 0:
            klen = _I32(buf, pos + 18)[0]
            p = pos + 22
            timestamp = -1
            ts_name = "NoTimestampType"
        else:
            raise _corrupt(f"invalid magic {magic} in a message set", pos + 16, offset, "magic")
        if check_crc and zlib.crc32(buf[pos + 16:mend]) != crc:
            raise _corrupt("message CRC-32 mismatch", pos, offset, "crc")
        if klen < 0:
            if klen != -1:
                raise _corrupt(f"invalid key length {klen}", p - 4, offset, "length")
            key = None
        else:
            q = p + klen
            if q + 4 > mend:
                raise _corrupt("key runs past the end of the message", p - 4, offset)
            key = bytes(buf[p:q]) if copy else buf[p:q]
            p = q
        if p + 4 > mend:
            raise _corrupt("value length runs past the end of the message", p, offset)
        vlen = _I32(buf, p)[0]
        p += 4
        if vlen < 0:
            if vlen != -1:
                raise _corrupt(f"invalid value length {vlen}", p - 4, offset, "length")
            value = None
        else:
            q = p + vlen
            if q > mend:
                raise _corrupt("value runs past the end of the message", p - 4, offset)
            value = bytes(buf[p:q]) if copy else buf[p:q]
            p = q
        if p != mend:
            raise _corrupt(f"message declares {length} bytes but its fields use "
                           f"{length - (mend - p)}", pos, offset, "length")
        if lat_wrapper:
            timestamp = wrapper_timestamp
            ts_name = "LogAppendTime"
        if attrs & 0x07:
            if wrapper_magic != -1:
                raise _corrupt("inner messages must not be compressed", pos, offset,
                               "compression")
            append((pos, offset, magic, attrs, timestamp, value))
        else:
            r = _new(Record)
            r.offset = offset
            r.timestamp = timestamp
            r.timestamp_type = ts_name
            r.key = key
            r.value = value
            r.headers = []
            append(r)
        last_raw = offset
        last_pos = pos
        pos = mend
    if wrapper_magic != -1 and last_raw is None:
        raise _corrupt("compressed message set holds no messages", start, wrapper_offset, "count")
    if wrapper_magic >= 1 and wrapper_offset != 0:
        if wrapper_offset < last_raw:
            raise _corrupt(f"wrapper offset {wrapper_offset} is less than the last inner message "
                           f"offset {last_raw} and it is not zero", last_pos, wrapper_offset,
                           "offset")
        shift = wrapper_offset - last_raw
        if shift:
            for i, r in enumerate(out):
                if type(r) is tuple:
                    out[i] = (r[0], r[1] + shift) + r[2:]
                else:
                    r.offset += shift
    return out


def _uvarint_bytes(v, out):
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zz32(v):
    if not -0x80000000 <= v <= 0x7FFFFFFF:
        raise ValueError(f"value {v} out of 32-bit varint range")
    return ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF


def _zz64(v):
    if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"value {v} out of 64-bit varlong range")
    return ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF


def _bytes_field(v, body, what):
    if v is None:
        body.append(1)  # zigzag(-1)
        return
    if isinstance(v, str):
        raise TypeError(f"{what} must be bytes-like or None, not str (encode it first)")
    try:
        mv = memoryview(v)
    except TypeError:
        raise TypeError(f"{what} must be bytes-like or None, not {type(v).__name__}") from None
    n = mv.nbytes
    _uvarint_bytes(_zz32(n), body)
    body += mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv


def encode_records_v2(offset_deltas, timestamp_deltas, keys, values, headers):
    """Encode the records region of a v2 batch; see the module docstring."""
    n = len(offset_deltas)
    if not (len(timestamp_deltas) == len(keys) == len(values) == len(headers) == n):
        raise ValueError("encode_records_v2: all five sequences must have the same length")
    out = bytearray()
    for i in range(n):
        body = bytearray(b"\x00")
        _uvarint_bytes(_zz64(timestamp_deltas[i]), body)
        _uvarint_bytes(_zz32(offset_deltas[i]), body)
        _bytes_field(keys[i], body, "key")
        _bytes_field(values[i], body, "value")
        hs = headers[i]
        if not hs:
            body.append(0)
        else:
            _uvarint_bytes(_zz32(len(hs)), body)
            for hk, hv in hs:
                if isinstance(hk, str):
                    hk = hk.encode("utf-8")
                elif not isinstance(hk, (bytes, bytearray, memoryview)):
                    raise TypeError(f"header key must be str, not {type(hk).__name__}")
                _bytes_field(hk, body, "header key")
                _bytes_field(hv, body, "header value")
        _uvarint_bytes(_zz32(len(body)), out)
        out += body
    return bytes(out)
