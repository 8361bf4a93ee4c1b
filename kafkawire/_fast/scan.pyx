# cython: language_level=3
# distutils: sources = kafkawire/_fast/crc_impl.c
"""Batch header scan (compiled twin of ``kafkawire/_pure/scan.py``).

The contract of ``scan_batches`` is in ``kafkawire/_pure/scan.py``'s docstring.
The loop runs without the GIL over a raw pointer; rows go to a growable C
array copied into the numpy result at the end.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy
from kafkawire._fast.wire cimport kw_be_i16, kw_be_i32, kw_be_u32, kw_be_i64

import zlib
import numpy as np
cimport numpy as cnp

from kafkawire import _scan_common as C

cnp.import_array()

__all__ = ["scan_batches", "scan_batch_objects"]

cdef extern from "crc_impl.h":
    uint32_t kw_crc32c(uint32_t crc, const unsigned char *buf, size_t len) nogil

cdef enum:
    NF = 14
    # internal status: a legacy message whose CRC-32 the caller must check with zlib
    NEED_LEGACY_CRC = 100

cdef struct Rows:
    int64_t *data
    Py_ssize_t n
    Py_ssize_t cap


cdef int grow(Rows *r) noexcept nogil:
    cdef Py_ssize_t cap = r.cap * 2 if r.cap else 64
    cdef int64_t *d = <int64_t *>realloc(r.data, cap * NF * sizeof(int64_t))
    if d == NULL:
        return -1
    r.data = d
    r.cap = cap
    return 0


cdef int scan_core(const unsigned char *buf, Py_ssize_t *ppos, Py_ssize_t end,
                   Py_ssize_t max_count, bint check_crc, bint skip_legacy_crc,
                   Rows *rows) noexcept nogil:
    """Scan from *ppos; leave *ppos at the stop position; return a status."""
    cdef Py_ssize_t pos = ppos[0]
    cdef int32_t length
    cdef Py_ssize_t size
    cdef int magic, attrs
    cdef int64_t *row
    cdef int64_t ts
    cdef const unsigned char *b
    cdef int status = 0
    while pos < end:
        if max_count >= 0 and rows.n >= max_count:
            break
        if end - pos < 12:
            status = 1
            break
        b = buf + pos
        length = kw_be_i32(b + 8)
        if length < 14:
            status = 2
            break
        size = <Py_ssize_t>length + 12
        if size > end - pos:
            status = 1
            break
        magic = <signed char>b[16]
        if magic == 2:
            if length < 49:
                status = 2
                break
            if check_crc and kw_crc32c(0, b + 21, size - 21) != kw_be_u32(b + 17):
                status = 4
                break
        elif magic == 0 or magic == 1:
            if magic == 1 and length < 22:
                status = 2
                break
            if check_crc and not skip_legacy_crc:
                status = NEED_LEGACY_CRC
                break
            skip_legacy_crc = False
        else:
            status = 3
            break
        if rows.n == rows.cap and grow(rows) < 0:
            status = -1
            break
        row = rows.data + rows.n * NF
        rows.n += 1
        row[0] = pos
        row[1] = size
        row[4] = magic
        row[6] = kw_be_u32(b + 12)
        if magic == 2:
            row[2] = kw_be_i64(b)
            row[3] = row[2] + kw_be_i32(b + 23)
            row[5] = <unsigned short>kw_be_i16(b + 21)
            row[7] = kw_be_i32(b + 12)
            row[6] = kw_be_u32(b + 17)
            row[8] = kw_be_i64(b + 27)
            row[9] = kw_be_i64(b + 35)
            row[10] = kw_be_i64(b + 43)
            row[11] = kw_be_i16(b + 51)
            row[12] = kw_be_i32(b + 53)
            row[13] = kw_be_i32(b + 57)
        else:
            attrs = b[17]
            ts = kw_be_i64(b + 18) if magic == 1 else -1
            row[2] = kw_be_i64(b)
            row[3] = row[2]
            row[5] = attrs
            row[7] = -1
            row[8] = ts
            row[9] = ts
            row[10] = -1
            row[11] = -1
            row[12] = -1
            row[13] = -1 if (attrs & 7) else 1
        pos += size
    ppos[0] = pos
    return status


def scan_batches(buf, Py_ssize_t start=0, Py_ssize_t end=-1, Py_ssize_t max_count=-1,
                 bint check_crc=False):
    """Read batch headers of ``buf[start:end]``; see ``kafkawire._pure.scan``."""
    cdef Py_buffer view
    cdef Rows rows
    cdef Py_ssize_t pos
    cdef int status
    cdef bint skip = False
    cdef const unsigned char *p
    cdef cnp.ndarray out
    rows.data = NULL
    rows.n = 0
    rows.cap = 0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        if end < 0 or end > view.len:
            end = view.len
        if start < 0:
            start = 0
        pos = start
        while True:
            with nogil:
                status = scan_core(p, &pos, end, max_count, check_crc, skip, &rows)
            if status != NEED_LEGACY_CRC:
                break
            size = kw_be_i32(p + pos + 8) + 12
            stored = kw_be_u32(p + pos + 12)
            if zlib.crc32((<object>memoryview(buf).cast("B"))[pos + 16:pos + size]) != stored:
                status = 4
                break
            skip = True
        if status < 0:
            raise MemoryError("scan_batches: out of memory for the header array")
        out = np.empty((rows.n, NF), dtype=np.int64)
        if rows.n:
            memcpy(cnp.PyArray_DATA(out), rows.data, rows.n * NF * sizeof(int64_t))
    finally:
        PyBuffer_Release(&view)
        free(rows.data)
    return out, pos, status


from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.list cimport PyList_New, PyList_SET_ITEM

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
        const char *doc
    enum:
        T_OBJECT_EX

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    ctypedef struct PyTypeObject:
        Py_ssize_t tp_basicsize
        PyObject *(*tp_alloc)(PyTypeObject *, Py_ssize_t)


cdef Py_ssize_t _slot_offset(type cls, object name) except -1:
    descr = None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            descr = klass.__dict__[name]
            break
    if descr is None or type(descr).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{name} is not a __slots__ member")
    cdef PyMemberDef *m = (<PyMemberDescrObject *><PyObject *>descr).d_member
    if m.type != T_OBJECT_EX or m.offset <= 0 or \
            m.offset + <Py_ssize_t>sizeof(PyObject *) > (<PyTypeObject *>cls).tp_basicsize:
        raise TypeError(f"{cls.__name__}.{name} is not an object slot")
    return m.offset


cdef inline void _set_slot(PyObject *obj, Py_ssize_t off, object value):
    cdef PyObject **slot = <PyObject **>((<char *>obj) + off)
    Py_INCREF(value)
    Py_XDECREF(slot[0])
    slot[0] = <PyObject *>value


cdef dict _offset_cache = {}
_ACYCLIC = {bytes, int, type(None), str, float, bool}

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)


cdef tuple _offsets(type v2_type, tuple slot_names, tuple extra_names):
    key = (v2_type, slot_names, extra_names)
    got = _offset_cache.get(key)
    if got is None:
        got = (tuple([-1 if n is None else _slot_offset(v2_type, n) for n in slot_names]),
               tuple([_slot_offset(v2_type, n) for n in extra_names]))
        _offset_cache[key] = got
    return <tuple>got


def scan_batch_objects(buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t max_count,
                       bint check_crc, type v2_type, tuple slot_names, tuple extra_names,
                       tuple extra_values):
    """``scan_batches``, building objects instead of an array; see ``kafkawire._pure.scan``."""
    cdef Py_buffer view
    cdef Rows rows
    cdef Py_ssize_t pos, i, j, nextra = len(extra_names)
    cdef int status
    cdef bint skip = False
    cdef const unsigned char *p
    cdef Py_ssize_t offs[NF]
    cdef Py_ssize_t extra_offs[16]
    cdef const int64_t *row
    cdef PyObject *obj
    cdef Py_ssize_t n_legacy = 0
    cdef list out
    cdef list prev
    cdef const int64_t *prev_row
    if len(slot_names) != NF or nextra > 16 or len(extra_values) != nextra:
        raise ValueError("scan_batch_objects: need NFIELDS slot names and at most 16 extras")
    o1, o2 = _offsets(v2_type, slot_names, extra_names)
    # the objects hold only ints and the caller's extras; when those cannot
    # reference the objects back (no cycles), the cyclic GC need not track them
    cdef bint untrack = all(type(v) in _ACYCLIC for v in extra_values)
    for j in range(NF):
        offs[j] = o1[j]
    for j in range(nextra):
        extra_offs[j] = o2[j]
    rows.data = NULL
    rows.n = 0
    rows.cap = 0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char *>view.buf
        if end < 0 or end > view.len:
            end = view.len
        if start < 0:
            start = 0
        pos = start
        while True:
            with nogil:
                status = scan_core(p, &pos, end, max_count, check_crc, skip, &rows)
            if status != NEED_LEGACY_CRC:
                break
            size = kw_be_i32(p + pos + 8) + 12
            stored = kw_be_u32(p + pos + 12)
            if zlib.crc32((<object>memoryview(buf).cast("B"))[pos + 16:pos + size]) != stored:
                status = 4
                break
            skip = True
        if status < 0:
            raise MemoryError("scan_batch_objects: out of memory")
        out = PyList_New(rows.n)
        prev = [None] * NF
        prev_row = NULL
        for i in range(rows.n):
            row = rows.data + i * NF
            if row[4] == 2:
                obj = (<PyTypeObject *>v2_type).tp_alloc(<PyTypeObject *>v2_type, 0)
                if obj == NULL:
                    raise MemoryError()
                o = <object>obj
                Py_XDECREF(obj)  # `o` holds the reference now
                if untrack:
                    PyObject_GC_UnTrack(obj)
                for j in range(NF):
                    if offs[j] >= 0:
                        # reuse the previous batch's int object for a repeated value
                        # (sizes, counts, producer ids): fewer allocations per batch
                        if prev_row == NULL or prev_row[j] != row[j] or prev[j] is None:
                            prev[j] = row[j]
                        _set_slot(obj, offs[j], prev[j])
                prev_row = row
                for j in range(nextra):
                    _set_slot(obj, extra_offs[j], extra_values[j])
            else:
                o = tuple([row[j] for j in range(NF)])
                n_legacy += 1
            Py_INCREF(o)
            PyList_SET_ITEM(out, i, o)
    finally:
        PyBuffer_Release(&view)
        free(rows.data)
    return out, pos, status, n_legacy
