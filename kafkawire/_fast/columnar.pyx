# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Columnar decode kernel: batches/messages into Arrow-layout column buffers.

A :class:`ColumnBuilder` owns growable C buffers (one per column of
``kafkawire._columnar_common.COLUMNS``); :func:`columnar_scan` walks a buffer
of concatenated v0/v1 messages and v2 batches with the GIL released, appending
every data record without creating Python objects, and stops when the builder
is full, at the end, at a partial tail, at ``end_offset``, or at a compressed
batch.  The caller decompresses that batch's payload (policy lives in the
front end) and feeds it to :func:`columnar_payload`.  :meth:`ColumnBuilder.take`
hands the buffers to numpy arrays without copying.
"""
from libc.stdint cimport INT64_MIN, INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport realloc, free
from libc.string cimport memcpy
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer, PyCapsule_GetContext, PyCapsule_SetContext
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_acquire_lock,
                               PyThread_release_lock, WAIT_LOCK)
from libc.stdlib cimport calloc
from libc.stdint cimport uintptr_t
cimport numpy as cnp
from kafkawire._fast.wire cimport kw_be_i64 as be64, kw_be_i32 as be32, kw_be_i16 as be16, Cursor
from kafkawire._fast.framing cimport (
    V2Header, read_v2_header, RecordFields, record_read, header_next, KWR_OK, KWR_VARINT,
    KWR_LENGTH, KWR_PAST_END, KWR_KEY_LENGTH, KWR_KEY_PAST, KWR_VALUE_LENGTH, KWR_VALUE_PAST,
    KWR_HEADER_COUNT, KWR_HKEY_LENGTH, KWR_HVALUE_LENGTH, KWR_HVALUE_PAST)
from kafkawire._fast.format cimport TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, CONTROL_MASK
import numpy as np

from kafkawire.errors import CorruptRecordError
from kafkawire import _columnar_common as _C

cnp.import_array()

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define KW_PREFETCH(p) __builtin_prefetch((const void*)(p))
    #else
    #define KW_PREFETCH(p) ((void)0)
    #endif
    """
    void KW_PREFETCH(const void* p) noexcept nogil

# Arrow's C data interface (ABI-stable; https://arrow.apache.org/docs/format/CDataInterface.html),
# through which take_arrow hands column buffers to pyarrow without a Python object per column.
cdef extern from *:
    """
    #ifndef ARROW_C_DATA_INTERFACE
    #define ARROW_C_DATA_INTERFACE
    struct ArrowArray {
      int64_t length;
      int64_t null_count;
      int64_t offset;
      int64_t n_buffers;
      int64_t n_children;
      const void** buffers;
      struct ArrowArray** children;
      struct ArrowArray* dictionary;
      void (*release)(struct ArrowArray*);
      void* private_data;
    };
    #endif
    """
    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children
        ArrowArray* dictionary
        void (*release)(ArrowArray*) noexcept nogil
        void* private_data

__all__ = ["ColumnBuilder", "columnar_scan", "columnar_payload_info", "columnar_payload"]

cdef enum:
    NCOLS = 24
    C_OFFSET = 0
    C_TS = 1
    C_TSTYPE = 2
    C_KOFF = 3
    C_KDATA = 4
    C_KVALID = 5
    C_VOFF = 6
    C_VDATA = 7
    C_VVALID = 8
    C_RSTART = 9
    C_RTXN = 10
    C_RBASE = 11
    C_HOFF = 12
    C_HVALID = 13
    C_HKOFF = 14
    C_HKDATA = 15
    C_HVOFF = 16
    C_HVDATA = 17
    C_HVVALID = 18
    C_COFF = 19
    C_CPID = 20
    C_CTYPE = 21
    C_CTS = 22
    C_RPID = 23

cdef enum:
    ST_DONE = 0
    ST_PARTIAL = 1
    ST_FULL = 2
    ST_COMPRESSED = 3
    ST_PAST_END = 4
    ERR_CORRUPT = -1
    ERR_NOMEM = -2

assert (ST_DONE, ST_PARTIAL, ST_FULL, ST_COMPRESSED, ST_PAST_END) == (
    _C.DONE, _C.PARTIAL, _C.FULL, _C.COMPRESSED, _C.PAST_END)
assert len(_C.COLUMNS) == NCOLS

# Per column, made once: its name, numpy dtype and whether it is a header column
# (take() runs once a chunk, and parsing a dtype string each time showed in profiles).
_NAMES = tuple(c[0] for c in _C.COLUMNS)
_DTYPES = tuple(np.dtype(c[1]) for c in _C.COLUMNS)
_IS_HEADER = tuple(c[2].startswith("hdr") for c in _C.COLUMNS)

cdef int64_t I64_MIN = INT64_MIN
cdef int64_t I64_MAX = INT64_MAX

ctypedef struct Buf:
    char* p
    Py_ssize_t n
    Py_ssize_t cap
    Py_ssize_t hint   # first allocation size: the expected size of a full chunk

ctypedef struct State:
    Buf cols[NCOLS]
    int include_headers
    int64_t max_records
    int64_t max_bytes
    int64_t start_offset
    int64_t end_offset
    int64_t n
    int64_t nh
    int64_t data_bytes
    int64_t next_offset
    int has_next
    Py_ssize_t err_pos
    int64_t err_offset
    int has_err_offset
    const char* err_reason
    const char* err_msg

# Context of the batch (v2) or wrapper (legacy) whose records are decoded.
ctypedef struct Ctx:
    int64_t base_offset
    int64_t base_ts
    int64_t max_ts
    int32_t ts_type
    int log_append
    int64_t producer_id
    int txn
    int control
    int64_t count
    Py_ssize_t batch_pos


# Two freed blocks per column, kept for the next chunks: memory that was already
# faulted in is reused instead of mapping fresh pages for every chunk (while a
# consumer holds chunk k, chunk k+1 is decoded into the blocks of chunk k-1).
cdef enum:
    CACHE_SLOTS = 2
cdef char* _cache_p[NCOLS * CACHE_SLOTS]
cdef Py_ssize_t _cache_cap[NCOLS * CACHE_SLOTS]
cdef Py_ssize_t CACHE_MAX = 256 << 20
cdef int _k
for _k in range(NCOLS * CACHE_SLOTS):
    _cache_p[_k] = NULL
    _cache_cap[_k] = 0


