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

__all__ = ["scan_batches"]

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
