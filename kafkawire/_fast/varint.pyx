# cython: language_level=3
"""Varints (compiled twin of ``kafkawire/_pure/varint.py``; same contract)."""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint64_t
from kafkawire._fast.wire cimport kw_uvarint64

from kafkawire.errors import CorruptRecordError

__all__ = ["read_varint", "read_varlong", "read_unsigned_varint", "read_unsigned_varlong",
           "write_varint", "write_varlong", "write_unsigned_varint", "write_unsigned_varlong",
           "size_of_varint", "size_of_varlong", "size_of_unsigned_varint"]


cdef object _read(object buf, Py_ssize_t pos, int maxbytes, uint64_t *out):
    cdef Py_buffer view
    cdef int err = 0
    cdef const unsigned char *p
    cdef const unsigned char *q
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        if pos < 0 or pos >= view.len:
            err = 1
            q = NULL
        else:
            q = kw_uvarint64(p + pos, p + view.len, maxbytes, out, &err)
    finally:
        PyBuffer_Release(&view)
    if q == NULL:
        if err == 2:
            raise CorruptRecordError(f"varint longer than {maxbytes} bytes", position=pos,
                                     reason="varint")
        raise CorruptRecordError("varint runs past the end of the data", position=pos,
                                 reason="truncated")
    return pos + (q - (p + pos))


def read_unsigned_varint(buf, Py_ssize_t pos):
    """Unsigned 32-bit varint at ``pos`` -> ``(value, next_pos)``."""
    cdef uint64_t v
    nxt = _read(buf, pos, 5, &v)
    return <uint64_t>(v & 0xFFFFFFFF), nxt


def read_unsigned_varlong(buf, Py_ssize_t pos):
    """Unsigned 64-bit varint at ``pos`` -> ``(value, next_pos)``."""
    cdef uint64_t v
    nxt = _read(buf, pos, 10, &v)
    return v, nxt


def read_varint(buf, Py_ssize_t pos):
    """Zigzag 32-bit varint at ``pos`` -> ``(value, next_pos)``."""
    cdef uint64_t v
    cdef unsigned int u
    nxt = _read(buf, pos, 5, &v)
    u = <unsigned int>(v & 0xFFFFFFFF)
    return <int32_t>((u >> 1) ^ (0u - (u & 1))), nxt


def read_varlong(buf, Py_ssize_t pos):
    """Zigzag 64-bit varint at ``pos`` -> ``(value, next_pos)``."""
    cdef uint64_t v
    nxt = _read(buf, pos, 10, &v)
    return <int64_t>((v >> 1) ^ (0ull - (v & 1))), nxt


cdef bytes _write(uint64_t v):
    cdef unsigned char tmp[10]
    cdef int n = 0
    while v >= 0x80:
        tmp[n] = <unsigned char>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    tmp[n] = <unsigned char>v
    return PyBytes_FromStringAndSize(<char *>tmp, n + 1)


def write_unsigned_varint(value):
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _write(<uint64_t>value)


def write_unsigned_varlong(value):
    if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        raise ValueError(f"unsigned varlong out of range: {value}")
    return _write(<uint64_t>value)


def write_varint(value):
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ValueError(f"varint out of 32-bit range: {value}")
    cdef int32_t v = value
    return _write(<uint64_t>((<unsigned int>v << 1) ^ <unsigned int>(v >> 31)))


def write_varlong(value):
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong out of 64-bit range: {value}")
    cdef int64_t v = value
    return _write((<uint64_t>v << 1) ^ <uint64_t>(v >> 63))


def size_of_unsigned_varint(value):
    """Bytes needed for an unsigned varint/varlong."""
    cdef uint64_t v = value
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def size_of_varint(value):
    cdef int32_t v = value
    return size_of_unsigned_varint((<unsigned int>v << 1) ^ <unsigned int>(v >> 31))


def size_of_varlong(value):
    cdef int64_t v = value
    return size_of_unsigned_varint((<uint64_t>v << 1) ^ <uint64_t>(v >> 63))
