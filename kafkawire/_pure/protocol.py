"""Protocol kernels, pure-Python twin: interpret compiled struct programs.

``decode_struct`` reads one struct (and everything nested in it) from
``buf[pos:end]`` and never looks past ``end``; ``encode_struct`` appends the
encoding of an object to a bytearray.  Programs are described in
:mod:`kafkawire._protocol_common`; the schemas that produce them hold all the
Kafka knowledge, these functions only the wire primitives.
"""
from __future__ import annotations

import struct
import uuid as _uuid

from kafkawire._protocol_common import (
    ARRAY, BOOL, BYTES, CARRAY, CBYTES, CNARRAY, CNBYTES, CNSTRING, CRECORDS, CSTRING,
    FLOAT64, INT8, INT16, INT32, INT64, MessageDecodeError, NARRAY, NBYTES, NSTRING,
    NSTRUCT, RECORDS, STRING, STRUCT, UINT16, UINT32, UNKNOWN_TAGS, UUID, UVARINT, VARINT,
    VARLONG,
)
from kafkawire._pure.wire import flat, zigzag
from kafkawire._pure.wire import read_uvarint as _wire_uvarint

__all__ = ["decode_struct", "encode_struct", "encode_message", "read_uvarint"]

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_UH = struct.Struct(">H")
_I = struct.Struct(">i")
_UI = struct.Struct(">I")
_Q = struct.Struct(">q")
_D = struct.Struct(">d")
_SPLICE_MIN = 65536
_FIXED = {BOOL: (_B, 1), INT8: (_B, 1), INT16: (_H, 2), UINT16: (_UH, 2), INT32: (_I, 4),
          UINT32: (_UI, 4), INT64: (_Q, 8), FLOAT64: (_D, 8)}


def _truncated(pos: int, need: int, end: int, what: str) -> MessageDecodeError:
    return MessageDecodeError(
        f"{what} needs {need} bytes but only {max(end - pos, 0)} remain in the frame "
        "(truncated or corrupt message)", position=pos, reason="truncated")


def read_uvarint(buf, pos: int, end: int):
    """Read an unsigned varint (at most 5 bytes, 32 bits) -> (value, new_pos)."""
    buf = flat(buf)
    if not 0 <= pos <= end <= len(buf):
        raise MessageDecodeError("bad bounds", position=pos, reason="length")
    return _uvar(buf, pos, end)


def _uvar(buf, pos: int, end: int):
    """The unsigned varint at ``pos`` of a flat buffer (the decoders' reader)."""
    result, nxt = _wire_uvarint(buf, pos, end, 5)
    if result == -1:
        raise _truncated(pos, max(end - pos + 1, 1), end, "unsigned varint")
    if result == -2:
        raise MessageDecodeError("unsigned varint longer than 5 bytes", position=pos,
                                 reason="varint")
    return result, nxt


