# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Protocol kernels, compiled twin: interpret compiled struct programs.

Same contract as :mod:`kafkawire._pure.protocol`: ``decode_struct`` reads one
struct from ``buf[pos:end]`` through a raw pointer with explicit bounds checks
(never past ``end``), ``encode_struct`` appends to a bytearray in place.
"""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from kafkawire._fast.wire cimport (kw_be_u32 as _be32, kw_be_u64 as _be64, kw_uvarint64,
                                   zigzag32, zigzag64, WIRE_TRUNCATED, Bytes,
                                   bytes_open, bytes_close)
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8String
from cpython.object cimport PyObject, PyTypeObject
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF, Py_DECREF

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* tp, Py_ssize_t nitems)
    int PyObject_GenericSetAttr(object o, object name, object value) except -1
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

import struct as _struct
import uuid as _uuid

from kafkawire._protocol_common import MessageDecodeError, UNKNOWN_TAGS

__all__ = ["decode_struct", "encode_struct", "encode_message", "read_uvarint"]


# codes (see kafkawire/_protocol_common.py; a test checks they agree)
cdef enum:
    SPLICE_MIN = 65536
    C_BOOL = 0
    C_INT8 = 1
    C_INT16 = 2
    C_INT32 = 3
    C_INT64 = 4
    C_UINT16 = 5
    C_UINT32 = 6
    C_VARINT = 7
    C_VARLONG = 8
    C_UVARINT = 9
    C_FLOAT64 = 10
    C_UUID = 11
    C_STRING = 12
    C_NSTRING = 13
    C_CSTRING = 14
    C_CNSTRING = 15
    C_BYTES = 16
    C_NBYTES = 17
    C_CBYTES = 18
    C_CNBYTES = 19
    C_RECORDS = 20
    C_CRECORDS = 21
    C_ARRAY = 22
    C_NARRAY = 23
    C_CARRAY = 24
    C_CNARRAY = 25
    C_STRUCT = 26
    C_NSTRUCT = 27

CODES = {"BOOL": C_BOOL, "INT8": C_INT8, "INT16": C_INT16, "INT32": C_INT32, "INT64": C_INT64,
         "UINT16": C_UINT16, "UINT32": C_UINT32, "VARINT": C_VARINT, "VARLONG": C_VARLONG,
         "UVARINT": C_UVARINT, "FLOAT64": C_FLOAT64, "UUID": C_UUID, "STRING": C_STRING,
         "NSTRING": C_NSTRING, "CSTRING": C_CSTRING, "CNSTRING": C_CNSTRING, "BYTES": C_BYTES,
         "NBYTES": C_NBYTES, "CBYTES": C_CBYTES, "CNBYTES": C_CNBYTES, "RECORDS": C_RECORDS,
         "CRECORDS": C_CRECORDS, "ARRAY": C_ARRAY, "NARRAY": C_NARRAY, "CARRAY": C_CARRAY,
         "CNARRAY": C_CNARRAY, "STRUCT": C_STRUCT, "NSTRUCT": C_NSTRUCT}

cdef object _UUID = _uuid.UUID
cdef object _D = _struct.Struct(">d")


cdef object _truncated(Py_ssize_t pos, Py_ssize_t need, Py_ssize_t end, str what):
    cdef Py_ssize_t left = end - pos
    if left < 0:
        left = 0
    return MessageDecodeError(
        f"{what} needs {need} bytes but only {left} remain in the frame "
        "(truncated or corrupt message)", position=pos, reason="truncated")


cdef inline Py_ssize_t _need(Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """Bytes a varint at ``start`` that ran into ``end`` needed at least."""
    return end - start + 1 if end >= start else 1


cdef int64_t _uvar(const unsigned char* p, Py_ssize_t* ppos, Py_ssize_t end) except -1:
    cdef Py_ssize_t start = ppos[0]
    cdef uint64_t result = 0
    cdef int err = 0
    cdef const unsigned char* q = kw_uvarint64(p + start, p + end, 5, &result, &err)
    if q == NULL:
        if err == WIRE_TRUNCATED:
            raise _truncated(start, _need(start, end), end, "unsigned varint")
        raise MessageDecodeError("unsigned varint longer than 5 bytes", position=start,
                                 reason="varint")
    if result > 0xFFFFFFFF:
        raise MessageDecodeError("unsigned varint over 32 bits", position=start, reason="varint")
    ppos[0] = q - p
    return <int64_t>result


cdef object _zigzag_read(const unsigned char* p, Py_ssize_t* ppos, Py_ssize_t end, int limit):
    """A zigzag varint of at most ``limit // 7`` bytes (limit 35: int32, 70: int64)."""
    cdef Py_ssize_t start = ppos[0]
    cdef uint64_t result = 0
    cdef int err = 0
    cdef const unsigned char* q = kw_uvarint64(p + start, p + end, limit // 7, &result, &err)
    if q == NULL:
        if err == WIRE_TRUNCATED:
            raise _truncated(start, _need(start, end), end, "varint")
        raise MessageDecodeError("varint too long", position=start, reason="varint")
    ppos[0] = q - p
    if limit == 35:
        return zigzag32(<uint32_t>result)
    return zigzag64(result)


cdef Py_ssize_t _length(const unsigned char* p, Py_ssize_t* ppos, Py_ssize_t end, bint compact,
                        bint wide, bint nullable, bint check_fit, str what) except -2:
    cdef Py_ssize_t pos = ppos[0]
    cdef int64_t n
    if compact:
        n = _uvar(p, ppos, end) - 1
    elif wide:
        if pos + 4 > end:
            raise _truncated(pos, 4, end, what + " length")
        n = <int32_t>_be32(p + pos)
        ppos[0] = pos + 4
    else:
        if pos + 2 > end:
            raise _truncated(pos, 2, end, what + " length")
        n = <int16_t>((p[pos] << 8) | p[pos + 1])
        ppos[0] = pos + 2
    if n < 0:
        if n == -1 and nullable:
            return -1
        raise MessageDecodeError(f"negative {what} length {n} (null not allowed here)",
                                 position=pos, reason="length")
    if check_fit and n > end - ppos[0]:
        raise MessageDecodeError(
            f"{what} length {n} runs past the end of the frame ({end - ppos[0]} bytes remain)",
            position=pos, reason="length")
    return <Py_ssize_t>n


cdef object _dec_value(const unsigned char* p, Py_ssize_t* ppos, Py_ssize_t end, int code,
                       object arg, object mv):
    cdef Py_ssize_t pos = ppos[0], n, i
    cdef int ecode
    cdef list out
    cdef object earg, v
    if code == C_INT32:
        if pos + 4 > end:
            raise _truncated(pos, 4, end, "int32 field")
        ppos[0] = pos + 4
        return <int32_t>_be32(p + pos)
    if code == C_INT16:
        if pos + 2 > end:
            raise _truncated(pos, 2, end, "int16 field")
        ppos[0] = pos + 2
        return <int16_t>((p[pos] << 8) | p[pos + 1])
    if code == C_INT64:
        if pos + 8 > end:
            raise _truncated(pos, 8, end, "int64 field")
        ppos[0] = pos + 8
        return <int64_t>_be64(p + pos)
    if code == C_INT8 or code == C_BOOL:
        if pos + 1 > end:
            raise _truncated(pos, 1, end, "int8 field")
        ppos[0] = pos + 1
        if code == C_BOOL:
            return p[pos] != 0
        return <int8_t>p[pos]
    if code == C_UINT16:
        if pos + 2 > end:
            raise _truncated(pos, 2, end, "uint16 field")
        ppos[0] = pos + 2
        return <uint16_t>((p[pos] << 8) | p[pos + 1])
    if code == C_UINT32:
        if pos + 4 > end:
            raise _truncated(pos, 4, end, "uint32 field")
        ppos[0] = pos + 4
        return _be32(p + pos)
    if code >= C_STRING and code <= C_CNSTRING:
        n = _length(p, ppos, end, code >= C_CSTRING, False,
                    code == C_NSTRING or code == C_CNSTRING, True, "string")
        if n < 0:
            return None
        pos = ppos[0]
        ppos[0] = pos + n
        try:
            return PyUnicode_DecodeUTF8(<const char*>(p + pos), n, NULL)
        except UnicodeDecodeError:
            raise MessageDecodeError("string is not valid UTF-8", position=pos,
                                     reason="utf8") from None
    if code >= C_ARRAY and code <= C_CNARRAY:
        n = _length(p, ppos, end, code >= C_CARRAY, True, code == C_NARRAY or code == C_CNARRAY,
                    False, "array")
        if n < 0:
            return None
        if n > end - ppos[0]:
            raise MessageDecodeError(
                f"array of {n} elements cannot fit in the {end - ppos[0]} bytes left in the frame",
                position=pos, reason="length")
        ecode = (<tuple>arg)[0]
        earg = (<tuple>arg)[1]
        out = []
        if ecode == C_STRUCT:
            for i in range(n):
                out.append(_dec_struct(p, ppos, end, <tuple>earg, mv))
        elif ecode == C_INT32:
            pos = ppos[0]
            if pos + 4 * n > end:
                raise _truncated(pos, 4 * n, end, "int32 array")
            out = PyList_New(n)
            for i in range(n):
                v = <int32_t>_be32(p + pos + 4 * i)
                Py_INCREF(v)
                PyList_SET_ITEM(out, i, v)
            ppos[0] = pos + 4 * n
        else:
            for i in range(n):
                out.append(_dec_value(p, ppos, end, ecode, earg, mv))
        return out
    if code >= C_BYTES and code <= C_CRECORDS:
        n = _length(p, ppos, end, code == C_CBYTES or code == C_CNBYTES or code == C_CRECORDS,
                    True, code != C_BYTES and code != C_CBYTES, True, "bytes")
        if n < 0:
            return None
        pos = ppos[0]
        ppos[0] = pos + n
        if code >= C_RECORDS:
            return mv[pos:pos + n]
        return PyBytes_FromStringAndSize(<const char*>(p + pos), n)
    if code == C_STRUCT:
        return _dec_struct(p, ppos, end, <tuple>arg, mv)
    if code == C_NSTRUCT:
        if pos + 1 > end:
            raise _truncated(pos, 1, end, "nullable struct marker")
        ppos[0] = pos + 1
        if p[pos] == 0xFF:
            return None
        return _dec_struct(p, ppos, end, <tuple>arg, mv)
    if code == C_UUID:
        if pos + 16 > end:
            raise _truncated(pos, 16, end, "uuid")
        ppos[0] = pos + 16
        return _UUID(bytes=PyBytes_FromStringAndSize(<const char*>(p + pos), 16))
    if code == C_FLOAT64:
        if pos + 8 > end:
            raise _truncated(pos, 8, end, "float64 field")
        ppos[0] = pos + 8
        return _D.unpack(PyBytes_FromStringAndSize(<const char*>(p + pos), 8))[0]
    if code == C_UVARINT:
        return _uvar(p, ppos, end)
    if code == C_VARINT:
        return _zigzag_read(p, ppos, end, 35)
    if code == C_VARLONG:
        return _zigzag_read(p, ppos, end, 70)
    raise MessageDecodeError(f"unknown field code {code}", position=pos)


cdef dict _offset_cache = {}


cdef Py_ssize_t _slot_offset(object cls, object name):
    """Byte offset of slot ``name`` in instances of ``cls``, or -1 (use setattr)."""
    for klass in cls.__mro__:
        descr = klass.__dict__.get(name)
        if descr is not None:
            if type(descr).__name__ == "member_descriptor" and type(descr).__module__ == "builtins":
                return (<PyMemberDescrObject*>descr).d_member.offset
            return -1
    return -1


cdef tuple _offsets(tuple prog):
    """Per program: slot offsets of its wire fields and of its defaults (cached)."""
    cdef object r = _offset_cache.get(id(prog))
    if r is None or (<tuple>r)[0] is not prog:
        cls = prog[0]
        r = (prog, tuple([_slot_offset(cls, op[0]) for op in <tuple>prog[1]]),
             tuple([_slot_offset(cls, op[0]) for op in <tuple>prog[4]]))
        _offset_cache[id(prog)] = r
    return <tuple>r


cdef inline int _store(object obj, Py_ssize_t off, object name, object value) except -1:
    cdef PyObject** slot
    cdef PyObject* old
    if off < 0:
        return PyObject_GenericSetAttr(obj, name, value)
    slot = <PyObject**>((<char*><PyObject*>obj) + off)
    old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject*>value
    if old != NULL:
        Py_DECREF(<object>old)
    return 0


cdef object _dec_struct(const unsigned char* p, Py_ssize_t* ppos, Py_ssize_t end, tuple prog,
                        object mv):
    # Attributes go straight onto a fresh instance (CPython keeps them in the
    # class's shared-key storage: no per-object dict to build, rehash or free).
    # Defaults first: fields absent in this version, tagged fields not sent.
    cdef tuple op
    cdef Py_ssize_t count, i, size, tag, start
    cdef object known, unknown = None, factory
    cdef object cls = prog[0]
    cdef object obj = PyType_GenericAlloc(<PyTypeObject*>cls, 0)
    cdef tuple offs = _offsets(prog)
    cdef tuple op_offs = <tuple>offs[1]
    cdef tuple def_offs = <tuple>offs[2]
    cdef Py_ssize_t k = 0
    for op in <tuple>prog[4]:
        factory = op[2]
        _store(obj, <Py_ssize_t>def_offs[k], op[0], op[1] if factory is None else factory())
        k += 1
    k = 0
    for op in <tuple>prog[1]:
        _store(obj, <Py_ssize_t>op_offs[k], op[0], _dec_value(p, ppos, end, <int>op[1], op[2], mv))
        k += 1
    if prog[5]:
        count = _uvar(p, ppos, end)
        for i in range(count):
            tag = _uvar(p, ppos, end)
            size = _uvar(p, ppos, end)
            start = ppos[0]
            if size > end - start:
                raise MessageDecodeError(
                    f"tagged field {tag} of {size} bytes runs past the end of the frame",
                    position=start, reason="length")
            known = (<dict>prog[3]).get(tag)
            if known is None:
                if unknown is None:
                    unknown = []
                unknown.append((tag, PyBytes_FromStringAndSize(<const char*>(p + start), size)))
            else:
                PyObject_GenericSetAttr(obj, (<tuple>known)[0], _dec_value(
                    p, ppos, start + size, <int>(<tuple>known)[1], (<tuple>known)[2], mv))
                if ppos[0] != start + size:
                    raise MessageDecodeError(
                        f"tagged field {tag} ({(<tuple>known)[0]}) used {ppos[0] - start} of "
                        f"its {size} bytes", position=start, reason="tag")
            ppos[0] = start + size
        if unknown is not None:
            PyObject_GenericSetAttr(obj, UNKNOWN_TAGS, unknown)
    return obj


def decode_struct(buf, Py_ssize_t pos, Py_ssize_t end, tuple prog):
    """Decode the struct described by ``prog`` from ``buf[pos:end]`` -> (object, new_pos)."""
    cdef Py_buffer view
    cdef Py_ssize_t cur = pos
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    PyObject_GetBuffer(mv, &view, PyBUF_SIMPLE)
    try:
        if not (0 <= pos <= end <= view.len):
            raise MessageDecodeError(f"bad bounds [{pos}, {end}) for a buffer of {view.len} bytes",
                                     position=pos, reason="length")
        obj = _dec_struct(<const unsigned char*>view.buf, &cur, end, prog, mv)
    finally:
        PyBuffer_Release(&view)
    return obj, cur


def read_uvarint(buf, Py_ssize_t pos, Py_ssize_t end):
    """Read an unsigned varint (at most 5 bytes, 32 bits) -> (value, new_pos)."""
    cdef Bytes b
    cdef Py_ssize_t cur = pos
    bytes_open(&b, buf)
    try:
        if not (0 <= pos <= end <= b.n):
            raise MessageDecodeError("bad bounds", position=pos, reason="length")
        if pos == end:
            raise _truncated(pos, 1, end, "unsigned varint")
        v = _uvar(b.p, &cur, end)
    finally:
        bytes_close(&b)
    return v, cur


# ---- encoding ------------------------------------------------------------------------

cdef int _put(bytearray out, const void* src, Py_ssize_t n) except -1:
    cdef Py_ssize_t old = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, old + n)
    memcpy(PyByteArray_AS_STRING(out) + old, src, n)
    return 0