# The cache is shared by every builder and filled from whatever thread drops the last
# reference to a chunk (a numpy array, or an Arrow batch whose release callback runs
# without the GIL), so a lock of its own guards it rather than the GIL.
cdef PyThread_type_lock _cache_lock = PyThread_allocate_lock()
if _cache_lock == NULL:
    raise MemoryError("cannot allocate the column cache's lock")


cdef void cache_put(int col, void* p, Py_ssize_t size) noexcept nogil:
    """Keep a freed column block for reuse, or free it (too large, or smaller than both kept)."""
    cdef int slot
    cdef void* drop = p
    if 0 <= col < NCOLS and size <= CACHE_MAX:
        PyThread_acquire_lock(_cache_lock, WAIT_LOCK)
        slot = col * CACHE_SLOTS
        if _cache_cap[slot + 1] < _cache_cap[slot]:
            slot += 1
        if size > _cache_cap[slot]:
            drop = _cache_p[slot]
            _cache_p[slot] = <char*>p
            _cache_cap[slot] = size
        PyThread_release_lock(_cache_lock)
    free(drop)


cdef void _free_capsule(object cap) noexcept:
    cdef void* p = PyCapsule_GetPointer(cap, NULL)
    cdef size_t ctx = <size_t>PyCapsule_GetContext(cap)
    cache_put(<int>(ctx & 31), p, <Py_ssize_t>(ctx >> 5))


cdef void adopt_cache(State* S) noexcept:
    cdef int k, slot
    PyThread_acquire_lock(_cache_lock, WAIT_LOCK)
    for k in range(NCOLS):
        slot = k * CACHE_SLOTS
        if _cache_cap[slot + 1] > _cache_cap[slot]:
            slot += 1
        if _cache_p[slot] != NULL and _cache_cap[slot] > S.cols[k].cap and S.cols[k].n <= 64:
            if S.cols[k].n:
                memcpy(_cache_p[slot], S.cols[k].p, S.cols[k].n)
            free(S.cols[k].p)
            S.cols[k].p = _cache_p[slot]
            S.cols[k].cap = _cache_cap[slot]
            _cache_p[slot] = NULL
            _cache_cap[slot] = 0
    PyThread_release_lock(_cache_lock)


# A batch handed to pyarrow by take_arrow: the structs of the C data interface and the
# column blocks they point into, freed (back to the cache) by release_batch.
cdef enum:
    ARROW_OWN = 5       # key, value, offset, timestamp, timestampType: the builder's buffers
    ARROW_KIDS = 7      # and topic, partition: Arrow arrays exported by pyarrow
    ARROW_BLOCKS = 9    # the seven columns' blocks and two validity bitmaps

ctypedef struct ArrowHolder:
    ArrowArray parent
    ArrowArray own[ARROW_OWN]
    ArrowArray ext[2]
    ArrowArray* kids[ARROW_KIDS]
    const void* parent_bufs[1]
    const void* bufs[ARROW_OWN][3]
    void* block[ARROW_BLOCKS]
    Py_ssize_t block_cap[ARROW_BLOCKS]
    int block_col[ARROW_BLOCKS]      # the cache column a block goes back to; -1: free it

# What a zero-length buffer points at (the interface wants no NULL data pointers).
cdef int64_t _EMPTY[2]
_EMPTY[0] = 0
_EMPTY[1] = 0


cdef void release_child(ArrowArray* a) noexcept nogil:
    a.release = NULL        # its memory is the batch's, released with it


cdef void release_batch(ArrowArray* a) noexcept nogil:
    # Runs wherever pyarrow drops the batch's last buffer, with or without the GIL: it
    # touches nothing of Python's (the cache has its own lock).
    cdef ArrowHolder* h = <ArrowHolder*>a.private_data
    cdef int i
    for i in range(2):
        if h.ext[i].release != NULL:
            h.ext[i].release(&h.ext[i])
    for i in range(ARROW_BLOCKS):
        if h.block[i] != NULL:
            cache_put(h.block_col[i], h.block[i], h.block_cap[i])
    a.release = NULL
    free(h)


