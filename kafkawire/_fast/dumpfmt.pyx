# cython: language_level=3
# distutils: sources = kafkawire/_fast/dumpfmt_impl.c kafkawire/_fast/crc_impl.c
"""Dump formatter (compiled twin of ``kafkawire/_pure/dumpfmt.py``; contract there).

The loops are C (``dumpfmt_impl.c``), run without the GIL, and write every
line into one growable byte buffer: no Python object per record.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t
from libc.stdlib cimport free

from kafkawire import _dumpfmt_common as C

__all__ = ["dump_batches", "dump_records"]

cdef extern from "dumpfmt_impl.h" nogil:
    ctypedef struct kwd_out:
        char *p
        size_t len
        size_t cap
        int fixed
    ctypedef struct kwd_gaps:
        int64_t *p
        size_t n
        size_t cap
    ctypedef struct kwd_err:
        int64_t pos
        int64_t offset
        int has_offset
        int code
        int64_t a
        int64_t b
    int KWD_OK, KWD_FULL, KWD_GENERAL, KWD_CORRUPT, KWD_NOMEM
    int KWE_TS_OVERFLOW
    void kwd_init()
    int kwd_records(kwd_out *out, const unsigned char *buf, size_t start, size_t end,
                    int64_t count, int64_t base_offset, int64_t last_offset, int64_t base_ts,
                    int64_t max_ts, int lat, int64_t base_seq, int mode, int64_t *prev,
                    kwd_gaps *gaps, kwd_err *err)
    int kwd_batches(kwd_out *out, const unsigned char *buf, size_t start, size_t end, int mode,
                    int64_t base_position, size_t max_output, int64_t *prev, kwd_gaps *gaps,
                    size_t *stop)


kwd_init()


cdef list _gap_list(kwd_gaps *g):
    cdef size_t i
    return [(g.p[i], g.p[i + 1]) for i in range(0, g.n, 2)]


cdef int _check_mode(int mode) except -1:
    if mode < 0 or mode > 7:
        raise ValueError(f"dump mode {mode} is not a combination of PRINT (1), JSON (2) and "
                         "SHALLOW (4)")
    return 0


# A scratch output buffer kept between calls (fresh memory would cost page faults on every
# call); taken and given back with the GIL held, so concurrent callers each get their own.
cdef inline void _clamp(Py_ssize_t n, Py_ssize_t *start, Py_ssize_t *end) noexcept:
    """Bounds as the pure twin reads them: a negative end is the buffer's end."""
    if end[0] < 0 or end[0] > n:
        end[0] = n
    if start[0] < 0:
        start[0] = 0
    if start[0] > end[0]:
        start[0] = end[0]


cdef char *_scratch = NULL
cdef size_t _scratch_cap = 0


def dump_batches(buf, Py_ssize_t start, Py_ssize_t end, int mode, int64_t base_position,
                 int64_t prev_offset, Py_ssize_t max_output):
    """Render the v2 batches of ``buf[start:end]``; see ``kafkawire._pure.dumpfmt``."""
    global _scratch, _scratch_cap
    cdef Py_buffer view
    cdef kwd_out out
    cdef kwd_gaps gaps
    cdef size_t stop = 0
    cdef int status
    cdef int64_t prev = prev_offset
    _check_mode(mode)
    out.p = _scratch
    out.cap = _scratch_cap
    out.len = 0
    out.fixed = 0
    _scratch = NULL
    _scratch_cap = 0
    gaps.p = NULL
    gaps.n = gaps.cap = 0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _clamp(view.len, &start, &end)
        if max_output < 0:
            max_output = 0
        with nogil:
            status = kwd_batches(&out, <const unsigned char *>view.buf, <size_t>start,
                                 <size_t>end, mode, base_position, <size_t>max_output, &prev,
                                 &gaps, &stop)
        if status == KWD_NOMEM:
            raise MemoryError("dump_batches: out of memory for the output buffer")
        data = PyBytes_FromStringAndSize(out.p, out.len) if out.len else b""
        return data, <Py_ssize_t>stop, prev, status, _gap_list(&gaps)
    finally:
        PyBuffer_Release(&view)
        free(gaps.p)
        if _scratch == NULL and out.cap <= (64 << 20):
            _scratch = out.p
            _scratch_cap = out.cap
        else:
            free(out.p)


def dump_records(buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t base_offset,
                 int64_t last_offset, int64_t base_timestamp, int64_t max_timestamp,
                 int timestamp_type, int64_t base_sequence, int mode, int64_t prev_offset):
    """Render one batch's records region ``buf[start:end]``; see ``kafkawire._pure.dumpfmt``."""
    cdef Py_buffer view
    cdef kwd_out out
    cdef kwd_gaps gaps
    cdef kwd_err err
    cdef int status
    cdef int64_t prev = prev_offset
    _check_mode(mode)
    out.p = NULL
    out.len = out.cap = 0
    out.fixed = 0
    gaps.p = NULL
    gaps.n = gaps.cap = 0
    err.has_offset = 0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        _clamp(view.len, &start, &end)
        with nogil:
            status = kwd_records(&out, <const unsigned char *>view.buf, <size_t>start,
                                 <size_t>end, count, base_offset, last_offset, base_timestamp,
                                 max_timestamp, timestamp_type == 1, base_sequence, mode, &prev,
                                 &gaps, &err)
        if status == KWD_NOMEM:
            raise MemoryError("dump_records: out of memory for the output buffer")
        if status == KWD_CORRUPT:
            if err.code == KWE_TS_OVERFLOW:
                return None, prev_offset, []
            raise C.records_error(err.code, err.pos, err.offset if err.has_offset else None,
                                  err.a, err.b)
        if status == KWD_GENERAL:
            return None, prev_offset, []
        data = PyBytes_FromStringAndSize(out.p, out.len) if out.len else b""
        return data, prev, _gap_list(&gaps)
    finally:
        PyBuffer_Release(&view)
        free(out.p)
        free(gaps.p)
