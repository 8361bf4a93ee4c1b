# cython: language_level=3
"""Index search kernels over Kafka's ``.index``/``.timeindex`` bytes (compiled twin).

Same names and signatures as ``kafkawire/_pure/index.py``: entries are
big-endian (offset index: int32 relative offset, int32 position; time index:
int64 timestamp, int32 relative offset).  Loops run without the GIL over a
read-only typed memoryview, so an mmap is searched in place.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

__all__ = ["offset_index_lookup", "time_index_lookup", "offset_index_real_entries",
           "time_index_real_entries", "offset_index_first_unordered",
           "time_index_first_unordered", "buffer_is_zero", "records_find_timestamp"]


cdef inline int32_t _be32(const unsigned char* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _be64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>_be32(p) << 32) | <uint64_t><uint32_t>_be32(p + 4))


cdef inline Py_ssize_t _clamp(const unsigned char[:] b, Py_ssize_t n, Py_ssize_t width):
    if n < 0:
        return 0
    if n * width > b.shape[0]:
        return b.shape[0] // width
    return n


def offset_index_lookup(const unsigned char[:] buf, Py_ssize_t n, long long target_rel):
    """Slot of the largest entry whose relative offset is <= ``target_rel``, or -1."""
    n = _clamp(buf, n, 8)
    if n == 0:
        return -1
    cdef const unsigned char* p = &buf[0]
    cdef Py_ssize_t lo = 0, hi = n - 1, mid
    with nogil:
        if _be32(p) > target_rel:
            lo = -1
        else:
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                if _be32(p + mid * 8) <= target_rel:
                    lo = mid
                else:
                    hi = mid - 1
    return lo


def time_index_lookup(const unsigned char[:] buf, Py_ssize_t n, long long target_ts):
    """Slot of the largest entry whose timestamp is <= ``target_ts``, or -1."""
    n = _clamp(buf, n, 12)
    if n == 0:
        return -1
    cdef const unsigned char* p = &buf[0]
    cdef Py_ssize_t lo = 0, hi = n - 1, mid
    with nogil:
        if _be64(p) > target_ts:
            lo = -1
        else:
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                if _be64(p + mid * 12) <= target_ts:
                    lo = mid
                else:
                    hi = mid - 1
    return lo


def offset_index_real_entries(const unsigned char[:] buf, Py_ssize_t n):
    """How many leading entries are real in a possibly preallocated (zero-tailed) index."""
    n = _clamp(buf, n, 8)
    if n == 0:
        return 0
    cdef const unsigned char* p = &buf[0]
    cdef Py_ssize_t i
    cdef int32_t rel, pos, prev_rel, prev_pos
    with nogil:
        prev_rel = _be32(p)
        prev_pos = _be32(p + 4)
        if prev_rel == 0 and prev_pos == 0:
            i = 0
        else:
            i = 1
            while i < n:
                rel = _be32(p + i * 8)
                pos = _be32(p + i * 8 + 4)
                if rel <= prev_rel or pos <= prev_pos:
                    break
                prev_rel = rel
                prev_pos = pos
                i += 1
    return i


def time_index_real_entries(const unsigned char[:] buf, Py_ssize_t n):
    """How many leading time entries are real (timestamps strictly rising, offsets not falling)."""
    n = _clamp(buf, n, 12)
    if n == 0:
        return 0
    cdef const unsigned char* p = &buf[0]
    cdef Py_ssize_t i
    cdef int64_t ts, prev_ts
    cdef int32_t rel, prev_rel
    with nogil:
        prev_ts = _be64(p)
        prev_rel = _be32(p + 8)
        if prev_ts == 0 and prev_rel == 0:
            i = 0
        else:
            i = 1
            while i < n:
                ts = _be64(p + i * 12)
                rel = _be32(p + i * 12 + 8)
                if ts <= prev_ts or rel < prev_rel:
                    break
                prev_ts = ts
                prev_rel = rel
                i += 1
    return i


def offset_index_first_unordered(const unsigned char[:] buf, Py_ssize_t n, long long file_size):
    """First slot breaking Kafka's rules (offsets and positions strictly rising,
    positions inside ``file_size``, relative offset >= 0), or -1 when all hold."""
    n = _clamp(buf, n, 8)
    if n == 0:
        return -1
    cdef const unsigned char* p = &buf[0]
    cdef Py_ssize_t i, bad = -1
    cdef int64_t rel, pos, prev_rel = -1, prev_pos = -1
    with nogil:
        for i in range(n):
            rel = _be32(p + i * 8)
            pos = _be32(p + i * 8 + 4)
            if rel < 0 or pos < 0 or pos >= file_size or rel <= prev_rel or pos <= prev_pos:
                bad = i
                break
            prev_rel = rel
            prev_pos = pos
    return bad


def time_index_first_unordered(const unsigned char[:] buf, Py_ssize_t n):
    """First time-index slot whose timestamp does not rise or whose offset falls, or -1."""
    n = _clamp(buf, n, 12)
    if n == 0:
        return -1
    cdef const unsigned char* p = &buf[0]
    cdef Py_ssize_t i, bad = -1
    cdef int64_t ts, prev_ts = 0
    cdef int32_t rel, prev_rel = 0
    with nogil:
        for i in range(n):
            ts = _be64(p + i * 12)
            rel = _be32(p + i * 12 + 8)
            if rel < 0 or (i > 0 and (ts <= prev_ts or rel < prev_rel)):
                bad = i
                break
            prev_ts = ts
            prev_rel = rel
    return bad


def buffer_is_zero(const unsigned char[:] buf, Py_ssize_t start, Py_ssize_t end):
    """True when every byte in ``buf[start:end]`` is zero."""
    if start < 0:
        start = 0
    if end > buf.shape[0]:
        end = buf.shape[0]
    if end <= start:
        return True
    cdef const unsigned char* p = &buf[0]
    cdef Py_ssize_t i
    cdef bint zero = True
    with nogil:
        for i in range(start, end):
            if p[i] != 0:
                zero = False
                break
    return zero


cdef inline Py_ssize_t _uvarint(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end,
                                int max_bytes, uint64_t* out) noexcept nogil:
    """Read an unsigned varint at ``pos``; return the position after it, or -1."""
    cdef uint64_t result = 0
    cdef int shift = 0, i
    cdef unsigned char b
    for i in range(max_bytes):
        if pos >= end:
            return -1
        b = p[pos]
        pos += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            out[0] = result
            return pos
        shift += 7
    return -1


def records_find_timestamp(const unsigned char[:] buf, Py_ssize_t pos, Py_ssize_t end,
                           long long count, long long base_offset, long long base_timestamp,
                           long long target_ts, long long min_offset):
    """First record of an uncompressed v2 records section ``buf[pos:end]`` (``count``
    records) whose timestamp is >= ``target_ts`` and offset >= ``min_offset``.

    Returns ``(0, offset, timestamp)`` when found, ``(1, -1, -1)`` when none
    qualifies, ``(2, position, -1)`` when the records are malformed at ``position``.
    """
    if end > buf.shape[0]:
        end = buf.shape[0]
    if count <= 0 or pos == end:
        return 1, -1, -1
    if pos < 0 or pos > end:
        return 2, pos, -1
    cdef const unsigned char* p = &buf[0]
    cdef long long i, ts = -1, off = -1
    cdef int status = 1
    cdef Py_ssize_t start, body, nxt
    cdef uint64_t raw
    cdef int64_t length, tsd, offd
    with nogil:
        for i in range(count):
            start = pos
            nxt = _uvarint(p, pos, end, 5, &raw)
            if nxt < 0:
                status = 2
                break
            length = <int64_t>(raw >> 1) ^ -(<int64_t>(raw & 1))
            body = nxt
            if length <= 0 or body + length > end:
                status = 2
                break
            pos = _uvarint(p, body + 1, end, 10, &raw)
            if pos < 0:
                status = 2
                break
            tsd = <int64_t>(raw >> 1) ^ -(<int64_t>(raw & 1))
            pos = _uvarint(p, pos, end, 5, &raw)
            if pos < 0 or pos > body + length:
                status = 2
                break
            offd = <int64_t>(raw >> 1) ^ -(<int64_t>(raw & 1))
            if base_timestamp + tsd >= target_ts and base_offset + offd >= min_offset:
                status = 0
                ts = base_timestamp + tsd
                off = base_offset + offd
                break
            pos = body + length
    if status == 2:
        return 2, start, -1
    return status, off, ts