cdef int64_t pack_validity(const uint8_t* valid, int64_t n, uint8_t** out) noexcept nogil:
    """The nulls among ``n`` byte flags; when there are any, ``out`` gets Arrow's bitmap of
    them (malloc'd; NULL when out of memory, then -1 is returned)."""
    cdef int64_t i, nulls = 0
    cdef uint8_t* bits
    out[0] = NULL
    for i in range(n):
        nulls += valid[i] == 0
    if nulls == 0:
        return 0
    bits = <uint8_t*>calloc(<size_t>((n + 7) // 8), 1)
    if bits == NULL:
        return -1
    for i in range(n):
        if valid[i]:
            bits[i >> 3] |= <uint8_t>(1 << (i & 7))
    out[0] = bits
    return nulls


cdef inline const void* data_or_empty(Buf* b) noexcept nogil:
    return <const void*>b.p if b.p != NULL else <const void*>_EMPTY


cdef void arrow_leaf(ArrowArray* a, int64_t n, int64_t nulls, const void** bufs, int nbufs) noexcept nogil:
    a.length = n
    a.null_count = nulls
    a.offset = 0
    a.n_buffers = nbufs
    a.buffers = bufs
    a.n_children = 0
    a.children = NULL
    a.dictionary = NULL
    a.release = release_child
    a.private_data = NULL


cdef int grow(Buf* b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t need = b.n + extra
    cdef Py_ssize_t cap = b.cap * 2
    cdef char* q
    if cap < b.hint:
        cap = b.hint
    if cap < 4096:
        cap = 4096
    while cap < need:
        cap *= 2
    q = <char*>realloc(b.p, cap)
    if q == NULL:
        return -1
    b.p = q
    b.cap = cap
    return 0

cdef inline int push8(Buf* b, int64_t v) noexcept nogil:
    if b.n + 8 > b.cap and grow(b, 8) < 0:
        return -1
    (<int64_t*>(b.p + b.n))[0] = v
    b.n += 8
    return 0

cdef inline int push4(Buf* b, int32_t v) noexcept nogil:
    if b.n + 4 > b.cap and grow(b, 4) < 0:
        return -1
    (<int32_t*>(b.p + b.n))[0] = v
    b.n += 4
    return 0

cdef inline int push1(Buf* b, int8_t v) noexcept nogil:
    if b.n + 1 > b.cap and grow(b, 1) < 0:
        return -1
    b.p[b.n] = <char>v
    b.n += 1
    return 0

cdef inline int pushbytes(Buf* b, const uint8_t* src, Py_ssize_t k) noexcept nogil:
    if b.n + k > b.cap and grow(b, k) < 0:
        return -1
    if k > 0:
        memcpy(b.p + b.n, src, k)
    b.n += k
    return 0

cdef inline int fail(State* S, Py_ssize_t pos, const char* reason, const char* msg) noexcept nogil:
    S.err_pos = pos
    S.has_err_offset = 0
    S.err_reason = reason
    S.err_msg = msg
    return ERR_CORRUPT

cdef inline int fail_at(State* S, Py_ssize_t pos, int64_t offset, const char* reason,
                        const char* msg) noexcept nogil:
    fail(S, pos, reason, msg)
    S.err_offset = offset
    S.has_err_offset = 1
    return ERR_CORRUPT

# A record the walker refused, as this decoder reports it: at ``pos`` (the record's
# start, or the compressed batch's position), with the record's offset once known.
cdef int record_fail(State* S, const RecordFields* r, Py_ssize_t pos, int64_t base_offset) noexcept nogil:
    cdef int e = r.err
    if e == KWR_VARINT:
        if r.varint_err == 1:
            fail(S, pos, b"truncated", b"record truncated inside a varint")
        else:
            fail(S, pos, b"varint", b"varint longer than its maximum size")
    elif e == KWR_LENGTH:
        if r.length < 0:
            fail(S, pos, b"length", b"record length is negative or runs past its batch")
        else:
            fail(S, pos, b"truncated", b"record too short for its fields")
    elif e == KWR_PAST_END:
        fail(S, pos, b"truncated", b"record length is negative or runs past its batch")
    elif e == KWR_KEY_LENGTH or e == KWR_KEY_PAST:
        fail(S, pos, b"length", b"record key length is invalid")
    elif e == KWR_VALUE_LENGTH or e == KWR_VALUE_PAST:
        fail(S, pos, b"length", b"record value length is invalid")
    elif e == KWR_HEADER_COUNT:
        fail(S, pos, b"length", b"record header count is invalid")
    elif e == KWR_HKEY_LENGTH:
        fail(S, pos, b"length", b"header key length is invalid")
    elif e == KWR_HVALUE_LENGTH or e == KWR_HVALUE_PAST:
        fail(S, pos, b"length", b"header value length is invalid")
    else:
        fail(S, pos, b"length", b"record length does not match its fields")
    if r.has_offset:
        S.err_offset = <int64_t>(<uint64_t>base_offset + <uint64_t><int64_t>r.off_delta)
        S.has_err_offset = 1
    return ERR_CORRUPT

cdef inline void bump_next(State* S, int64_t nxt) noexcept nogil:
    if not S.has_next or nxt > S.next_offset:
        S.next_offset = nxt
        S.has_next = 1

cdef inline int full(State* S, int64_t size) noexcept nogil:
    return S.n >= S.max_records or (S.n > 0 and S.data_bytes + size > S.max_bytes)

cdef inline int res(Buf* b, int64_t k) noexcept nogil:
    if b.n + k > b.cap and grow(b, k) < 0:
        return -1
    return 0


cdef int reserve(State* S, int64_t records, int64_t data) noexcept nogil:
    cdef Buf* c = S.cols
    cdef int64_t headers
    if (res(&c[C_OFFSET], 8 * records) or res(&c[C_TS], 8 * records)
            or res(&c[C_TSTYPE], 4 * records)
            or res(&c[C_KOFF], 4 * records) or res(&c[C_VOFF], 4 * records)
            or res(&c[C_KVALID], records) or res(&c[C_VVALID], records)
            or res(&c[C_KDATA], data) or res(&c[C_VDATA], data)):
        return ERR_NOMEM
    if S.include_headers:
        # A header takes at least two bytes (its two length varints).
        headers = data // 2 + 1
        if (res(&c[C_HOFF], 4 * records) or res(&c[C_HVALID], records)
                or res(&c[C_HKOFF], 4 * headers) or res(&c[C_HVOFF], 4 * headers)
                or res(&c[C_HVVALID], headers)
                or res(&c[C_HKDATA], data) or res(&c[C_HVDATA], data)):
            return ERR_NOMEM
    return 0


cdef inline void put8(Buf* b, int64_t v) noexcept nogil:
    (<int64_t*>(b.p + b.n))[0] = v
    b.n += 8

cdef inline void put4(Buf* b, int32_t v) noexcept nogil:
    (<int32_t*>(b.p + b.n))[0] = v
    b.n += 4

cdef inline void put1(Buf* b, int8_t v) noexcept nogil:
    b.p[b.n] = <char>v
    b.n += 1

cdef inline void putbytes(Buf* b, const uint8_t* src, Py_ssize_t k) noexcept nogil:
    memcpy(b.p + b.n, src, k)
    b.n += k


# Append one record to columns whose capacity reserve() has guaranteed.
cdef inline void put_record(State* S, int64_t offset, int64_t ts, int32_t ts_type,
                            const uint8_t* kp, int64_t klen, const uint8_t* vp, int64_t vlen,
                            int64_t pid, int txn, int64_t base, int64_t size) noexcept nogil:
    cdef Buf* c = S.cols
    put8(&c[C_OFFSET], offset)
    put8(&c[C_TS], ts)
    put4(&c[C_TSTYPE], ts_type)
    if klen >= 0:
        putbytes(&c[C_KDATA], kp, klen)
    put1(&c[C_KVALID], klen >= 0)
    put4(&c[C_KOFF], <int32_t>c[C_KDATA].n)
    if vlen >= 0:
        putbytes(&c[C_VDATA], vp, vlen)
    put1(&c[C_VVALID], vlen >= 0)
    put4(&c[C_VOFF], <int32_t>c[C_VDATA].n)
    S.n += 1
    S.data_bytes += size


cdef inline int push_run(State* S, int64_t start, int64_t pid, int txn, int64_t base) noexcept nogil:
    cdef Buf* c = S.cols
    if (push8(&c[C_RSTART], start) or push8(&c[C_RPID], pid) or push1(&c[C_RTXN], txn)
            or push8(&c[C_RBASE], base)):
        return ERR_NOMEM
    return 0


cdef inline int push_record(State* S, int64_t offset, int64_t ts, int32_t ts_type,
                     const uint8_t* kp, int64_t klen, const uint8_t* vp, int64_t vlen,
                     int64_t pid, int txn, int64_t base, int64_t size) noexcept nogil:
    cdef Buf* c = S.cols
    if push8(&c[C_OFFSET], offset) or push8(&c[C_TS], ts) or push4(&c[C_TSTYPE], ts_type):
        return ERR_NOMEM
    if klen >= 0:
        if pushbytes(&c[C_KDATA], kp, klen) or push1(&c[C_KVALID], 1):
            return ERR_NOMEM
    elif push1(&c[C_KVALID], 0):
        return ERR_NOMEM
    if push4(&c[C_KOFF], <int32_t>c[C_KDATA].n):
        return ERR_NOMEM
    if vlen >= 0:
        if pushbytes(&c[C_VDATA], vp, vlen) or push1(&c[C_VVALID], 1):
            return ERR_NOMEM
    elif push1(&c[C_VVALID], 0):
        return ERR_NOMEM
    if push4(&c[C_VOFF], <int32_t>c[C_VDATA].n):
        return ERR_NOMEM
    if push_run(S, S.n, pid, txn, base):
        return ERR_NOMEM
    S.n += 1
    S.data_bytes += size
    return 0


# Write cursors of the per-record columns, kept in locals in the record loop
# (stores through the column buffers would otherwise force reloads of every
# buffer's length after each write).
ctypedef struct Cur:
    int64_t* off
    int64_t* ts
    int32_t* tst
    int32_t* koff
    uint8_t* kval
    int32_t* voff
    uint8_t* vval
    char* kd
    char* vd
    int32_t* hoff
    uint8_t* hval
    int32_t* hkoff
    int32_t* hvoff
    uint8_t* hvval
    char* hkd
    char* hvd
    int64_t nh
    int64_t n
    int64_t nbytes
    int64_t next
    int has_next

cdef inline void cur_load(State* S, Cur* u) noexcept nogil:
    cdef Buf* c = S.cols
    u.off = <int64_t*>(c[C_OFFSET].p + c[C_OFFSET].n)
    u.ts = <int64_t*>(c[C_TS].p + c[C_TS].n)
    u.tst = <int32_t*>(c[C_TSTYPE].p + c[C_TSTYPE].n)
    u.koff = <int32_t*>(c[C_KOFF].p + c[C_KOFF].n)
    u.kval = <uint8_t*>(c[C_KVALID].p + c[C_KVALID].n)
    u.voff = <int32_t*>(c[C_VOFF].p + c[C_VOFF].n)
    u.vval = <uint8_t*>(c[C_VVALID].p + c[C_VVALID].n)
    u.kd = c[C_KDATA].p + c[C_KDATA].n
    u.vd = c[C_VDATA].p + c[C_VDATA].n
    u.hoff = <int32_t*>(c[C_HOFF].p + c[C_HOFF].n)
    u.hval = <uint8_t*>(c[C_HVALID].p + c[C_HVALID].n)
    u.hkoff = <int32_t*>(c[C_HKOFF].p + c[C_HKOFF].n)
    u.hvoff = <int32_t*>(c[C_HVOFF].p + c[C_HVOFF].n)
    u.hvval = <uint8_t*>(c[C_HVVALID].p + c[C_HVVALID].n)
    u.hkd = c[C_HKDATA].p + c[C_HKDATA].n
    u.hvd = c[C_HVDATA].p + c[C_HVDATA].n
    u.nh = S.nh
    u.n = S.n
    u.nbytes = S.data_bytes
    u.next = S.next_offset
    u.has_next = S.has_next

cdef inline void cur_store(State* S, Cur* u) noexcept nogil:
    cdef Buf* c = S.cols
    c[C_OFFSET].n = <char*>u.off - c[C_OFFSET].p
    c[C_TS].n = <char*>u.ts - c[C_TS].p
    c[C_TSTYPE].n = <char*>u.tst - c[C_TSTYPE].p
    c[C_KOFF].n = <char*>u.koff - c[C_KOFF].p
    c[C_KVALID].n = <char*>u.kval - c[C_KVALID].p
    c[C_VOFF].n = <char*>u.voff - c[C_VOFF].p
    c[C_VVALID].n = <char*>u.vval - c[C_VVALID].p
    c[C_KDATA].n = u.kd - c[C_KDATA].p
    c[C_VDATA].n = u.vd - c[C_VDATA].p
    c[C_HOFF].n = <char*>u.hoff - c[C_HOFF].p
    c[C_HVALID].n = <char*>u.hval - c[C_HVALID].p
    c[C_HKOFF].n = <char*>u.hkoff - c[C_HKOFF].p
    c[C_HVOFF].n = <char*>u.hvoff - c[C_HVOFF].p
    c[C_HVVALID].n = <char*>u.hvval - c[C_HVVALID].p
    c[C_HKDATA].n = u.hkd - c[C_HKDATA].p
    c[C_HVDATA].n = u.hvd - c[C_HVDATA].p
    S.nh = u.nh
    S.n = u.n
    S.data_bytes = u.nbytes
    S.next_offset = u.next
    S.has_next = u.has_next


# Decode v2 records d[rpos[0]:end] (ctx.count of them, resuming at index[0]).
cdef int v2_records(State* S, const uint8_t* d, Py_ssize_t end, Ctx* x,
                    Py_ssize_t* index, Py_ssize_t* rpos, Py_ssize_t errpos, int inplace) noexcept nogil:
    cdef Py_ssize_t pos = rpos[0], i = index[0], rstart, kpos, vpos, here
    cdef int64_t rlen, tsd, klen, vlen, hcount, offset, ts, j
    cdef int keep, with_h, run_open = 0
    cdef Cursor cur
    cdef RecordFields rec
    cdef const uint8_t* hp
    cdef const uint8_t* hkp
    cdef const uint8_t* hvp
    cdef int32_t hkl32, hvl32
    cdef int32_t ctype
    cdef Buf* c = S.cols
    cdef int64_t rem = x.count - i
    if rem > end - pos:
        rem = end - pos
    if rem > S.max_records - S.n:
        # the chunk fills up first (FULL): room for more would be allocated for nothing
        rem = S.max_records - S.n
    cdef Cur u
    cdef char* kd0
    cdef char* vd0
    cdef char* hkd0
    cdef char* hvd0
    if rem > 0 and not x.control:
        if reserve(S, rem, end - pos):
            return ERR_NOMEM
    cur_load(S, &u)
    kd0 = c[C_KDATA].p
    vd0 = c[C_VDATA].p
    hkd0 = c[C_HKDATA].p
    hvd0 = c[C_HVDATA].p
    cur.base = d
    cur.end = d + end
    while i < x.count:
        rstart = pos
        here = pos if inplace else errpos
        cur.p = d + pos
        if record_read(&cur, &rec, 0, 0, 0) != KWR_OK:
            return record_fail(S, &rec, here, x.base_offset)
        rlen = rec.length
        KW_PREFETCH(rec.end + 256)
        if not x.control and (u.n >= S.max_records or (u.n > 0 and u.nbytes + rlen > S.max_bytes)):
            cur_store(S, &u)
            index[0] = i
            rpos[0] = rstart
            return ST_FULL
        pos = rec.end - d
        tsd = rec.ts_delta
        offset = <int64_t>(<uint64_t>x.base_offset + <uint64_t><int64_t>rec.off_delta)
        klen = rec.klen
        vlen = rec.vlen
        hcount = rec.nh
        kpos = rec.key - d
        vpos = rec.value - d
        keep = (not x.control) and offset >= S.start_offset and offset < S.end_offset
        with_h = keep and S.include_headers
        if with_h:
            hp = rec.headers
            j = 0
            while j < hcount:
                header_next(&hp, rec.end, &hkp, &hkl32, &hvp, &hvl32)
                if hkl32 > 0:
                    memcpy(u.hkd, hkp, hkl32)
                    u.hkd += hkl32
                u.hkoff[0] = <int32_t>(u.hkd - hkd0)
                u.hkoff += 1
                if hvl32 > 0:
                    memcpy(u.hvd, hvp, hvl32)
                    u.hvd += hvl32
                u.hvval[0] = hvl32 >= 0
                u.hvval += 1
                u.hvoff[0] = <int32_t>(u.hvd - hvd0)
                u.hvoff += 1
                j += 1
        if x.log_append:
            ts = x.max_ts
        else:
            ts = x.base_ts + tsd
        if x.control:
            if klen < 4:
                return fail_at(S, here, offset, b"attributes", b"control record key is too short")
            ctype = be16(d + kpos + 2)
            if ctype > 127 or ctype < -128:
                ctype = -1
            if (push8(&c[C_COFF], offset) or push8(&c[C_CPID], x.producer_id)
                    or push1(&c[C_CTYPE], <int8_t>ctype) or push8(&c[C_CTS], ts)):
                return ERR_NOMEM
        elif keep:
            if not run_open:
                if push_run(S, u.n, x.producer_id, x.txn, x.base_offset):
                    return ERR_NOMEM
                run_open = 1
            if with_h:
                u.nh += hcount
                u.hoff[0] = <int32_t>u.nh
                u.hoff += 1
                u.hval[0] = hcount > 0
                u.hval += 1
            u.off[0] = offset
            u.off += 1
            u.ts[0] = ts
            u.ts += 1
            u.tst[0] = x.ts_type
            u.tst += 1
            if klen > 0:
                memcpy(u.kd, d + kpos, klen)
                u.kd += klen
            u.kval[0] = klen >= 0
            u.kval += 1
            u.koff[0] = <int32_t>(u.kd - kd0)
            u.koff += 1
            if vlen > 0:
                memcpy(u.vd, d + vpos, vlen)
                u.vd += vlen
            u.vval[0] = vlen >= 0
            u.vval += 1
            u.voff[0] = <int32_t>(u.vd - vd0)
            u.voff += 1
            u.n += 1
            u.nbytes += rlen
        if not u.has_next or offset + 1 > u.next:
            u.next = offset + 1
            u.has_next = 1
        i += 1
    if pos != end:
        return fail(S, pos if inplace else errpos, b"length",
                    b"bytes remain after the batch's declared record count")
    cur_store(S, &u)
    index[0] = i
    rpos[0] = pos
    return ST_DONE


cdef inline void v2_ctx(const uint8_t* d, Py_ssize_t pos, Ctx* x) noexcept nogil:
    cdef V2Header h
    read_v2_header(d + pos, &h)
    x.base_offset = h.base_offset
    x.ts_type = 1 if h.attributes & TIMESTAMP_TYPE_MASK else 0
    x.log_append = x.ts_type
    x.txn = 1 if h.attributes & TRANSACTIONAL_MASK else 0
    x.control = 1 if h.attributes & CONTROL_MASK else 0
    x.base_ts = h.base_timestamp
    x.max_ts = h.max_timestamp
    x.producer_id = h.producer_id
    x.count = h.record_count
    x.batch_pos = pos


# One legacy message d[pos:pos+12+size] (uncompressed) appended with the given
# offset; ``wrap`` is NULL at top level or the wrapper's context when inner.
cdef int legacy_message(State* S, const uint8_t* d, Py_ssize_t pos, Py_ssize_t size,
                        int64_t offset, Ctx* wrap, Py_ssize_t errpos) noexcept nogil:
    cdef int magic = <int8_t>d[pos + 16]
    cdef Py_ssize_t end = pos + 12 + size, kpos
    cdef int64_t ts = -1, klen, vlen
    cdef int32_t ts_type = -1
    if magic == 1:
        if size < 22:
            return fail_at(S, errpos, offset, b"length", b"message smaller than a v1 header")
        ts = be64(d + pos + 18)
        ts_type = (d[pos + 17] >> 3) & 1
        kpos = pos + 26
    elif magic == 0:
        if size < 14:
            return fail_at(S, errpos, offset, b"length", b"message smaller than a v0 header")
        kpos = pos + 18
    else:
        return fail_at(S, errpos, offset, b"magic", b"message magic is not 0 or 1")
    if wrap != NULL:
        if wrap.log_append:
            ts = wrap.max_ts
            ts_type = 1
        elif wrap.ts_type == 0 and magic == 1:
            ts_type = 0
    klen = be32(d + kpos)
    if klen < -1 or klen > end - kpos - 8:
        return fail_at(S, errpos, offset, b"length", b"message key length is invalid")
    kpos += 4
    vlen = be32(d + kpos + (klen if klen > 0 else 0))
    if vlen < -1 or kpos + (klen if klen > 0 else 0) + 4 + (vlen if vlen > 0 else 0) != end:
        return fail_at(S, errpos, offset, b"length", b"message value length does not match its size")
    if offset < S.start_offset or offset >= S.end_offset:
        return 0
    if S.include_headers:
        if push4(&S.cols[C_HOFF], <int32_t>S.nh) or push1(&S.cols[C_HVALID], 0):
            return ERR_NOMEM
    return push_record(S, offset, ts, ts_type, d + kpos, klen,
                       d + kpos + (klen if klen > 0 else 0) + 4, vlen, -1, 0, offset, size)


# Walk top-level entries of d[pos[0]:end]; see the module docstring.
cdef int scan(State* S, const uint8_t* d, Py_ssize_t end, Py_ssize_t* ppos,
              Py_ssize_t* index, Py_ssize_t* rpos) noexcept nogil:
    cdef Py_ssize_t pos = ppos[0], nxt
    cdef int64_t size, base, last
    cdef int magic, r, attrs
    cdef Ctx x
    while True:
        ppos[0] = pos
        if end - pos < 17:
            return ST_DONE if end == pos else ST_PARTIAL
        base = be64(d + pos)
        size = be32(d + pos + 8)
        if size < 14:
            return fail_at(S, pos, base, b"length", b"batch size is smaller than the minimum record overhead (14)")
        if size > end - pos - 12:
            return ST_PARTIAL
        nxt = pos + 12 + size
        magic = <int8_t>d[pos + 16]
        if magic == 2:
            if size < 49:
                return fail_at(S, pos, base, b"length", b"v2 batch smaller than its header")
            attrs = be16(d + pos + 21)
            last = base + be32(d + pos + 23)
            if base >= S.end_offset:
                return ST_PAST_END
            if be32(d + pos + 57) < 0:
                return fail_at(S, pos, base, b"length", b"negative record count")
            if last < S.start_offset:
                bump_next(S, last + 1)
                pos = nxt
                continue
            if attrs & 7:
                return ST_COMPRESSED
            v2_ctx(d, pos, &x)
            if index[0] == 0:
                rpos[0] = pos + 61
            r = v2_records(S, d, nxt, &x, index, rpos, pos, 1)
            if r != ST_DONE:
                return r
            bump_next(S, last + 1)
        elif magic == 0 or magic == 1:
            if d[pos + 17] & 7:
                if 0 < base < S.start_offset:   # a wrapper at 0 may hold later offsets
                    bump_next(S, base + 1)
                    pos = nxt
                    continue
                return ST_COMPRESSED
            if base >= S.end_offset:
                return ST_PAST_END
            if base >= S.start_offset and full(S, size):
                index[0] = 0
                return ST_FULL
            r = legacy_message(S, d, pos, size, base, NULL, pos)
            if r:
                return r
            bump_next(S, base + 1)
        else:
            return fail_at(S, pos, base, b"magic", b"unknown magic byte (expected 0, 1 or 2)")
        pos = nxt
        index[0] = 0
        rpos[0] = 0


cdef class ColumnBuilder:
    """Growable column buffers filled by :func:`columnar_scan`/:func:`columnar_payload`.

    ``start_offset``/``end_offset`` (None = unbounded) select records;
    ``max_records``/``max_bytes`` bound one chunk.  :meth:`take` returns the
    columns as numpy arrays that own the memory, and starts a new chunk.
    """
    cdef State S

    def __cinit__(self):
        cdef int k
        for k in range(NCOLS):
            self.S.cols[k].p = NULL
            self.S.cols[k].n = 0
            self.S.cols[k].cap = 0
            self.S.cols[k].hint = 4096

    def __init__(self, include_headers=False, max_records=65536, max_bytes=64 << 20,
                 start_offset=None, end_offset=None):
        if max_records < 1 or max_bytes < 1:
            raise ValueError("max_records and max_bytes must be at least 1")
        if max_bytes > _C.MAX_CHUNK_BYTES:
            raise ValueError(f"max_bytes must be below 2 GiB ({_C.MAX_CHUNK_BYTES}), Arrow's binary limit")
        self.S.include_headers = 1 if include_headers else 0
        self.S.max_records = min(max_records, I64_MAX)
        self.S.max_bytes = max_bytes
        self.S.start_offset = I64_MIN if start_offset is None else start_offset
        self.S.end_offset = I64_MAX if end_offset is None else end_offset
        self.S.has_next = 0
        self.S.next_offset = 0
        cdef int k
        expect = min(max_records, 65536)
        for k in range(NCOLS):
            name, dtype, group = _C.COLUMNS[k]
            if group in ("rec", "rec+1"):
                self.S.cols[k].hint = np.dtype(dtype).itemsize * (expect + 1)
            elif group == "data":
                self.S.cols[k].hint = min(max_bytes, 16 << 20)
        self._reset()

    def __dealloc__(self):
        cdef int k
        for k in range(NCOLS):
            free(self.S.cols[k].p)
            self.S.cols[k].p = NULL

    cdef _reset(self):
        cdef int k
        for k in range(NCOLS):
            self.S.cols[k].n = 0
        adopt_cache(&self.S)
        self.S.n = 0
        self.S.nh = 0
        self.S.data_bytes = 0
        if (push4(&self.S.cols[C_KOFF], 0) or push4(&self.S.cols[C_VOFF], 0)
                or push4(&self.S.cols[C_HOFF], 0) or push4(&self.S.cols[C_HKOFF], 0)
                or push4(&self.S.cols[C_HVOFF], 0)):
            raise MemoryError("cannot allocate column buffers")

    def __len__(self):
        return self.S.n

    @property
    def data_bytes(self):
        """Record bytes (as framed on the wire) appended to this chunk."""
        return self.S.data_bytes

    @property
    def next_offset(self):
        """One past the last offset consumed (control and skipped batches included), or None."""
        return self.S.next_offset if self.S.has_next else None

    def take(self):
        """Return this chunk's columns as ``{name: numpy array}`` and start an empty chunk.

        Header columns are None unless the builder was made with headers.
        """
        cdef dict out = {}
        cdef int k
        cdef Buf* b
        cdef cnp.npy_intp dims[1]
        cdef cnp.ndarray arr
        cdef char* q
        cdef int headers = self.S.include_headers
        for k in range(NCOLS):
            name = _NAMES[k]
            if not headers and _IS_HEADER[k]:
                out[name] = None
                continue
            b = &self.S.cols[k]
            dt = _DTYPES[k]
            if b.n == 0:
                out[name] = np.empty(0, dtype=dt)
                continue
            dims[0] = b.n // dt.itemsize
            arr = cnp.PyArray_SimpleNewFromData(1, dims, dt.num, <void*>b.p)
            cap = PyCapsule_New(<void*>b.p, NULL, _free_capsule)
            # Context = capacity << 5 | column (31 = "do not cache": too large to encode).
            if <size_t>b.cap <= (<size_t>-1) >> 5:
                PyCapsule_SetContext(cap, <void*>((<size_t>b.cap << 5) | <size_t>k))
            else:
                PyCapsule_SetContext(cap, <void*><size_t>31)
            cnp.set_array_base(arr, cap)
            b.p = NULL
            b.n = 0
            b.cap = 0
            out[name] = arr
        self._reset()
        return out

    def take_arrow(self, schema, topic, partition):
        """Return this chunk's rows as one ``pyarrow.RecordBatch`` of ``schema`` and start an
        empty chunk (like :meth:`take`).

        ``schema`` is Spark's Kafka schema with topic and partition and without headers
        (``kafkawire.records.columnar.arrow_schema(False, True)``); ``topic`` and
        ``partition`` are those columns as Arrow arrays, one value per row.  The key, value,
        offset, timestamp and timestampType columns are the builder's buffers, handed over
        through Arrow's C data interface without a copy (timestamps become microseconds in
        place).  A builder made with headers raises ValueError: use :meth:`take`.
        """
        if self.S.include_headers:
            raise ValueError("take_arrow makes batches without headers; use take() for headers")
        cdef int64_t n = self.S.n
        if len(topic) != n or len(partition) != n:
            raise ValueError(f"topic and partition columns need {n} rows, not "
                             f"{len(topic)} and {len(partition)}")
        import pyarrow as pa
        cdef ArrowHolder* h = <ArrowHolder*>calloc(1, sizeof(ArrowHolder))
        if h == NULL:
            raise MemoryError("out of memory making an Arrow batch")
        cdef int i, j
        cdef uint8_t* kbits = NULL
        cdef uint8_t* vbits = NULL
        cdef int64_t knulls, vnulls
        try:
            topic._export_to_c(<uintptr_t>&h.ext[0])
            partition._export_to_c(<uintptr_t>&h.ext[1])
        except BaseException:
            for i in range(2):
                if h.ext[i].release != NULL:
                    h.ext[i].release(&h.ext[i])
            free(h)
            raise
        cdef Buf* c = self.S.cols
        knulls = pack_validity(<const uint8_t*>c[C_KVALID].p, n, &kbits)
        vnulls = pack_validity(<const uint8_t*>c[C_VVALID].p, n, &vbits)
        if knulls < 0 or vnulls < 0:
            free(kbits)
            free(vbits)
            for i in range(2):
                h.ext[i].release(&h.ext[i])
            free(h)
            raise MemoryError("out of memory making an Arrow batch")
        cdef int64_t* ts = <int64_t*>c[C_TS].p
        for j in range(n):
            ts[j] = <int64_t>(<uint64_t>ts[j] * 1000u)   # wraps as numpy's multiply does
        h.bufs[0][0] = kbits
        h.bufs[0][1] = data_or_empty(&c[C_KOFF])
        h.bufs[0][2] = data_or_empty(&c[C_KDATA])
        arrow_leaf(&h.own[0], n, knulls, h.bufs[0], 3)
        h.bufs[1][0] = vbits
        h.bufs[1][1] = data_or_empty(&c[C_VOFF])
        h.bufs[1][2] = data_or_empty(&c[C_VDATA])
        arrow_leaf(&h.own[1], n, vnulls, h.bufs[1], 3)
        for i, k in enumerate((C_OFFSET, C_TS, C_TSTYPE)):
            h.bufs[2 + i][0] = NULL
            h.bufs[2 + i][1] = data_or_empty(&c[k])
            arrow_leaf(&h.own[2 + i], n, 0, h.bufs[2 + i], 2)
        h.kids[0] = &h.own[0]
        h.kids[1] = &h.own[1]
        h.kids[2] = &h.ext[0]
        h.kids[3] = &h.ext[1]
        h.kids[4] = &h.own[2]
        h.kids[5] = &h.own[3]
        h.kids[6] = &h.own[4]
        h.parent_bufs[0] = NULL
        h.parent.length = n
        h.parent.null_count = 0
        h.parent.offset = 0
        h.parent.n_buffers = 1
        h.parent.buffers = h.parent_bufs
        h.parent.n_children = ARROW_KIDS
        h.parent.children = h.kids
        h.parent.dictionary = NULL
        h.parent.release = release_batch
        h.parent.private_data = h
        for i, k in enumerate((C_KOFF, C_KDATA, C_VOFF, C_VDATA, C_OFFSET, C_TS, C_TSTYPE)):
            h.block[i] = c[k].p
            h.block_cap[i] = c[k].cap
            h.block_col[i] = k
            c[k].p = NULL
            c[k].n = 0
            c[k].cap = 0
        h.block[7] = kbits
        h.block_col[7] = -1
        h.block[8] = vbits
        h.block_col[8] = -1
        try:
            # pyarrow owns the structs from here, and releases them even when the import fails
            return pa.RecordBatch._import_from_c(<uintptr_t>&h.parent, schema)
        finally:
            self._reset()


cdef raise_state(State* S, int r):
    if r == ERR_NOMEM:
        raise MemoryError("out of memory while building columns; lower max_records/max_bytes")
    raise CorruptRecordError(
        (<bytes>S.err_msg).decode(), position=S.err_pos,
        offset=S.err_offset if S.has_err_offset else None,
        reason=(<bytes>S.err_reason).decode())


cdef Py_ssize_t check_range(Py_ssize_t n, Py_ssize_t pos, Py_ssize_t end) except -1:
    if end < 0 or end > n or pos < 0 or pos > end:
        raise ValueError(f"range [{pos}, {end}) is outside the buffer of {n} bytes")
    return 0


def columnar_scan(ColumnBuilder builder, buf, Py_ssize_t pos, Py_ssize_t end,
                  Py_ssize_t rec_index=0, Py_ssize_t rec_pos=0):
    """Decode top-level batches/messages of ``buf[pos:end]`` into ``builder``.

    Returns ``(status, pos, rec_index, rec_pos)``: ``pos`` is the batch where
    decoding stopped; after FULL, call again with the returned values to
    resume inside that batch.  Raises CorruptRecordError (positions relative
    to ``buf``).
    """
    cdef const uint8_t[::1] v = buf
    cdef Py_ssize_t n = v.shape[0]
    check_range(n, pos, end)
    cdef const uint8_t* d = &v[0] if n else NULL
    cdef Py_ssize_t p = pos, idx = rec_index, rp = rec_pos
    cdef State* S = &builder.S
    cdef int r
    if rec_index < 0 or (rec_index > 0 and not pos < rec_pos <= end):
        raise ValueError("rec_index/rec_pos must come from a previous FULL result")
    if n == 0:
        return (ST_DONE, 0, 0, 0)
    adopt_cache(S)
    with nogil:
        r = scan(S, d, end, &p, &idx, &rp)
    if r < 0:
        raise_state(S, r)
    return (r, p, idx, rp)


def columnar_payload_info(buf, Py_ssize_t pos):
    """``(magic, codec, payload_start, payload_end, next_pos)`` of the compressed batch at ``pos``."""
    cdef const uint8_t[::1] v = buf
    cdef Py_ssize_t n = v.shape[0], size, kpos
    cdef const uint8_t* d
    cdef int magic
    cdef int64_t klen, vlen
    if pos < 0 or n - pos < 17:
        raise ValueError(f"no batch header at position {pos}")
    d = &v[0]
    size = be32(d + pos + 8)
    if size < 14 or size > n - pos - 12:
        raise CorruptRecordError("batch size is invalid", position=pos, reason="length")
    magic = <int8_t>d[pos + 16]
    if magic == 2:
        if size < 49:
            raise CorruptRecordError("v2 batch smaller than its header", position=pos, reason="length")
        return (2, be16(d + pos + 21) & 7, pos + 61, pos + 12 + size, pos + 12 + size)
    if magic not in (0, 1):
        raise CorruptRecordError("unknown magic byte", position=pos, reason="magic")
    kpos = pos + (26 if magic == 1 else 18)
    if size < (22 if magic == 1 else 14):
        raise CorruptRecordError("message smaller than its header", position=pos, reason="length")
    klen = be32(d + kpos)
    if klen < -1 or klen > pos + 12 + size - kpos - 8:
        raise CorruptRecordError("wrapper key length is invalid", position=pos, reason="length")
    kpos += 4 + (klen if klen > 0 else 0)
    vlen = be32(d + kpos)
    if vlen < 0 or kpos + 4 + vlen != pos + 12 + size:
        raise CorruptRecordError("wrapper value length does not match its size",
                                 position=pos, reason="length")
    return (magic, d[pos + 17] & 7, kpos + 4, kpos + 4 + vlen, pos + 12 + size)


cdef int legacy_inner(State* S, const uint8_t* w, Py_ssize_t wpos, const uint8_t* d, Py_ssize_t n,
                      Py_ssize_t* index, Py_ssize_t* rpos) noexcept nogil:
    cdef Ctx x
    cdef int wmagic = <int8_t>w[wpos + 16]
    cdef int64_t woffset = be64(w + wpos), last_rel = 0, inner, size, absoff, delta = 0
    cdef Py_ssize_t p = 0, i
    cdef int r
    x.ts_type = -1
    x.log_append = 0
    if wmagic == 1:
        x.ts_type = (w[wpos + 17] >> 3) & 1
        x.log_append = x.ts_type
        x.max_ts = be64(w + wpos + 18)
    # First pass: sizes, nesting, and the last inner offset (magic 1 offsets are relative to it).
    while p < n:
        if n - p < 17:
            return fail_at(S, wpos, woffset, b"truncated", b"compressed message set ends inside a message")
        size = be32(d + p + 8)
        if size < 14 or size > n - p - 12:
            return fail_at(S, wpos, woffset, b"length", b"inner message size is invalid")
        if d[p + 17] & 7:
            return fail_at(S, wpos, woffset, b"compression", b"compressed message nested inside another")
        last_rel = be64(d + p)
        p += 12 + size
    if n == 0:
        return fail_at(S, wpos, woffset, b"count", b"compressed message set holds no messages")
    # Kafka: a magic-1 wrapper at offset 0 is produce-side data (inner offsets stand as they
    # are); any other wrapper offset below the last inner offset is invalid.
    if wmagic == 1 and woffset != 0:
        if woffset < last_rel:
            return fail_at(S, wpos, woffset, b"offset",
                           b"wrapper offset is less than the last inner message offset "
                           b"and it is not zero")
        delta = woffset - last_rel
    p = rpos[0]
    i = index[0]
    while p < n:
        size = be32(d + p + 8)
        absoff = be64(d + p) + delta
        if absoff >= S.start_offset and absoff < S.end_offset and full(S, size):
            index[0] = i
            rpos[0] = p
            return ST_FULL
        r = legacy_message(S, d, p, size, absoff, &x, wpos)
        if r:
            return r
        bump_next(S, absoff + 1)
        p += 12 + size
        i += 1
    bump_next(S, woffset + 1)
    index[0] = i
    rpos[0] = p
    return ST_DONE


def columnar_payload(ColumnBuilder builder, buf, Py_ssize_t pos, payload,
                     Py_ssize_t rec_index=0, Py_ssize_t rec_pos=0):
    """Decode the decompressed ``payload`` of the batch/wrapper at ``buf[pos]``.

    Returns ``(status, rec_index, rec_pos)`` (DONE or FULL; resume with the
    returned values and the same payload after FULL).  Errors name ``pos``.
    """
    cdef const uint8_t[::1] v = buf
    cdef const uint8_t[::1] pv = payload
    cdef Py_ssize_t n = v.shape[0], pn = pv.shape[0]
    cdef const uint8_t* d
    cdef const uint8_t* pd = &pv[0] if pn else <const uint8_t*>b""
    cdef Py_ssize_t idx = rec_index, rp = rec_pos
    cdef State* S = &builder.S
    cdef Ctx x
    cdef int r, magic
    if pos < 0 or n - pos < 17:
        raise ValueError(f"no batch header at position {pos}")
    if rec_pos < 0 or rec_pos > pn or rec_index < 0:
        raise ValueError("rec_index/rec_pos must come from a previous FULL result")
    d = &v[0]
    magic = <int8_t>d[pos + 16]
    adopt_cache(S)
    if magic == 2:
        if n - pos < 61:
            raise ValueError(f"no v2 batch header at position {pos}")
        v2_ctx(d, pos, &x)
        with nogil:
            r = v2_records(S, pd, pn, &x, &idx, &rp, pos, 0)
            if r == ST_DONE:
                bump_next(S, x.base_offset + be32(d + pos + 23) + 1)
    elif magic == 0 or magic == 1:
        if n - pos < 26:
            raise ValueError(f"no message header at position {pos}")
        with nogil:
            r = legacy_inner(S, d, pos, pd, pn, &idx, &rp)
    else:
        raise CorruptRecordError("unknown magic byte", position=pos, reason="magic")
    if r < 0:
        raise_state(S, r)
    return (r, idx, rp)