cdef inline int _put_be(bytearray out, uint64_t v, int size) except -1:
    cdef unsigned char b[8]
    cdef int i
    for i in range(size):
        b[size - 1 - i] = <unsigned char>(v & 0xFF)
        v >>= 8
    return _put(out, b, size)


cdef int _put_uvar(bytearray out, object value) except -1:
    cdef unsigned char b[10]
    cdef int n = 0
    if value < 0 or value > 0xFFFFFFFF:
        raise OverflowError(f"{value} does not fit an unsigned 32-bit varint")
    cdef uint64_t v = value
    while v >= 0x80:
        b[n] = <unsigned char>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    b[n] = <unsigned char>v
    return _put(out, b, n + 1)


cdef int _put_zigzag(bytearray out, object value, int bits) except -1:
    cdef unsigned char b[10]
    cdef int n = 0
    cdef int64_t s
    cdef uint64_t z
    if bits == 32:
        if not (-2147483648 <= value <= 2147483647):
            raise OverflowError(f"{value} does not fit a 32-bit varint")
        s = value
        z = (<uint64_t>(<uint32_t>((<int32_t>s << 1) ^ (<int32_t>s >> 31))))
    else:
        s = value
        z = (<uint64_t>s << 1) ^ (<uint64_t>(s >> 63))
    while z >= 0x80:
        b[n] = <unsigned char>((z & 0x7F) | 0x80)
        z >>= 7
        n += 1
    b[n] = <unsigned char>z
    return _put(out, b, n + 1)