def _read_varlong(buf, pos: int, end: int, limit: int):
    """A zigzag varint of at most ``limit // 7`` bytes (35: int32, 70: int64)."""
    result, nxt = _wire_uvarint(buf, pos, end, limit // 7)
    if result == -1:
        raise _truncated(pos, max(end - pos + 1, 1), end, "varint")
    if result == -2:
        raise MessageDecodeError("varint too long", position=pos, reason="varint")
    return zigzag(result), nxt


def _length(buf, pos, end, compact, wide, nullable, what):
    """Read a string/bytes/array length prefix -> (length or -1 for null, new_pos)."""
    if compact:
        n, pos2 = _uvar(buf, pos, end)
        n -= 1
    elif wide:
        if pos + 4 > end:
            raise _truncated(pos, 4, end, f"{what} length")
        n = _I.unpack_from(buf, pos)[0]
        pos2 = pos + 4
    else:
        if pos + 2 > end:
            raise _truncated(pos, 2, end, f"{what} length")
        n = _H.unpack_from(buf, pos)[0]
        pos2 = pos + 2
    if n < 0:
        if n == -1 and nullable:
            return -1, pos2
        raise MessageDecodeError(f"negative {what} length {n} (null not allowed here)",
                                 position=pos, reason="length")
    if n > end - pos2 and what != "array":
        raise MessageDecodeError(
            f"{what} length {n} runs past the end of the frame ({end - pos2} bytes remain)",
            position=pos, reason="length")
    return n, pos2


def _decode_value(mv, pos, end, code, arg):
    fixed = _FIXED.get(code)
    if fixed is not None:
        st, size = fixed
        if pos + size > end:
            raise _truncated(pos, size, end, "field")
        v = st.unpack_from(mv, pos)[0]
        if code == BOOL:
            v = v != 0
        return v, pos + size
    if code == STRING or code == NSTRING or code == CSTRING or code == CNSTRING:
        n, pos2 = _length(mv, pos, end, code >= CSTRING, False, code == NSTRING or code == CNSTRING,
                          "string")
        if n < 0:
            return None, pos2
        try:
            return str(mv[pos2:pos2 + n], "utf-8"), pos2 + n
        except UnicodeDecodeError:
            raise MessageDecodeError("string is not valid UTF-8", position=pos2,
                                     reason="utf8") from None
    if BYTES <= code <= CRECORDS:
        compact = code in (CBYTES, CNBYTES, CRECORDS)
        nullable = code in (NBYTES, CNBYTES, RECORDS, CRECORDS)
        n, pos2 = _length(mv, pos, end, compact, True, nullable, "bytes")
        if n < 0:
            return None, pos2
        if code >= RECORDS:
            return mv[pos2:pos2 + n], pos2 + n
        return bytes(mv[pos2:pos2 + n]), pos2 + n
    if ARRAY <= code <= CNARRAY:
        n, pos2 = _length(mv, pos, end, code >= CARRAY, True, code == NARRAY or code == CNARRAY,
                          "array")
        if n < 0:
            return None, pos2
        if n > end - pos2:
            raise MessageDecodeError(
                f"array of {n} elements cannot fit in the {end - pos2} bytes left in the frame",
                position=pos, reason="length")
        ecode, earg = arg
        if ecode == INT32:
            if pos2 + 4 * n > end:
                raise _truncated(pos2, 4 * n, end, "int32 array")
            return list(struct.unpack_from(f">{n}i", mv, pos2)), pos2 + 4 * n
        out = []
        append = out.append
        if ecode == STRUCT:
            for _ in range(n):
                v, pos2 = _decode(mv, pos2, end, earg)
                append(v)
        else:
            for _ in range(n):
                v, pos2 = _decode_value(mv, pos2, end, ecode, earg)
                append(v)
        return out, pos2
    if code == STRUCT:
        return _decode(mv, pos, end, arg)
    if code == NSTRUCT:
        if pos + 1 > end:
            raise _truncated(pos, 1, end, "nullable struct marker")
        if mv[pos] == 0xFF:
            return None, pos + 1
        return _decode(mv, pos + 1, end, arg)
    if code == UUID:
        if pos + 16 > end:
            raise _truncated(pos, 16, end, "uuid")
        return _uuid.UUID(bytes=bytes(mv[pos:pos + 16])), pos + 16
    if code == UVARINT:
        return _uvar(mv, pos, end)
    if code == VARINT:
        return _read_varlong(mv, pos, end, 35)
    if code == VARLONG:
        return _read_varlong(mv, pos, end, 70)
    raise MessageDecodeError(f"unknown field code {code}", position=pos)


_FMT = {BOOL: "b", INT8: "b", INT16: "h", UINT16: "H", INT32: "i", UINT32: "I", INT64: "q",
        FLOAT64: "d"}
_PLANS = {}


def _plan(prog):
    """The program's wire fields with runs of fixed-size fields merged into one
    ``struct.unpack_from`` each (cached per program)."""
    cached = _PLANS.get(id(prog))
    if cached is not None and cached[0] is prog:
        return cached[1]
    steps = []
    names, fmt, bools = [], "", []

    def flush():
        nonlocal names, fmt, bools
        if names:
            st = struct.Struct(">" + fmt)
            steps.append((True, tuple(names), st, st.size, tuple(bools)))
        names, fmt, bools = [], "", []

    for name, code, arg in prog[1]:
        if code in _FMT:
            if code == BOOL:
                bools.append(name)
            names.append(name)
            fmt += _FMT[code]
        else:
            flush()
            steps.append((False, name, code, arg, None))
    flush()
    _PLANS[id(prog)] = (prog, tuple(steps))
    return tuple(steps)


def _decode(mv, pos, end, prog):
    cls, _ops, _tagged, tag_map, defaults, flexible = prog
    d = {}
    for fixed, name, code, arg, bools in _plan(prog):
        if fixed:
            if pos + arg > end:
                raise _truncated(pos, arg, end, f"fields {', '.join(name)}")
            d.update(zip(name, code.unpack_from(mv, pos)))
            pos += arg
            for b in bools:
                d[b] = d[b] != 0
        else:
            d[name], pos = _decode_value(mv, pos, end, code, arg)
    if flexible:
        count, pos = _uvar(mv, pos, end)
        unknown = None
        for _ in range(count):
            tag, pos = _uvar(mv, pos, end)
            size, pos = _uvar(mv, pos, end)
            if size > end - pos:
                raise MessageDecodeError(
                    f"tagged field {tag} of {size} bytes runs past the end of the frame",
                    position=pos, reason="length")
            known = tag_map.get(tag)
            if known is None:
                if unknown is None:
                    unknown = []
                unknown.append((tag, bytes(mv[pos:pos + size])))
            else:
                name, code, arg = known
                d[name], stop = _decode_value(mv, pos, pos + size, code, arg)
                if stop != pos + size:
                    raise MessageDecodeError(
                        f"tagged field {tag} ({name}) used {stop - pos} of its {size} bytes",
                        position=pos, reason="tag")
            pos += size
        if unknown is not None:
            d[UNKNOWN_TAGS] = unknown
    for name, value, factory in defaults:
        if name not in d:
            d[name] = value if factory is None else factory()
    obj = cls.__new__(cls)
    for name, value in d.items():
        setattr(obj, name, value)
    return obj, pos


def decode_struct(buf, pos: int, end: int, prog):
    """Decode the struct described by ``prog`` from ``buf[pos:end]`` -> (object, new_pos)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if not 0 <= pos <= end <= len(mv):
        raise MessageDecodeError(f"bad bounds [{pos}, {end}) for a buffer of {len(mv)} bytes",
                                 position=pos, reason="length")
    return _decode(mv, pos, end, prog)


# ---- encoding ------------------------------------------------------------------------

def _uvarint(out: bytearray, v: int) -> None:
    if v < 0 or v > 0xFFFFFFFF:
        raise OverflowError(f"{v} does not fit an unsigned 32-bit varint")
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zigzag(out: bytearray, v: int, bits: int) -> None:
    lim = 1 << (bits - 1)
    if not -lim <= v < lim:
        raise OverflowError(f"{v} does not fit a {bits}-bit varint")
    z = ((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1)
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _len_prefix(out, n, compact, wide):
    if compact:
        _uvarint(out, n + 1)
    elif wide:
        out += _I.pack(n)
    else:
        out += _H.pack(n)


def _encode_value(out: bytearray, v, code, arg, big=None) -> None:
    fixed = _FIXED.get(code)
    if fixed is not None:
        if code == BOOL:
            out.append(1 if v else 0)
        else:
            out += fixed[0].pack(v)
        return
    if STRING <= code <= CNSTRING:
        compact = code >= CSTRING
        if v is None:
            if code == STRING or code == CSTRING:
                raise ValueError("null string in a non-nullable field")
            _len_prefix(out, -1, compact, False)
            return
        b = v.encode("utf-8")
        if not compact and len(b) > 0x7FFF:
            raise ValueError(f"string of {len(b)} bytes is longer than 32767")
        _len_prefix(out, len(b), compact, False)
        out += b
        return
    if BYTES <= code <= CRECORDS:
        compact = code in (CBYTES, CNBYTES, CRECORDS)
        if v is None:
            if code == BYTES or code == CBYTES:
                raise ValueError("null bytes in a non-nullable field")
            _len_prefix(out, -1, compact, True)
            return
        b = memoryview(v)
        _len_prefix(out, b.nbytes, compact, True)
        if big is not None and b.nbytes >= _SPLICE_MIN:
            big.append((len(out), b))  # copied once, into the final bytes
        else:
            out += b
        return
    if ARRAY <= code <= CNARRAY:
        compact = code >= CARRAY
        if v is None:
            if code == ARRAY or code == CARRAY:
                raise ValueError("null array in a non-nullable field")
            _len_prefix(out, -1, compact, True)
            return
        _len_prefix(out, len(v), compact, True)
        ecode, earg = arg
        if ecode == STRUCT:
            for item in v:
                _encode(out, item, earg, big)
        else:
            for item in v:
                _encode_value(out, item, ecode, earg, big)
        return
    if code == STRUCT:
        _encode(out, v, arg, big)
        return
    if code == NSTRUCT:
        if v is None:
            out.append(0xFF)
        else:
            out.append(1)
            _encode(out, v, arg, big)
        return
    if code == UUID:
        if isinstance(v, _uuid.UUID):
            out += v.bytes
        else:
            b = bytes(v)
            if len(b) != 16:
                raise ValueError("a uuid needs 16 bytes")
            out += b
        return
    if code == UVARINT:
        _uvarint(out, v)
        return
    if code == VARINT:
        _zigzag(out, v, 32)
        return
    if code == VARLONG:
        _zigzag(out, v, 64)
        return
    raise ValueError(f"unknown field code {code}")


def _encode(out: bytearray, obj, prog, big=None) -> None:
    _cls, ops, tagged, _tag_map, _defaults, flexible = prog
    if isinstance(obj, dict):
        get = obj.__getitem__
    else:
        get = obj.__getattribute__
    for name, code, arg in ops:
        _encode_value(out, get(name), code, arg, big)
    if flexible:
        fields = []
        for tag, name, code, arg, default in tagged:
            v = get(name)
            if v != default:
                buf = bytearray()
                _encode_value(buf, v, code, arg)
                fields.append((tag, buf))
        if isinstance(obj, dict):
            unknown = obj.get(UNKNOWN_TAGS)
        else:
            unknown = getattr(obj, UNKNOWN_TAGS, None)
        if unknown:
            fields.extend(unknown)
            fields.sort(key=lambda f: f[0])
        _uvarint(out, len(fields))
        for tag, raw in fields:
            _uvarint(out, tag)
            _uvarint(out, len(raw))
            out += raw


def encode_struct(obj, prog, out: bytearray) -> None:
    """Append the encoding of ``obj`` (attributes named by ``prog``) to ``out``."""
    _encode(out, obj, prog)


def encode_message(obj, prog, prefix, sized: bool) -> bytes:
    """``prefix`` + the encoding of ``obj`` as one new bytes object; with ``sized``
    the first 4 bytes of ``prefix`` (a placeholder) become the int32 size of
    everything after them."""
    out = bytearray(prefix)
    big = []
    _encode(out, obj, prog, big)
    total = len(out) + sum(b.nbytes for _, b in big)
    if sized:
        if total - 4 > 0x7FFFFFFF:
            raise OverflowError(f"message of {total - 4} bytes does not fit a Kafka frame")
        out[0:4] = _I.pack(total - 4)
    if not big:
        return bytes(out)
    view = memoryview(out)
    parts = []
    src = 0
    for at, b in big:
        parts.append(view[src:at])
        parts.append(b)
        src = at
    parts.append(view[src:])
    return b"".join(parts)
