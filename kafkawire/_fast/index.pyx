# cython: language_level=3
"""Index search kernels over Kafka's ``.index``/``.timeindex`` bytes (compiled twin).

Same names and signatures as ``kafkawire/_pure/index.py``: entries are
big-endian (offset index: int32 relative offset, int32 position; time index:
int64 timestamp, int32 relative offset).  Each function takes the caller's
buffer as flat bytes (a C-contiguous buffer; anything else raises
``BufferError``), clamps entry counts and positions to it without overflow,
and searches it without the GIL, so an mmap is searched in place.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t
from kafkawire._fast.framing cimport RecordFields, record_read, KWR_OK
from kafkawire._fast.wire cimport (Cursor, Bytes, bytes_open, bytes_close, kw_be_i32, kw_be_i64,
                                   )

__all__ = ["offset_index_lookup", "time_index_lookup", "offset_index_real_entries",
           "time_index_real_entries", "offset_index_first_unordered",
           "time_index_first_unordered", "buffer_is_zero", "records_find_timestamp"]


cdef inline Py_ssize_t _clamp(Py_ssize_t size, Py_ssize_t n, Py_ssize_t width) noexcept nogil:
    """``n`` entries of ``width`` bytes, at most as many as ``size`` bytes hold (no overflow)."""
    if n < 0:
        return 0
    if n > size // width:
        return size // width
    return n


cdef Py_ssize_t _offset_lookup(const unsigned char* p, Py_ssize_t n, long long target) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = n - 1, mid
    if n == 0 or kw_be_i32(p) > target:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if kw_be_i32(p + mid * 8) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef Py_ssize_t _time_lookup(const unsigned char* p, Py_ssize_t n, long long target) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = n - 1, mid
    if n == 0 or kw_be_i64(p) > target:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if kw_be_i64(p + mid * 12) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def offset_index_lookup(buf, Py_ssize_t n, long long target_rel):
    """Slot of the largest entry whose relative offset is <= ``target_rel``, or -1."""
    cdef Bytes b
    cdef Py_ssize_t r
    bytes_open(&b, buf)
    with nogil:
        r = _offset_lookup(b.p, _clamp(b.n, n, 8), target_rel)
    bytes_close(&b)
    return r


def time_index_lookup(buf, Py_ssize_t n, long long target_ts):
    """Slot of the largest entry whose timestamp is <= ``target_ts``, or -1."""
    cdef Bytes b
    cdef Py_ssize_t r
    bytes_open(&b, buf)
    with nogil:
        r = _time_lookup(b.p, _clamp(b.n, n, 12), target_ts)
    bytes_close(&b)
    return r


cdef Py_ssize_t _offset_real(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef int32_t rel, pos, prev_rel, prev_pos
    if n == 0:
        return 0
    prev_rel = kw_be_i32(p)
    prev_pos = kw_be_i32(p + 4)
    if prev_rel == 0 and prev_pos == 0:
        return 0
    for i in range(1, n):
        rel = kw_be_i32(p + i * 8)
        pos = kw_be_i32(p + i * 8 + 4)
        if rel <= prev_rel or pos <= prev_pos:
            return i
        prev_rel = rel
        prev_pos = pos
    return n


def offset_index_real_entries(buf, Py_ssize_t n):
    """How many leading entries are real in a possibly preallocated (zero-tailed) index."""
    cdef Bytes b
    cdef Py_ssize_t r
    bytes_open(&b, buf)
    with nogil:
        r = _offset_real(b.p, _clamp(b.n, n, 8))
    bytes_close(&b)
    return r


cdef Py_ssize_t _time_real(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t ts, prev_ts
    cdef int32_t rel, prev_rel
    if n == 0:
        return 0
    prev_ts = kw_be_i64(p)
    prev_rel = kw_be_i32(p + 8)
    if prev_ts == 0 and prev_rel == 0:
        return 0
    for i in range(1, n):
        ts = kw_be_i64(p + i * 12)
        rel = kw_be_i32(p + i * 12 + 8)
        if ts <= prev_ts or rel < prev_rel:
            return i
        prev_ts = ts
        prev_rel = rel
    return n


def time_index_real_entries(buf, Py_ssize_t n):
    """How many leading time entries are real (timestamps strictly rising, offsets not falling)."""
    cdef Bytes b
    cdef Py_ssize_t r
    bytes_open(&b, buf)
    with nogil:
        r = _time_real(b.p, _clamp(b.n, n, 12))
    bytes_close(&b)
    return r


cdef Py_ssize_t _offset_unordered(const unsigned char* p, Py_ssize_t n,
                                  long long file_size) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t rel, pos, prev_rel = -1, prev_pos = -1
    for i in range(n):
        rel = kw_be_i32(p + i * 8)
        pos = kw_be_i32(p + i * 8 + 4)
        if rel < 0 or pos < 0 or pos >= file_size or rel <= prev_rel or pos <= prev_pos:
            return i
        prev_rel = rel
        prev_pos = pos
    return -1


def offset_index_first_unordered(buf, Py_ssize_t n, long long file_size):
    """First slot breaking Kafka's rules (offsets and positions strictly rising,
    positions inside ``file_size``, relative offset >= 0), or -1 when all hold."""
    cdef Bytes b
    cdef Py_ssize_t r
    bytes_open(&b, buf)
    with nogil:
        r = _offset_unordered(b.p, _clamp(b.n, n, 8), file_size)
    bytes_close(&b)
    return r


cdef Py_ssize_t _time_unordered(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t ts, prev_ts = 0
    cdef int32_t rel, prev_rel = 0
    for i in range(n):
        ts = kw_be_i64(p + i * 12)
        rel = kw_be_i32(p + i * 12 + 8)
        if rel < 0 or (i > 0 and (ts <= prev_ts or rel < prev_rel)):
            return i
        prev_ts = ts
        prev_rel = rel
    return -1


def time_index_first_unordered(buf, Py_ssize_t n):
    """First time-index slot whose timestamp does not rise or whose offset falls, or -1."""
    cdef Bytes b
    cdef Py_ssize_t r
    bytes_open(&b, buf)
    with nogil:
        r = _time_unordered(b.p, _clamp(b.n, n, 12))
    bytes_close(&b)
    return r


def buffer_is_zero(buf, Py_ssize_t start, Py_ssize_t end):
    """True when every byte in ``buf[start:end]`` is zero."""
    cdef Bytes b
    cdef Py_ssize_t i
    cdef bint zero = True
    bytes_open(&b, buf)
    if start < 0:
        start = 0
    if end > b.n:
        end = b.n
    with nogil:
        for i in range(start, end):
            if b.p[i] != 0:
                zero = False
                break
    bytes_close(&b)
    return zero


cdef int _find_ts(const unsigned char* p, Py_ssize_t* ppos, Py_ssize_t end, long long count,
                  long long base_offset, long long base_timestamp, long long target_ts,
                  long long min_offset, long long* off, long long* ts) noexcept nogil:
    """Status of ``records_find_timestamp``; *ppos is the malformed record's start on 2."""
    cdef long long i
    cdef Cursor c
    cdef RecordFields r
    c.base = p
    c.p = p + ppos[0]
    c.end = p + end
    for i in range(count):
        ppos[0] = c.p - p
        if record_read(&c, &r, 0, 0, 0) != KWR_OK:
            return 2
        if base_timestamp + r.ts_delta >= target_ts and base_offset + r.off_delta >= min_offset:
            ts[0] = base_timestamp + r.ts_delta
            off[0] = base_offset + r.off_delta
            return 0
    return 1


def records_find_timestamp(buf, Py_ssize_t pos, Py_ssize_t end,
                           long long count, long long base_offset, long long base_timestamp,
                           long long target_ts, long long min_offset):
    """First record of an uncompressed v2 records section ``buf[pos:end]`` (``count``
    records) whose timestamp is >= ``target_ts`` and offset >= ``min_offset``.

    Returns ``(0, offset, timestamp)`` when found, ``(1, -1, -1)`` when none
    qualifies, ``(2, position, -1)`` when the records are malformed at ``position``.
    """
    cdef Bytes b
    cdef long long ts = -1, off = -1
    cdef int status
    bytes_open(&b, buf)
    if end > b.n:
        end = b.n
    if count <= 0 or pos == end:
        bytes_close(&b)
        return 1, -1, -1
    if pos < 0 or pos > end:
        bytes_close(&b)
        return 2, pos, -1
    with nogil:
        status = _find_ts(b.p, &pos, end, count, base_offset, base_timestamp, target_ts,
                          min_offset, &off, &ts)
    bytes_close(&b)
    if status == 2:
        return 2, pos, -1
    return status, off, ts
