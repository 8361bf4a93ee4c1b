# cython: language_level=3
# distutils: sources = kafkawire/_fast/crc_impl.c
"""Batch header scan (compiled twin of ``kafkawire/_pure/scan.py``).

The contract of ``scan_batches`` is in ``kafkawire/_pure/scan.py``'s docstring.
The loop runs without the GIL over a raw pointer; rows go to a growable C
array copied into the numpy result at the end.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy
from kafkawire._fast.wire cimport kw_be_i32, kw_be_u32, kw_be_i64
from kafkawire._fast.framing cimport V2Header, read_v2_header, frame_length, frame_magic
from kafkawire._fast.format cimport (LOG_OVERHEAD, V2_MIN_LENGTH, V0_MIN_LENGTH, V1_MIN_LENGTH,
                                    V2_CRC, V2_CRC_START, V2_RECORDS, COMPRESSION_MASK,
                                    TIMESTAMP_TYPE_MASK, CONTROL_MASK, CODEC_ZSTD)

import zlib
import numpy as np
cimport numpy as cnp

from kafkawire import _scan_common as C

cnp.import_array()

__all__ = ["scan_batches", "scan_batch_objects", "BatchHeader"]

cdef extern from "crc_impl.h":
    uint32_t kw_crc32c(uint32_t crc, const unsigned char *buf, size_t len) nogil

cdef extern from *:
    void kw_prefetch "__builtin_prefetch"(const void *p) nogil

cdef enum:
    NF = 14
    # header prefetch: how many batches ahead, and bytes either side of the guess
    PREFETCH_AHEAD = 8
    PREFETCH_WINDOW = 384
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
    cdef V2Header h
    cdef int status = 0
    cdef Py_ssize_t avg = 0, guess, j
    while pos < end:
        if max_count >= 0 and rows.n >= max_count:
            break
        if end - pos < LOG_OVERHEAD:
            status = 1
            break
        b = buf + pos
        length = frame_length(b)
        if length < V0_MIN_LENGTH:
            status = 2
            break
        size = <Py_ssize_t>length + LOG_OVERHEAD
        if size > end - pos:
            status = 1
            break
        magic = frame_magic(b)
        if magic == 2:
            if length < V2_MIN_LENGTH:
                status = 2
                break
            if check_crc and kw_crc32c(0, b + V2_CRC_START, size - V2_CRC_START) != kw_be_u32(b + V2_CRC):
                status = 4
                break
        elif magic == 0 or magic == 1:
            if magic == 1 and length < V1_MIN_LENGTH:
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
            read_v2_header(b, &h)
            row[2] = h.base_offset
            row[3] = <int64_t>(<uint64_t>h.base_offset + <uint64_t><int64_t>h.last_offset_delta)  # wraps, as Java's long
            row[5] = h.attributes
            row[7] = h.partition_leader_epoch
            row[6] = h.crc
            row[8] = h.base_timestamp
            row[9] = h.max_timestamp
            row[10] = h.producer_id
            row[11] = h.producer_epoch
            row[12] = h.base_sequence
            row[13] = h.record_count
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
        avg = size if avg == 0 else (avg * 7 + size) >> 3
        # Each header's position comes from the previous one's length, so the
        # loads form a chain of cache (and TLB) misses the hardware prefetcher
        # cannot follow once batch sizes vary (compressed batches do).  Guess
        # where the header PREFETCH_AHEAD batches on lies from the running mean
        # size and prefetch the lines around it.
        guess = pos + PREFETCH_AHEAD * avg
        if guess + PREFETCH_WINDOW < end and guess > PREFETCH_WINDOW:
            j = -PREFETCH_WINDOW
            while j <= PREFETCH_WINDOW:
                kw_prefetch(buf + guess + j)
                j += 64
    ppos[0] = pos
    return status


cdef int _scan_rows(object buf, const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end,
                    Py_ssize_t max_count, bint check_crc, Rows *rows) except? -9:
    """``scan_core`` over ``[pos, end)``; legacy CRC-32s are checked here (zlib, with the GIL)."""
    cdef int status
    cdef bint skip = False
    while True:
        with nogil:
            status = scan_core(p, pos, end, max_count, check_crc, skip, rows)
        if status != NEED_LEGACY_CRC:
            return status
        size = kw_be_i32(p + pos[0] + 8) + 12
        stored = kw_be_u32(p + pos[0] + 12)
        if zlib.crc32((<object>memoryview(buf).cast("B"))[pos[0] + 16:pos[0] + size]) != stored:
            return 4
        skip = True


def scan_batches(buf, Py_ssize_t start=0, Py_ssize_t end=-1, Py_ssize_t max_count=-1,
                 bint check_crc=False):
    """Read batch headers of ``buf[start:end]``; see ``kafkawire._pure.scan``."""
    cdef Py_buffer view
    cdef Rows rows
    cdef Py_ssize_t pos
    cdef int status
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
        status = _scan_rows(buf, p, &pos, end, max_count, check_crc, &rows)
        if status < 0:
            raise MemoryError("scan_batches: out of memory for the header array")
        out = np.empty((rows.n, NF), dtype=np.int64)
        if rows.n:
            memcpy(cnp.PyArray_DATA(out), rows.data, rows.n * NF * sizeof(int64_t))
    finally:
        PyBuffer_Release(&view)
        free(rows.data)
    return out, pos, status


from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from cpython.list cimport PyList_New, PyList_SET_ITEM
from kafkawire._fast.records cimport iter_v2_batch, v2_batch_ok
from cpython.object cimport PyTypeObject
from kafkawire._fast.cpython_tricks cimport tricks_enabled, kw_gc_new

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    ctypedef struct TypeSlots "PyTypeObject":
        PyObject *(*tp_new)(TypeSlots *, PyObject *, PyObject *)
    void PyObject_GC_Track(void *op)

cdef tuple _NO_ARGS = ()

_ACYCLIC = {bytes, int, type(None), str, float, bool}
from types import FunctionType as _FUNCTION   # (a lambda here would be a Cython function)


cdef bint _acyclic_hooks(object hooks):
    """True for None or a tuple of plain (module-level) functions: no garbage cycle
    through a batch object can pass through them."""
    if hooks is None:
        return True
    return type(hooks) is tuple and all(type(f) is _FUNCTION for f in hooks)

cdef extern from "Python.h":
    object PyObject_GenericGetAttr(object o, object name)

cdef bint _FAST_ATTRS = tricks_enabled("attrs")
cdef object _N_BASE_OFFSET = "base_offset"
cdef object _N_LAST_OFFSET = "last_offset"
cdef object _N_MAX_TIMESTAMP = "max_timestamp"
cdef object _N_FIRST_TIMESTAMP = "first_timestamp"
cdef object _N_PRODUCER_ID = "producer_id"
cdef object _N_RECORD_COUNT = "record_count"
cdef object _N_ATTRIBUTES = "attributes"
cdef object _N_COMPRESSION = "compression"
from kafkawire import _format
cdef tuple _CODEC_NAMES = _format.CODEC_NAMES   # a C global: read per batch


cdef class BatchHeader:
    """Storage of a v2 batch's header: C fields, made Python ints only when read.

    The front end subclasses it (with its methods in a mixin); see
    ``kafkawire._pure.scan.BatchHeader`` for the field list.
    """
    cdef public object _buf
    cdef public object _base_position
    cdef public object _max_size
    cdef public object _control
    cdef public object _hooks
    cdef public Py_ssize_t _pos
    cdef public int64_t size
    cdef public int64_t base_offset
    cdef public int64_t last_offset
    cdef public int attributes
    cdef public uint32_t crc
    cdef public int32_t partition_leader_epoch
    cdef public int64_t first_timestamp
    cdef public int64_t max_timestamp
    cdef public int64_t producer_id
    cdef public int producer_epoch
    cdef public int32_t base_sequence
    cdef public int32_t record_count

    def __getattribute__(self, name):
        # The header fields are what batch loops read most: answer them before the
        # generic lookup (type MRO cache, then a descriptor call); anything else,
        # including the front end's properties, goes the generic way.  The "attrs"
        # interpreter trick (cpython_tricks.pxd): names compared by identity.
        if not _FAST_ATTRS:
            return PyObject_GenericGetAttr(self, name)
        if name is _N_BASE_OFFSET:
            return self.base_offset
        if name is _N_LAST_OFFSET:
            return self.last_offset
        if name is _N_MAX_TIMESTAMP:
            return self.max_timestamp
        if name is _N_COMPRESSION:
            if self.attributes & COMPRESSION_MASK <= CODEC_ZSTD:
                return _CODEC_NAMES[self.attributes & COMPRESSION_MASK]
        elif name is _N_FIRST_TIMESTAMP:
            return self.first_timestamp
        elif name is _N_PRODUCER_ID:
            return self.producer_id
        elif name is _N_RECORD_COUNT:
            return self.record_count
        elif name is _N_ATTRIBUTES:
            return self.attributes
        return PyObject_GenericGetAttr(self, name)

    def __iter__(self):
        """The batch's records, one ``Record`` per step (decompressed first if needed).

        Uncompressed batches go straight from these C fields to the records
        kernel's iterator.  What the kernel does not do itself comes from the
        ``hooks`` the front end passed to ``scan_batch_objects``: ``payload(batch)``
        decompresses a compressed batch (-> buffer, start, end, compressed) and
        ``relocate(exc, batch, compressed)`` re-anchors a records error.
        """
        cdef object buf
        cdef Py_ssize_t start, end
        cdef bint compressed = False
        if self.attributes & COMPRESSION_MASK == 0:
            buf = self._buf
            start = self._pos + V2_RECORDS
            end = self._pos + self.size
        else:
            buf, start, end, compressed = (<tuple>self._hooks)[0](self)
        return iter_v2_batch(buf, start, end, self.record_count, self.base_offset,
                        self.first_timestamp, self.max_timestamp,
                        1 if self.attributes & TIMESTAMP_TYPE_MASK else 0,
                        self, compressed, None if self._hooks is None else self._hooks[1])

    def validate(self):
        """The front end's ``validate()``, answered here, in one pass over the batch (the
        records kernel's ``v2_batch_ok``), when an uncompressed, non-control batch passes
        every check; anything else goes to the front end's checks (``_validate_checked``),
        which raise the exact error."""
        if (self.attributes & (COMPRESSION_MASK | CONTROL_MASK)) == 0 and v2_batch_ok(
                self._buf, self._pos, self.size, self.crc, self.record_count,
                self.base_offset, self.last_offset):
            return None
        return self._validate_checked()


cdef bint _layout_known():
    """True when BatchHeader's five object fields follow the object header in order."""
    cdef BatchHeader h = BatchHeader.__new__(BatchHeader)
    marks = (object(), object(), object(), object(), object())
    h._buf, h._base_position, h._max_size, h._control, h._hooks = marks
    cdef PyObject **f = <PyObject **>((<char *><PyObject *>h) + sizeof(PyObject))
    return all(f[j] == <PyObject *>marks[j] for j in range(5))


