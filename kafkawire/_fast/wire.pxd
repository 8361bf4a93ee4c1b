# The compiled kernels' one wire layer: big-endian loads, varints (zigzag),
# flat byte access to a caller's buffer, and a bounded read cursor.  Every
# kernel cimports these; none defines its own.  The C bodies of the loads and
# varint readers are in wire_impl.h (also used by the C helpers of dumpfmt).
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t

cdef extern from "wire_impl.h" nogil:
    int16_t kw_be_i16(const unsigned char *p)
    uint16_t kw_be_u16(const unsigned char *p)
    int32_t kw_be_i32(const unsigned char *p)
    uint32_t kw_be_u32(const unsigned char *p)
    int64_t kw_be_i64(const unsigned char *p)
    uint64_t kw_be_u64(const unsigned char *p)
    # Varint readers: the position after the varint, or NULL when it runs past
    # `end` (*err = 1, truncated) or is overlong (*err = 2).
    const unsigned char *kw_uvarint64(const unsigned char *p, const unsigned char *end,
                                      int maxbytes, uint64_t *out, int *err)
    const unsigned char *kw_varint32(const unsigned char *p, const unsigned char *end,
                                     int32_t *out, int *err)
    const unsigned char *kw_varint64(const unsigned char *p, const unsigned char *end,
                                     int64_t *out, int *err)
    # The bounded read cursor (C, so the C helpers share it): see cur_* below.
    ctypedef struct Cursor "kw_cursor":
        const unsigned char *base
        const unsigned char *p
        const unsigned char *end
    int64_t zigzag64 "kw_zigzag64" (uint64_t v)
    int32_t zigzag32 "kw_zigzag32" (uint32_t v)

#: Error codes of the readers and the cursor.
cdef enum:
    WIRE_OK = 0
    WIRE_TRUNCATED = 1
    WIRE_OVERLONG = 2


# -- a caller's buffer as flat bytes ------------------------------------------------
cdef struct Bytes:
    Py_buffer view
    const unsigned char *p
    Py_ssize_t n


cdef inline int bytes_open(Bytes *b, object buf) except -1:
    """Hold ``buf`` as flat bytes: C-contiguous buffers only (others raise BufferError,
    as the pure twins do), so no read can leave the memory the caller passed."""
    PyObject_GetBuffer(buf, &b.view, PyBUF_SIMPLE)
    b.p = <const unsigned char *>b.view.buf
    b.n = b.view.len
    return 0


cdef inline void bytes_close(Bytes *b) noexcept:
    PyBuffer_Release(&b.view)


# -- a bounded read cursor ------------------------------------------------------------
# Reads never pass `end`: each returns WIRE_OK or an error code (and leaves the
# cursor where the failed read started), for the kernel to raise as its own typed
# error naming `cur_pos`.
cdef inline void cur_init(Cursor *c, const unsigned char *base, Py_ssize_t pos,
                          Py_ssize_t end) noexcept nogil:
    c.base = base
    c.p = base + pos
    c.end = base + end


cdef inline Py_ssize_t cur_pos(const Cursor *c) noexcept nogil:
    return c.p - c.base


cdef inline Py_ssize_t cur_left(const Cursor *c) noexcept nogil:
    return c.end - c.p


cdef inline int cur_skip(Cursor *c, Py_ssize_t n) noexcept nogil:
    if n < 0 or n > c.end - c.p:
        return WIRE_TRUNCATED
    c.p += n
    return WIRE_OK


cdef inline int cur_i16(Cursor *c, int16_t *out) noexcept nogil:
    if c.end - c.p < 2:
        return WIRE_TRUNCATED
    out[0] = kw_be_i16(c.p)
    c.p += 2
    return WIRE_OK


cdef inline int cur_i32(Cursor *c, int32_t *out) noexcept nogil:
    if c.end - c.p < 4:
        return WIRE_TRUNCATED
    out[0] = kw_be_i32(c.p)
    c.p += 4
    return WIRE_OK


cdef inline int cur_i64(Cursor *c, int64_t *out) noexcept nogil:
    if c.end - c.p < 8:
        return WIRE_TRUNCATED
    out[0] = kw_be_i64(c.p)
    c.p += 8
    return WIRE_OK


cdef inline int cur_uvarint(Cursor *c, int maxbytes, uint64_t *out) noexcept nogil:
    cdef int err = 0
    cdef const unsigned char *q = kw_uvarint64(c.p, c.end, maxbytes, out, &err)
    if q == NULL:
        return err
    c.p = q
    return WIRE_OK


cdef inline int cur_varint32(Cursor *c, int32_t *out) noexcept nogil:
    cdef int err = 0
    cdef const unsigned char *q = kw_varint32(c.p, c.end, out, &err)
    if q == NULL:
        return err
    c.p = q
    return WIRE_OK


cdef inline int cur_varint64(Cursor *c, int64_t *out) noexcept nogil:
    cdef int err = 0
    cdef const unsigned char *q = kw_varint64(c.p, c.end, out, &err)
    if q == NULL:
        return err
    c.p = q
    return WIRE_OK