cdef int _put_len(bytearray out, Py_ssize_t n, bint compact, bint wide) except -1:
    if compact:
        return _put_uvar(out, n + 1)
    if wide:
        return _put_be(out, <uint32_t><int32_t>n, 4)
    return _put_be(out, <uint16_t><int16_t>n, 2)


cdef int _enc_value(bytearray out, object v, int code, object arg, list splices) except -1:
    cdef bint compact
    cdef bytes b
    cdef Py_buffer view
    cdef int ecode
    cdef object earg, item
    if code == C_INT32:
        if not (-2147483648 <= v <= 2147483647):
            raise OverflowError(f"{v} out of int32 range")
        return _put_be(out, <uint32_t><int32_t>v, 4)
    if code == C_INT16:
        if not (-32768 <= v <= 32767):
            raise OverflowError(f"{v} out of int16 range")
        return _put_be(out, <uint16_t><int16_t>v, 2)
    if code == C_INT64:
        return _put_be(out, <uint64_t><int64_t>v, 8)
    if code == C_INT8:
        if not (-128 <= v <= 127):
            raise OverflowError(f"{v} out of int8 range")
        return _put_be(out, <uint8_t><int8_t>v, 1)
    if code == C_BOOL:
        return _put_be(out, 1 if v else 0, 1)
    if code == C_UINT16:
        if not (0 <= v <= 65535):
            raise OverflowError(f"{v} out of uint16 range")
        return _put_be(out, <uint16_t>v, 2)
    if code == C_UINT32:
        if not (0 <= v <= 0xFFFFFFFF):
            raise OverflowError(f"{v} out of uint32 range")
        return _put_be(out, <uint32_t>v, 4)
    if code >= C_STRING and code <= C_CNSTRING:
        compact = code >= C_CSTRING
        if v is None:
            if code == C_STRING or code == C_CSTRING:
                raise ValueError("null string in a non-nullable field")
            return _put_len(out, -1, compact, False)
        if not isinstance(v, str):
            raise TypeError(f"expected str, got {type(v).__name__}")
        b = PyUnicode_AsUTF8String(v)
        if not compact and len(b) > 0x7FFF:
            raise ValueError(f"string of {len(b)} bytes is longer than 32767")
        _put_len(out, len(b), compact, False)
        return _put(out, <const char*>b, len(b))
    if code >= C_ARRAY and code <= C_CNARRAY:
        compact = code >= C_CARRAY
        if v is None:
            if code == C_ARRAY or code == C_CARRAY:
                raise ValueError("null array in a non-nullable field")
            return _put_len(out, -1, compact, True)
        _put_len(out, len(v), compact, True)
        ecode = (<tuple>arg)[0]
        earg = (<tuple>arg)[1]
        if ecode == C_STRUCT:
            for item in v:
                _enc_struct(out, item, <tuple>earg, splices)
        else:
            for item in v:
                _enc_value(out, item, ecode, earg, splices)
        return 0
    if code >= C_BYTES and code <= C_CRECORDS:
        compact = code == C_CBYTES or code == C_CNBYTES or code == C_CRECORDS
        if v is None:
            if code == C_BYTES or code == C_CBYTES:
                raise ValueError("null bytes in a non-nullable field")
            return _put_len(out, -1, compact, True)
        PyObject_GetBuffer(v, &view, PyBUF_SIMPLE)
        try:
            _put_len(out, view.len, compact, True)
            if splices is not None and view.len >= SPLICE_MIN:
                # big record sections are copied once, into the final bytes
                splices.append((PyByteArray_GET_SIZE(out), v, view.len))
            else:
                _put(out, view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        return 0
    if code == C_STRUCT:
        return _enc_struct(out, v, <tuple>arg, splices)
    if code == C_NSTRUCT:
        if v is None:
            return _put_be(out, 0xFF, 1)
        _put_be(out, 1, 1)
        return _enc_struct(out, v, <tuple>arg, splices)
    if code == C_UUID:
        if isinstance(v, _UUID):
            b = v.bytes
        else:
            b = bytes(v)
            if len(b) != 16:
                raise ValueError("a uuid needs 16 bytes")
        return _put(out, <const char*>b, 16)
    if code == C_FLOAT64:
        b = _D.pack(v)
        return _put(out, <const char*>b, 8)
    if code == C_UVARINT:
        return _put_uvar(out, v)
    if code == C_VARINT:
        return _put_zigzag(out, v, 32)
    if code == C_VARLONG:
        return _put_zigzag(out, v, 64)
    raise ValueError(f"unknown field code {code}")


cdef int _enc_struct(bytearray out, object obj, tuple prog, list splices) except -1:
    cdef tuple op
    cdef list fields
    cdef bytearray tmp
    if isinstance(obj, dict):
        return _enc_struct_dict(out, <dict>obj, prog, splices)
    for op in <tuple>prog[1]:
        _enc_value(out, getattr(obj, op[0]), <int>op[1], op[2], splices)
    if prog[5]:
        fields = []
        for op in <tuple>prog[2]:
            v = getattr(obj, op[1])
            if v != op[4]:
                tmp = bytearray()
                _enc_value(tmp, v, <int>op[2], op[3], None)
                fields.append((op[0], tmp))
        unknown = getattr(obj, UNKNOWN_TAGS, None)
        _put_tags(out, fields, unknown)
    return 0


cdef int _put_tags(bytearray out, list fields, object unknown) except -1:
    if unknown:
        fields.extend(unknown)
        fields.sort(key=_first)
    _put_uvar(out, len(fields))
    for tag, raw in fields:
        _put_uvar(out, tag)
        _put_uvar(out, len(raw))
        out += raw
    return 0


cdef int _enc_struct_dict(bytearray out, dict d, tuple prog, list splices) except -1:
    cdef tuple op
    cdef list fields
    cdef bytearray tmp
    for op in <tuple>prog[1]:
        _enc_value(out, d[op[0]], <int>op[1], op[2], splices)
    if prog[5]:
        fields = []
        for op in <tuple>prog[2]:
            v = d[op[1]]
            if v != op[4]:
                tmp = bytearray()
                _enc_value(tmp, v, <int>op[2], op[3], None)
                fields.append((op[0], tmp))
        _put_tags(out, fields, d.get(UNKNOWN_TAGS))
    return 0


def _first(t):
    return t[0]


def encode_struct(obj, tuple prog, bytearray out):
    """Append the encoding of ``obj`` (attributes named by ``prog``) to ``out``."""
    _enc_struct(out, obj, prog, None)


def encode_message(obj, tuple prog, prefix, bint sized):
    """``prefix`` + the encoding of ``obj`` as one new bytes object.

    Large bytes/records fields are copied straight into the result instead of
    through a growing buffer.  With ``sized``, the first 4 bytes of ``prefix``
    (a placeholder) become the int32 size of everything after them."""
    cdef bytearray out = bytearray(prefix)
    cdef list splices = []
    cdef Py_ssize_t total, src, dst, n, at
    cdef Py_buffer view
    cdef char* res
    _enc_struct(out, obj, prog, splices)
    total = PyByteArray_GET_SIZE(out)
    for item in splices:
        total += <Py_ssize_t>item[2]
    if sized and total - 4 > 0x7FFFFFFF:
        raise OverflowError(f"message of {total - 4} bytes does not fit a Kafka frame")
    result = PyBytes_FromStringAndSize(NULL, total)
    res = <char*>(<bytes>result)
    src = 0
    dst = 0
    cdef const char* base = PyByteArray_AS_STRING(out)
    for item in splices:
        at = <Py_ssize_t>item[0]
        memcpy(res + dst, base + src, at - src)
        dst += at - src
        src = at
        PyObject_GetBuffer(item[1], &view, PyBUF_SIMPLE)
        try:
            n = view.len if view.len <= <Py_ssize_t>item[2] else <Py_ssize_t>item[2]
            memcpy(res + dst, view.buf, n)
            dst += n
        finally:
            PyBuffer_Release(&view)
    memcpy(res + dst, base + src, PyByteArray_GET_SIZE(out) - src)
    if sized:
        n = total - 4
        res[0] = <char>((n >> 24) & 0xFF)
        res[1] = <char>((n >> 16) & 0xFF)
        res[2] = <char>((n >> 8) & 0xFF)
        res[3] = <char>(n & 0xFF)
    return result