# with a known layout, objects are made with _PyObject_GC_New (no zero-fill, not
# tracked) and every field is written once; otherwise through the type's tp_new
cdef bint _RAW_NEW = tricks_enabled("gc_new") and _layout_known()
cdef Py_ssize_t _HEADER_SIZE = BatchHeader.__basicsize__


def scan_batch_objects(buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t max_count,
                       bint check_crc, type v2_type, base_position, max_size, hooks=None):
    """``scan_batches``, building objects instead of an array; see ``kafkawire._pure.scan``."""
    cdef Py_buffer view
    cdef Rows rows
    cdef Py_ssize_t pos, i
    cdef int status
    cdef const unsigned char *p
    cdef const int64_t *row
    cdef Py_ssize_t n_legacy = 0
    cdef list out
    cdef BatchHeader h
    cdef PyObject *obj
    cdef PyObject **f
    if not issubclass(v2_type, BatchHeader):
        raise TypeError("scan_batch_objects: v2_type must subclass this backend's BatchHeader")
    # Only a subclass that adds no storage (no __dict__, no weakref slot, no extra
    # slots) has BatchHeader's layout: others are made the ordinary way.
    cdef bint plain = (v2_type.__basicsize__ == _HEADER_SIZE and v2_type.__dictoffset__ == 0
                       and v2_type.__weakrefoffset__ == 0)
    cdef bint raw_new = _RAW_NEW and plain
    # the objects hold only ints and the caller's values; when those cannot
    # reference the objects back (no cycles), the cyclic GC need not track them
    cdef bint untrack = (plain and type(buf) in _ACYCLIC and type(base_position) in _ACYCLIC
                         and type(max_size) in _ACYCLIC and _acyclic_hooks(hooks))
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
        status = _scan_rows(buf, p, &pos, end, max_count, check_crc, &rows)
        if status < 0:
            raise MemoryError("scan_batch_objects: out of memory")
        out = PyList_New(rows.n)
        for i in range(rows.n):
            row = rows.data + i * NF
            if row[4] == 2:
                if raw_new:
                    obj = kw_gc_new(<PyTypeObject *>v2_type)
                    if obj == NULL:
                        raise MemoryError()
                    f = <PyObject **>((<char *>obj) + sizeof(PyObject))
                    Py_INCREF(buf)
                    f[0] = <PyObject *>buf
                    Py_INCREF(base_position)
                    f[1] = <PyObject *>base_position
                    Py_INCREF(max_size)
                    f[2] = <PyObject *>max_size
                    Py_INCREF(None)
                    f[3] = <PyObject *>None
                    Py_INCREF(hooks)
                    f[4] = <PyObject *>hooks
                    h = <BatchHeader>obj
                    Py_DECREF(<object>obj)  # `h` holds the reference now
                    if not untrack:
                        PyObject_GC_Track(obj)
                else:
                    # the type's own tp_new (BatchHeader's, inherited): no Python-level call
                    obj = (<TypeSlots *>v2_type).tp_new(<TypeSlots *>v2_type,
                                                        <PyObject *>_NO_ARGS, NULL)
                    if obj == NULL:
                        raise MemoryError()
                    h = <BatchHeader>obj
                    Py_DECREF(<object>obj)  # `h` holds the reference now
                    if untrack:
                        PyObject_GC_UnTrack(<PyObject *>h)
                    h._buf = buf
                    h._base_position = base_position
                    h._max_size = max_size
                    h._hooks = hooks
                h._pos = row[0]
                h.size = row[1]
                h.base_offset = row[2]
                h.last_offset = row[3]
                h.attributes = <int>row[5]
                h.crc = <uint32_t>row[6]
                h.partition_leader_epoch = <int32_t>row[7]
                h.first_timestamp = row[8]
                h.max_timestamp = row[9]
                h.producer_id = row[10]
                h.producer_epoch = <int>row[11]
                h.base_sequence = <int32_t>row[12]
                h.record_count = <int32_t>row[13]
                o = h
            else:
                o = tuple([row[j] for j in range(NF)])
                n_legacy += 1
            Py_INCREF(o)
            PyList_SET_ITEM(out, i, o)
    finally:
        PyBuffer_Release(&view)
        free(rows.data)
    return out, pos, status, n_legacy
