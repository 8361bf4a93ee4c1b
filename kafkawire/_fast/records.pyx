# cython: language_level=3
# distutils: sources = kafkawire/_fast/crc_impl.c
"""Record decode/encode kernels (compiled twin of ``kafkawire/_pure/records.py``).

The contracts of ``Record``, ``decode_records_v2``, ``decode_legacy_messages``
and ``encode_records_v2`` are in ``kafkawire/_pure/records.py``'s docstring.
One pass over the buffer with a C pointer.  A record without headers is parsed
by one small C function (``kw_rec_plain``); the checked decoder
(``_next_checked``) handles headers and raises the exact error for damage.
Iterating reuses a record the caller dropped (see ``RecordIterator.spare0``),
rewriting in place the old field values nothing else holds.
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF, PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, INT64_MIN, INT64_MAX
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memcmp
from kafkawire._fast.wire cimport (kw_be_i32, kw_be_u32, kw_be_i64,
                                  Cursor, Bytes, bytes_open, bytes_close)
from kafkawire._fast.framing cimport (
    RecordFields, record_read, header_next, KWR_OK, KWR_VARINT, KWR_LENGTH, KWR_PAST_END, KWR_KEY_LENGTH,
    KWR_KEY_PAST, KWR_VALUE_LENGTH, KWR_VALUE_PAST, KWR_HEADER_COUNT, KWR_HKEY_LENGTH,
    KWR_HKEY_UTF8, KWR_HVALUE_LENGTH, KWR_HVALUE_PAST, KWR_FIELDS, KW_WALK_UTF8)
from kafkawire._fast cimport cpython_tricks
from kafkawire._fast.cpython_tricks cimport tricks_enabled, kw_store_int, kw_store_bytes

import zlib
from kafkawire.errors import CorruptRecordError

__all__ = ["Record", "decode_records_v2", "decode_records_v2_as", "iter_records_v2",
           "validate_records_v2", "check_batch_v2", "decode_legacy_messages", "encode_records_v2"]

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

#: Reuse of dropped records (see ``_claim``): one of the interpreter tricks.
cdef bint REUSE = tricks_enabled("reuse")
cpython_tricks.kw_inplace = tricks_enabled("inplace")


cdef str CREATE_TIME = "CreateTime"
cdef str LOG_APPEND_TIME = "LogAppendTime"
cdef str NO_TIMESTAMP_TYPE = "NoTimestampType"


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
    object PyDescr_NewMember(type t, PyMemberDef *m)
    void PyType_Modified(type t)
    ctypedef struct PyTypeObject:
        PyObject *tp_dict


@cython.freelist(1024)
cdef class Record:
    """One record of a batch (v2) or message set (v0/v1).

    The fields are exposed as member (slot) descriptors, installed at import
    (``_install_members``), so CPython reads them as fast as ``__slots__``.
    """
    # fields: declared in records.pxd

    def __init__(self, offset=0, timestamp=-1, key=None, value=None, headers=None,
                 timestamp_type="CreateTime"):
        # Through the slot descriptors, not direct stores: a field the user deleted
        # (`del rec.key`) is NULL, which only the descriptors handle.
        _set = object.__setattr__
        _set(self, "offset", offset)
        _set(self, "timestamp", timestamp)
        _set(self, "timestamp_type", timestamp_type)
        _set(self, "key", key)
        _set(self, "value", value)
        _set(self, "headers", [] if headers is None else list(headers))

    def __eq__(self, other):
        if not hasattr(other, "timestamp_type") or not hasattr(other, "headers"):
            return NotImplemented
        me = <object>self
        return (me.offset == other.offset and me.timestamp == other.timestamp
                and me.timestamp_type == other.timestamp_type and me.key == other.key
                and me.value == other.value and list(me.headers) == list(other.headers))

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        me = <object>self
        return (f"Record(offset={me.offset!r}, timestamp={me.timestamp!r}, key={me.key!r}, "
                f"value={me.value!r}, headers={me.headers!r}, "
                f"timestamp_type={me.timestamp_type!r})")

    def __reduce__(self):
        me = <object>self
        return (Record, (me.offset, me.timestamp, me.key, me.value, me.headers,
                         me.timestamp_type))


cdef PyMemberDef _members[6]
# byte offsets of Record's fields, in _MEMBER_NAMES order (set by _install_members)
cdef Py_ssize_t _F_OFFSET, _F_TIMESTAMP, _F_TSTYPE, _F_KEY, _F_VALUE, _F_HEADERS
_MEMBER_NAMES = (b"offset", b"timestamp", b"timestamp_type", b"key", b"value", b"headers")


cdef extern from *:
    """
    /* Byte offsets of the fields of Record's object struct (the name Cython gives
       it: a rename is a compile error, never a wrong offset). */
    #define KW_RECORD_FIELD(f) ((Py_ssize_t)offsetof(struct __pyx_obj_9kafkawire_5_fast_7records_Record, f))
    #define KW_OFF_OFFSET KW_RECORD_FIELD(offset)
    #define KW_OFF_TIMESTAMP KW_RECORD_FIELD(timestamp)
    #define KW_OFF_TIMESTAMP_TYPE KW_RECORD_FIELD(timestamp_type)
    #define KW_OFF_KEY KW_RECORD_FIELD(key)
    #define KW_OFF_VALUE KW_RECORD_FIELD(value)
    #define KW_OFF_HEADERS KW_RECORD_FIELD(headers)
    """
    const Py_ssize_t KW_OFF_OFFSET
    const Py_ssize_t KW_OFF_TIMESTAMP
    const Py_ssize_t KW_OFF_TIMESTAMP_TYPE
    const Py_ssize_t KW_OFF_KEY
    const Py_ssize_t KW_OFF_VALUE
    const Py_ssize_t KW_OFF_HEADERS


cdef _install_members():
    """Expose Record's fields as T_OBJECT_EX member descriptors (fast attribute access)."""
    names = _MEMBER_NAMES
    cdef Py_ssize_t offsets[6]
    offsets[0] = KW_OFF_OFFSET
    offsets[1] = KW_OFF_TIMESTAMP
    offsets[2] = KW_OFF_TIMESTAMP_TYPE
    offsets[3] = KW_OFF_KEY
    offsets[4] = KW_OFF_VALUE
    offsets[5] = KW_OFF_HEADERS
    cdef dict tdict = <dict>(<PyTypeObject *>Record).tp_dict
    for i in range(6):
        _members[i].name = names[i]
        _members[i].type = T_OBJECT_EX
        _members[i].offset = offsets[i]
        _members[i].flags = 0
        _members[i].doc = NULL
        tdict[names[i].decode()] = PyDescr_NewMember(Record, &_members[i])
    PyType_Modified(Record)
    global _F_OFFSET, _F_TIMESTAMP, _F_TSTYPE, _F_KEY, _F_VALUE, _F_HEADERS
    _F_OFFSET, _F_TIMESTAMP, _F_TSTYPE = _members[0].offset, _members[1].offset, _members[2].offset
    _F_KEY, _F_VALUE, _F_HEADERS = _members[3].offset, _members[4].offset, _members[5].offset


_install_members()


cdef inline object _corrupt(str msg, Py_ssize_t pos, object offset, str reason):
    return CorruptRecordError(msg, position=pos, offset=offset, reason=reason)


cdef object _varint_error(int err, Py_ssize_t pos, object offset):
    if err == 2:
        return _corrupt("overlong varint", pos, offset, "varint")
    return _corrupt("varint runs past the end of the record", pos, offset, "truncated")


cdef object _record_error(const RecordFields *r, const unsigned char *base, int64_t base_offset):
    """The decoders' error for a record the walker refused (``r.err``)."""
    cdef Py_ssize_t at = r.at - base
    cdef object off = base_offset + r.off_delta if r.has_offset else None
    cdef int e = r.err
    if e == KWR_VARINT:
        return _varint_error(r.varint_err, at, off)
    if e == KWR_LENGTH:
        return _corrupt(f"record length {r.length} is invalid", at, None, "length")
    if e == KWR_PAST_END:
        return _corrupt(f"record length {r.length} runs past the end of the batch", at, None,
                        "truncated")
    if e == KWR_KEY_PAST:
        return _corrupt("key runs past the end of the record", at, off, "truncated")
    if e == KWR_KEY_LENGTH:
        return _corrupt(f"invalid key length {r.klen}", at, off, "length")
    if e == KWR_VALUE_PAST:
        return _corrupt("value runs past the end of the record", at, off, "truncated")
    if e == KWR_VALUE_LENGTH:
        return _corrupt(f"invalid value length {r.vlen}", at, off, "length")
    if e == KWR_HEADER_COUNT:
        return _corrupt(f"invalid header count {r.nh}", at, off, "length")
    if e == KWR_HKEY_LENGTH:
        return _corrupt(f"invalid header key length {r.bad}", at, off, "length")
    if e == KWR_HKEY_UTF8:
        return _corrupt("header key is not valid UTF-8", at, off, "utf8")
    if e == KWR_HVALUE_PAST:
        return _corrupt("header value runs past the end of the record", at, off, "truncated")
    if e == KWR_HVALUE_LENGTH:
        return _corrupt(f"invalid header value length {r.bad}", at, off, "length")
    return _corrupt(f"record declares {r.length} bytes but its fields use {r.bad}", at, off,
                    "length")


cdef inline object _count_error(Py_ssize_t count, Py_ssize_t start, Py_ssize_t end,
                                int64_t base_offset):
    """``count`` records cannot fit ``end - start`` bytes (a record takes at least 7), or
    ``count`` is negative; None when it is possible."""
    if count < 0 or (count > 0 and count > (end - start) // 7):
        return _corrupt(f"record count {count} impossible for {end - start} bytes "
                        f"of records", start, base_offset, "count")
    return None


def validate_records_v2(buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                        int64_t base_offset, int64_t last_offset, on_error=None,
                        bint consecutive=False):
    """Check a v2 records region without decoding it; see ``kafkawire._pure.records``."""
    cdef Bytes b
    cdef Cursor c
    cdef RecordFields r
    cdef Py_ssize_t i
    cdef int rc = KWR_OK
    cdef bint outside = False
    cdef int64_t first_outside = 0, off
    cdef object exc = None
    bytes_open(&b, buf)
    try:
        if end < 0 or end > b.n:
            end = b.n
        if start < 0:
            start = 0
        if start > end:
            start = end
        exc = _count_error(count, start, end, base_offset)
        if exc is None:
            c.base = b.p
            c.p = b.p + start
            c.end = b.p + end
            with nogil:
                for i in range(count):
                    rc = record_read(&c, &r, KW_WALK_UTF8, 0, 0)
                    if rc != KWR_OK:
                        break
                    off = <int64_t>(<uint64_t>base_offset + <uint64_t><int64_t>r.off_delta)
                    if not outside and (off < base_offset or off > last_offset
                                        or (consecutive and r.off_delta != i)):
                        outside = True
                        first_outside = off
            if rc != KWR_OK:
                exc = _record_error(&r, b.p, base_offset)
            elif c.p != c.end:
                exc = _corrupt(f"{c.end - c.p} bytes left after the batch's {count} records",
                               c.p - c.base, None, "count")
    finally:
        bytes_close(&b)
    if exc is not None:
        if on_error is not None:
            exc = on_error(exc)
        raise exc
    return first_outside if outside else None


cdef int64_t INT64_MAX_ = INT64_MAX
cdef int64_t INT64_MIN_ = INT64_MIN
cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
cdef Py_ssize_t PY_SSIZE_T_MAX_ = PY_SSIZE_T_MAX


cdef extern from "validate_impl.h" nogil:
    int kw_v2_batch_ok(const unsigned char *b, size_t size, uint32_t crc, int64_t count,
                       int64_t base_offset, int64_t last_offset)


cdef bint v2_batch_ok(object buf, Py_ssize_t position, int64_t size, uint32_t crc,
                      int64_t count, int64_t base_offset, int64_t last_offset) except -1:
    """``check_batch_v2`` for the compiled batch header (cimported by scan.pyx): C arguments."""
    cdef Bytes b
    cdef bint ok = False
    bytes_open(&b, buf)
    if position >= 0 and size >= 61 and size <= b.n - position:
        if size > 65536:
            with nogil:
                ok = kw_v2_batch_ok(b.p + position, <size_t>size, crc, count, base_offset,
                                    last_offset)
        else:
            ok = kw_v2_batch_ok(b.p + position, <size_t>size, crc, count, base_offset,
                                last_offset)
    bytes_close(&b)
    return ok


def check_batch_v2(buf, position, size, crc, count, base_offset, last_offset):
    """Whether an uncompressed v2 batch passes every check; see ``kafkawire._pure.records``."""
    # (any int is an answer, as in the pure twin: out of the C ranges is simply False)
    if not (0 <= position <= PY_SSIZE_T_MAX_ and 61 <= size <= PY_SSIZE_T_MAX_
            and 0 <= crc <= 0xFFFFFFFF and 0 <= count <= INT64_MAX_
            and INT64_MIN_ <= base_offset <= last_offset <= INT64_MAX_):
        with memoryview(buf):   # (a non-buffer raises TypeError, as in the twin)
            return False
    return v2_batch_ok(buf, position, size, <uint32_t>crc, count, base_offset, last_offset)


cdef inline object _mk_bytes(const unsigned char *p, Py_ssize_t n):
    return PyBytes_FromStringAndSize(<const char *>p, n)


cdef enum:
    HCACHE = 8


cdef extern from "Python.h":
    Py_ssize_t Py_REFCNT(PyObject *o)
    bint PyList_CheckExact(PyObject *o)
    Py_ssize_t PyList_GET_SIZE_RAW "PyList_GET_SIZE" (PyObject *o)
    void Py_XDECREF_RAW "Py_XDECREF" (PyObject *o)


cdef extern from "Python.h":
    bint PyTuple_CheckExact(PyObject *o)
    Py_ssize_t PyTuple_GET_SIZE_RAW "PyTuple_GET_SIZE" (PyObject *o)
    PyObject *PyList_GET_ITEM_RAW "PyList_GET_ITEM" (PyObject *o, Py_ssize_t i)
    PyObject **PySequence_Fast_ITEMS_RAW "PySequence_Fast_ITEMS" (PyObject *o)


cdef inline void _tuple_put(PyObject *t, Py_ssize_t i, object value) noexcept:
    """Replace item ``i`` of a tuple that only the caller holds (as zip() refills its result)."""
    cdef PyObject **items = PySequence_Fast_ITEMS_RAW(t)
    cdef PyObject *old = items[i]
    Py_INCREF(value)
    items[i] = <PyObject *>value
    Py_XDECREF_RAW(old)


cdef inline void _put(PyObject *rec, Py_ssize_t off, object value) noexcept:
    """Store ``value`` in a field of a reused Record; the old value (or NULL) is released."""
    cdef PyObject **slot = <PyObject **>((<char *>rec) + off)
    cdef PyObject *old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject *>value
    Py_XDECREF_RAW(old)


# The iterator's hot steps, as inline functions (a method declared in records.pxd
# cannot be inline).
cdef inline object _claim(RecordIterator self):
    """The spare record the next record may be written into, held strongly, or None.

    Only a spare nothing but this iterator holds qualifies (then nothing can
    observe it).  The caller keeps the returned reference while it releases the
    old field values: their finalizers may run Python code that re-enters this
    iterator, which then sees the spare as in use and cannot reuse or free it.
    """
    cdef PyObject *o
    if not REUSE:
        return None
    o = <PyObject *>(self.spare1 if self.flip else self.spare0)
    if Py_REFCNT(o) == 1:   # (None never has refcount 1)
        return <object>o
    return None


cdef inline Record _emit(RecordIterator self, object key, object value, int64_t offset,
                         object headers):
    """The record for these fields (timestamp: ``self.last_ts``); ``headers`` None means
    an empty list.  Reuses a spare record nothing else holds (see ``spare0``)."""
    cdef Record r
    cdef PyObject *o
    cdef PyObject *h
    self.flip = not self.flip
    o = <PyObject *>(self.spare0 if self.flip else self.spare1)
    if REUSE and Py_REFCNT(o) == 1:   # only this iterator holds it (None never has refcount 1)
        r = <Record>o   # held strongly while _put releases the old values
        _put(o, _F_OFFSET, offset)
        _put(o, _F_TIMESTAMP, self.last_ts)
        _put(o, _F_TSTYPE, self.ts_name)
        _put(o, _F_KEY, key)
        _put(o, _F_VALUE, value)
        if headers is not None:
            _put(o, _F_HEADERS, headers)
        else:
            h = (<PyObject **>((<char *>o) + _F_HEADERS))[0]
            if not (h != NULL and PyList_CheckExact(h) and PyList_GET_SIZE_RAW(h) == 0
                    and Py_REFCNT(h) == 1):
                _put(o, _F_HEADERS, PyList_New(0))
        return r
    r = Record.__new__(Record)
    r.key = key
    r.value = value
    r.headers = PyList_New(0) if headers is None else headers
    r.offset = offset
    r.timestamp = self.last_ts
    r.timestamp_type = self.ts_name
    if self.flip:
        self.spare0 = r
    else:
        self.spare1 = r
    return r


cdef inline Record _next(RecordIterator self):
    """Decode the record at self.p (the caller checked remaining > 0)."""
    cdef RecordFields rec
    cdef Cursor c
    cdef int64_t ts, offset
    cdef PyObject *o
    cdef PyObject *h
    cdef char *f
    cdef object keep
    c.base = self.base
    c.p = self.p
    c.end = self.pend
    if record_read(&c, &rec, KW_WALK_UTF8, 0, 0) != KWR_OK or rec.nh != 0:
        return self._next_checked(&rec)
    keep = _claim(self)
    if keep is not None:
        # the spare _emit would reuse: fill it here, rewriting old values in place
        o = <PyObject *>keep
        self.flip = not self.flip
        self.p = rec.end
        f = <char *>o
        kw_store_bytes(<PyObject **>(f + _F_KEY), rec.key, rec.klen)
        kw_store_bytes(<PyObject **>(f + _F_VALUE), rec.value, rec.vlen)
        kw_store_int(<PyObject **>(f + _F_OFFSET), self.base_offset + rec.off_delta)
        if not self.lat:
            ts = self.base_timestamp + rec.ts_delta
            if self.last_ts is None or ts != self.last_ts_value:
                # the record's own int (rewritten in place when possible) becomes the
                # shared one for the following records with this timestamp
                self.last_ts = None
                kw_store_int(<PyObject **>(f + _F_TIMESTAMP), ts)
                self.last_ts = <object>(<PyObject **>(f + _F_TIMESTAMP))[0]
                self.last_ts_value = ts
            else:
                _put(o, _F_TIMESTAMP, self.last_ts)
        else:
            _put(o, _F_TIMESTAMP, self.last_ts)
        _put(o, _F_TSTYPE, self.ts_name)
        h = (<PyObject **>(f + _F_HEADERS))[0]
        if not (h != NULL and PyList_CheckExact(h) and PyList_GET_SIZE_RAW(h) == 0
                and Py_REFCNT(h) == 1):
            _put(o, _F_HEADERS, PyList_New(0))
        return <Record>keep
    key = _mk_bytes(rec.key, rec.klen) if rec.klen >= 0 else None
    value = _mk_bytes(rec.value, rec.vlen) if rec.vlen >= 0 else None
    offset = self.base_offset + rec.off_delta
    if not self.lat:
        ts = self.base_timestamp + rec.ts_delta
        if self.last_ts is None or ts != self.last_ts_value:
            self.last_ts = ts
            self.last_ts_value = ts
    self.p = rec.end
    return _emit(self, key, value, offset, None)


@cython.final
cdef class RecordIterator:
    """Lazy decoder of a v2 records region: yields one ``Record`` per ``next()``.

    Returned by ``iter_records_v2``; holds the buffer until exhausted.  Decoding
    one record at a time keeps few objects alive, which spares the cyclic GC.
    """
    # fields: declared in records.pxd.  spare0/spare1 are the last two records made.
    # One that nothing else references any more is unobservable, so the next record
    # reuses it in place (as zip() reuses its result tuple): no allocation, and its
    # empty headers list is kept when nothing else holds that either.  Two, because
    # a for loop still holds the previous record while asking for the next.

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False

    cdef int _open(self, object buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                   int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
                   int timestamp_type, object on_error) except -1:
        PyObject_GetBuffer(buf, &self.view, PyBUF_SIMPLE)
        self.held = True
        self.owner = buf
        self.on_error = on_error
        if end < 0 or end > self.view.len:
            end = self.view.len
        if start < 0:
            start = 0
        if start > end:
            start = end
        self.base = <const unsigned char *>self.view.buf
        self.p = self.base + start
        self.pend = self.base + end
        self.remaining = count
        self.base_offset = base_offset
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.lat = timestamp_type == 1
        self.ts_name = LOG_APPEND_TIME if self.lat else CREATE_TIME
        self.last_ts = max_timestamp if self.lat else None
        if count < 0 or (count > 0 and count > (end - start) // 7):
            self._fail(_corrupt(f"record count {count} impossible for {end - start} bytes "
                                f"of records", start, base_offset, "count"))
        return 0

    cdef int _fail(self, object exc) except -1:
        self.remaining = 0
        self.p = self.pend
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False
        if self.err_relocate is not None:
            exc = self.err_relocate(exc, self.err_batch, self.err_compressed)
        elif self.on_error is not None:
            exc = self.on_error(exc)
        raise exc

    cdef int _finish(self) except -1:
        if self.held:
            if self.p != self.pend:
                self._fail(_corrupt(f"{self.pend - self.p} bytes left after the batch's records",
                                    self.p - self.base, None, "count"))
            PyBuffer_Release(&self.view)
            self.held = False
        return 0

    cdef Record _next_checked(self, RecordFields *rec):
        """Decode the record the walker read at self.p (``rec``): raise its error, or
        make it with its headers."""
        cdef const unsigned char *p
        cdef const unsigned char *rend
        cdef const unsigned char *hk
        cdef const unsigned char *hv
        cdef int32_t off_delta, klen, vlen, nh, hklen, hvlen
        cdef int64_t ts_delta, ts
        cdef Py_ssize_t h
        cdef list headers
        cdef object key, value, hkey, hval, tup
        cdef const unsigned char *kptr = NULL
        cdef const unsigned char *vptr = NULL
        cdef PyObject *o
        cdef PyObject *oh
        cdef PyObject *t
        cdef char *f
        cdef object keep = None
        if rec.err != KWR_OK:
            self._fail(_record_error(rec, self.base, self.base_offset))
        # the iterator moves past this record now: releasing old header values below
        # may run Python code that re-enters it, and must find the next record
        self.p = rend = rec.end
        ts_delta = rec.ts_delta
        off_delta = rec.off_delta
        klen = rec.klen
        vlen = rec.vlen
        nh = rec.nh
        if klen >= 0:
            kptr = rec.key
        if vlen >= 0:
            vptr = rec.value
        headers = None
        oh = NULL
        if nh != 0:
            # the headers list of the spare record that will be reused, when nothing
            # else holds it and it has as many entries: refilled in place
            keep = _claim(self)   # held while old header pairs are released
            if keep is not None:
                oh = (<PyObject **>((<char *><PyObject *>keep) + _F_HEADERS))[0]
                if not (oh != NULL and PyList_CheckExact(oh) and Py_REFCNT(oh) == 1
                        and PyList_GET_SIZE_RAW(oh) == nh):
                    oh = NULL
            if oh != NULL:
                headers = <list>oh
            else:
                headers = PyList_New(nh)
            if self.hcache is None:
                self.hcache = [None] * HCACHE
                self.hvcache = [None] * HCACHE
            p = rec.headers
            for h in range(nh):
                header_next(&p, rend, &hk, &hklen, &hv, &hvlen)
                hkey = None
                if h < HCACHE:
                    hkey = self.hcache[h]
                    if not (hkey is not None and PyUnicode_GET_LENGTH(hkey) == hklen
                            and memcmp(PyUnicode_DATA(hkey), hk, hklen) == 0):
                        hkey = None
                if hkey is None:
                    # (the walker checked it is UTF-8)
                    hkey = PyUnicode_DecodeUTF8(<const char *>hk, hklen, NULL)
                    if h < HCACHE and PyUnicode_IS_COMPACT_ASCII(hkey):
                        self.hcache[h] = hkey
                if hvlen >= 0:
                    hval = None
                    if h < HCACHE and hvlen <= 64:
                        # header values such as content types repeat record after record
                        hval = self.hvcache[h]
                        if not (hval is not None and PyBytes_GET_SIZE(hval) == hvlen and
                                memcmp(PyBytes_AS_STRING(hval), hv, hvlen) == 0):
                            hval = _mk_bytes(hv, hvlen)
                            self.hvcache[h] = hval
                    else:
                        hval = _mk_bytes(hv, hvlen)
                else:
                    hval = None
                if oh != NULL:
                    t = PyList_GET_ITEM_RAW(oh, h)
                    if PyTuple_CheckExact(t) and Py_REFCNT(t) == 1 and PyTuple_GET_SIZE_RAW(t) == 2:
                        _tuple_put(t, 0, hkey)      # a pair only this list holds
                        _tuple_put(t, 1, hval)
                        continue
                    tup = (hkey, hval)
                    Py_INCREF(tup)
                    PyList_SET_ITEM(headers, h, tup)
                    Py_XDECREF_RAW(t)
                    continue
                tup = (hkey, hval)
                Py_INCREF(tup)
                PyList_SET_ITEM(headers, h, tup)
        if not self.lat:
            ts = self.base_timestamp + ts_delta
            if self.last_ts is None or ts != self.last_ts_value:
                self.last_ts = ts
                self.last_ts_value = ts
        if keep is None:
            keep = _claim(self)
        elif Py_REFCNT(<PyObject *>keep) != 2 or keep is not (self.spare1 if self.flip else self.spare0):
            keep = None   # a callback re-entered this iterator and took the spare: leave it
        if keep is not None:   # the spare _emit would reuse: rewrite old values in place
            o = <PyObject *>keep
            self.flip = not self.flip
            f = <char *>o
            kw_store_bytes(<PyObject **>(f + _F_KEY), kptr, klen)
            kw_store_bytes(<PyObject **>(f + _F_VALUE), vptr, vlen)
            kw_store_int(<PyObject **>(f + _F_OFFSET), self.base_offset + off_delta)
            _put(o, _F_TIMESTAMP, self.last_ts)
            _put(o, _F_TSTYPE, self.ts_name)
            if headers is not None:
                _put(o, _F_HEADERS, headers)
            else:
                _put(o, _F_HEADERS, PyList_New(0))
            return <Record>keep
        key = None if kptr == NULL else _mk_bytes(kptr, klen)
        value = None if vptr == NULL else _mk_bytes(vptr, vlen)
        if headers is not None and <PyObject *>headers == oh:
            headers = list(headers)    # (only if a callback re-entered us) never share it
        return _emit(self, key, value, self.base_offset + off_delta, headers)

    def __iter__(self):
        return self

    def __next__(self):
        if self.remaining <= 0:
            self._finish()
            raise StopIteration
        self.remaining -= 1
        return _next(self)


def iter_records_v2(buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                    int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
                    int timestamp_type, on_error=None):
    """Lazy ``decode_records_v2``: an iterator of ``Record``s; see ``kafkawire._pure.records``."""
    cdef RecordIterator it = RecordIterator.__new__(RecordIterator)
    it._open(buf, start, end, count, base_offset, base_timestamp, max_timestamp,
             timestamp_type, on_error)
    return it


cdef object iter_v2_batch(object buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                           int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
                           int timestamp_type, object batch, bint compressed,
                           object relocate):
    """``iter_records_v2`` for the compiled batch header (cimported by scan.pyx):
    C arguments, and errors relocated by ``relocate(exc, batch, compressed)`` (the caller's
    function: no closure per batch)."""
    cdef RecordIterator it = RecordIterator.__new__(RecordIterator)
    it.err_relocate = relocate
    it.err_batch = batch
    it.err_compressed = compressed
    it._open(buf, start, end, count, base_offset, base_timestamp, max_timestamp,
             timestamp_type, None)
    return it



def decode_records_v2(buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                      int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
                      int timestamp_type, on_error=None):
    """Decode ``count`` v2 records from ``buf[start:end]``; see ``kafkawire._pure.records``."""
    cdef RecordIterator it = RecordIterator.__new__(RecordIterator)
    cdef Py_ssize_t i
    cdef list out
    cdef Record r
    it._open(buf, start, end, count, base_offset, base_timestamp, max_timestamp,
             timestamp_type, on_error)
    out = PyList_New(count)
    for i in range(count):
        it.remaining -= 1
        r = _next(it)
        Py_INCREF(r)
        PyList_SET_ITEM(out, i, r)
    it._finish()
    return out


cdef extern from "Python.h":
    object PyType_GenericAlloc(type t, Py_ssize_t n)
    object PyList_AsTuple(object lst)
    Py_ssize_t PyTuple_GET_SIZE(object t)
    void PyObject_GC_UnTrack(object o)


cdef bint _atomic(object x):
    return x is None or type(x) in (int, str, bytes, bool, float)


def decode_records_v2_as(type cls, tuple prefix, tuple suffix, buf, Py_ssize_t start,
                         Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                         int64_t base_timestamp, int64_t max_timestamp, int timestamp_type,
                         on_error=None):
    """``decode_records_v2``, each record built as the tuple subclass ``cls`` holding
    ``prefix + (offset, timestamp, timestamp_type, key, value, headers) + suffix``;
    ``headers`` is a tuple of ``(key, value)`` pairs."""
    cdef RecordIterator it
    cdef Py_ssize_t i, j, np_ = len(prefix), ns = len(suffix), n
    cdef list out
    cdef Record r
    cdef object t, item, hdrs
    cdef bint untrack = all(_atomic(x) for x in prefix + suffix)
    if not issubclass(cls, tuple) or cls.__itemsize__ != tuple.__itemsize__ or \
            cls.__basicsize__ != tuple.__basicsize__ or cls.__dictoffset__ != 0:
        raise TypeError("cls must be a tuple subclass without instance attributes (a namedtuple class)")
    n = np_ + 6 + ns
    it = RecordIterator.__new__(RecordIterator)
    it._open(buf, start, end, count, base_offset, base_timestamp, max_timestamp,
             timestamp_type, on_error)
    out = PyList_New(count)
    for i in range(count):
        it.remaining -= 1
        r = _next(it)
        t = PyType_GenericAlloc(cls, n)
        for j in range(np_):
            item = prefix[j]
            Py_INCREF(item)
            PyTuple_SET_ITEM(t, j, item)
        Py_INCREF(r.offset)
        PyTuple_SET_ITEM(t, np_, r.offset)
        Py_INCREF(r.timestamp)
        PyTuple_SET_ITEM(t, np_ + 1, r.timestamp)
        Py_INCREF(r.timestamp_type)
        PyTuple_SET_ITEM(t, np_ + 2, r.timestamp_type)
        Py_INCREF(r.key)
        PyTuple_SET_ITEM(t, np_ + 3, r.key)
        Py_INCREF(r.value)
        PyTuple_SET_ITEM(t, np_ + 4, r.value)
        hdrs = PyList_AsTuple(r.headers) if PyList_GET_SIZE(r.headers) else ()
        Py_INCREF(hdrs)
        PyTuple_SET_ITEM(t, np_ + 5, hdrs)
        for j in range(ns):
            item = suffix[j]
            Py_INCREF(item)
            PyTuple_SET_ITEM(t, np_ + 6 + j, item)
        if untrack and PyTuple_GET_SIZE(hdrs) == 0:
            # nothing in it can hold a reference cycle: keep it out of the collector's lists
            # (CPython would untrack it at its first collection anyway, after scanning it)
            PyObject_GC_UnTrack(t)
        Py_INCREF(t)
        PyList_SET_ITEM(out, i, t)
    it._finish()
    return out


def decode_legacy_messages(buf, Py_ssize_t start, Py_ssize_t end, int64_t wrapper_offset,
                           int wrapper_magic, int64_t wrapper_timestamp,
                           int wrapper_timestamp_type, bint check_crc):
    """Decode a v0/v1 message set; see ``kafkawire._pure.records``."""
    cdef Py_buffer view
    cdef const unsigned char *base
    cdef const unsigned char *m
    cdef const unsigned char *p
    cdef const unsigned char *mend
    cdef Py_ssize_t pos, last_pos = 0
    cdef int64_t offset, timestamp, last_raw = 0, shift
    cdef int32_t length, klen, vlen
    cdef int magic, attrs
    cdef bint have_last = False
    cdef bint lat_wrapper = wrapper_magic == 1 and wrapper_timestamp_type == 1
    cdef Record r
    cdef list out = []
    cdef object ts_name, key, value
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if end < 0 or end > view.len:
            end = view.len
        if start < 0:
            start = 0
        base = <const unsigned char *>view.buf
        pos = start
        while pos < end:
            m = base + pos
            if end - pos < 12:
                raise _corrupt("message set ends in a partial message header", pos, None,
                               "truncated")
            offset = kw_be_i64(m)
            length = kw_be_i32(m + 8)
            if length < 14:
                raise _corrupt(f"message size {length} smaller than minimum record overhead (14)",
                               pos, offset, "length")
            if length > end - pos - 12:
                raise _corrupt(f"message of {length} bytes runs past the end of its set", pos,
                               offset, "truncated")
            mend = m + 12 + length
            magic = <signed char>m[16]
            attrs = m[17]
            p = m + 18
            if magic == 1:
                if length < 22:
                    raise _corrupt(f"magic 1 message size {length} smaller than 22", pos, offset,
                                   "length")
                timestamp = kw_be_i64(p)
                p += 8
                ts_name = LOG_APPEND_TIME if attrs & 0x08 else CREATE_TIME
            elif magic == 0:
                timestamp = -1
                ts_name = NO_TIMESTAMP_TYPE
            else:
                raise _corrupt(f"invalid magic {magic} in a message set", pos + 16, offset,
                               "magic")
            if check_crc:
                if zlib.crc32(memoryview(buf).cast("B")[pos + 16:pos + 12 + length]) != kw_be_u32(m + 12):
                    raise _corrupt("message CRC-32 mismatch", pos, offset, "crc")
            klen = kw_be_i32(p)
            p += 4
            if klen >= 0:
                if klen > mend - p - 4:
                    raise _corrupt("key runs past the end of the message", p - 4 - base,
                                   offset, "truncated")
                key = _mk_bytes(p, klen)
                p += klen
            elif klen == -1:
                key = None
            else:
                raise _corrupt(f"invalid key length {klen}", p - 4 - base, offset, "length")
            if mend - p < 4:
                raise _corrupt("value length runs past the end of the message", p - base,
                               offset, "truncated")
            vlen = kw_be_i32(p)
            p += 4
            if vlen >= 0:
                if vlen > mend - p:
                    raise _corrupt("value runs past the end of the message", p - 4 - base,
                                   offset, "truncated")
                value = _mk_bytes(p, vlen)
                p += vlen
            elif vlen == -1:
                value = None
            else:
                raise _corrupt(f"invalid value length {vlen}", p - 4 - base, offset, "length")
            if p != mend:
                raise _corrupt(f"message declares {length} bytes but its fields use "
                               f"{length - (mend - p)}", pos, offset, "length")
            if lat_wrapper:
                timestamp = wrapper_timestamp
                ts_name = LOG_APPEND_TIME
            if attrs & 0x07:
                if wrapper_magic != -1:
                    raise _corrupt("inner messages must not be compressed", pos, offset,
                                   "compression")
                out.append((pos, offset, magic, attrs, timestamp, value))
            else:
                r = Record.__new__(Record)
                r.offset = offset
                r.timestamp = timestamp
                r.timestamp_type = ts_name
                r.key = key
                r.value = value
                r.headers = []
                out.append(r)
            last_raw = offset
            last_pos = pos
            have_last = True
            pos += 12 + length
    finally:
        PyBuffer_Release(&view)
    if wrapper_magic != -1 and not have_last:
        raise _corrupt("compressed message set holds no messages", start, wrapper_offset, "count")
    if wrapper_magic >= 1 and wrapper_offset != 0:
        if wrapper_offset < last_raw:
            raise _corrupt(f"wrapper offset {wrapper_offset} is less than the last inner message "
                           f"offset {last_raw} and it is not zero", last_pos, wrapper_offset,
                           "offset")
        shift = wrapper_offset - last_raw
        if shift:
            for i in range(len(out)):
                item = out[i]
                if type(item) is tuple:
                    out[i] = (item[0], item[1] + shift) + item[2:]
                else:
                    (<Record>item).offset = (<Record>item).offset + shift
    return out


# ---------------------------------------------------------------- encoding

cdef struct Out:
    unsigned char *data
    Py_ssize_t n
    Py_ssize_t cap


cdef int reserve(Out *o, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef unsigned char *d
    if o.n + extra <= o.cap:
        return 0
    cap = o.cap * 2 if o.cap else 4096
    while cap < o.n + extra:
        cap *= 2
    d = <unsigned char *>realloc(o.data, cap)
    if d == NULL:
        raise MemoryError("encode_records_v2: out of memory")
    o.data = d
    o.cap = cap
    return 0


cdef inline Py_ssize_t uvar_size(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline void put_uvar(Out *o, uint64_t v) noexcept nogil:
    while v >= 0x80:
        o.data[o.n] = <unsigned char>((v & 0x7F) | 0x80)
        o.n += 1
        v >>= 7
    o.data[o.n] = <unsigned char>v
    o.n += 1


cdef inline uint64_t zz32(object v) except? 0xFFFFFFFFFFFFFFFF:
    if not -0x80000000 <= v <= 0x7FFFFFFF:
        raise ValueError(f"value {v} out of 32-bit varint range")
    cdef int32_t x = v
    return <uint32_t>((<uint32_t>x << 1) ^ <uint32_t>(x >> 31))


cdef inline uint64_t zz64(object v) except? 0xFFFFFFFFFFFFFFFF:
    if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"value {v} out of 64-bit varlong range")
    cdef int64_t x = v
    return (<uint64_t>x << 1) ^ <uint64_t>(x >> 63)


cdef class _Field:
    """A bytes-like field (key, value, header key/value) borrowed for encoding."""
    cdef Py_buffer view
    cdef bint held
    cdef const unsigned char *ptr
    cdef Py_ssize_t n   # -1 for None

    cdef int set(self, object v, str what) except -1:
        if v is None:
            self.n = -1
            return 0
        if type(v) is bytes:
            self.ptr = <const unsigned char *>PyBytes_AS_STRING(v)
            self.n = PyBytes_GET_SIZE(v)
            return 0
        if isinstance(v, str):
            raise TypeError(f"{what} must be bytes-like or None, not str (encode it first)")
        try:
            PyObject_GetBuffer(v, &self.view, PyBUF_SIMPLE)
        except TypeError:
            raise TypeError(f"{what} must be bytes-like or None, not {type(v).__name__}") from None
        self.held = True
        self.ptr = <const unsigned char *>self.view.buf
        self.n = self.view.len
        return 0

    cdef void release(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False

    def __dealloc__(self):
        self.release()


cdef inline Py_ssize_t field_size(_Field f):
    if f.n < 0:
        return 1
    return uvar_size(<uint64_t>(<uint32_t>f.n << 1)) + f.n


cdef inline void put_field(Out *o, _Field f):
    if f.n < 0:
        o.data[o.n] = 1
        o.n += 1
        return
    put_uvar(o, <uint64_t>(<uint32_t>f.n << 1))
    memcpy(o.data + o.n, f.ptr, f.n)
    o.n += f.n


cdef int put_record_head(Out *o, Py_ssize_t body, uint64_t zts, uint64_t zoff) except -1:
    """Room for a record of ``body`` bytes, then its length, attributes and deltas."""
    if body > 0x7FFFFFFF:
        raise ValueError("record too large for a v2 batch")
    reserve(o, body + 5)
    put_uvar(o, <uint64_t>(<uint32_t>body << 1))
    o.data[o.n] = 0
    o.n += 1
    put_uvar(o, zts)
    put_uvar(o, zoff)
    return 0


def encode_records_v2(offset_deltas, timestamp_deltas, keys, values, headers):
    """Encode the records region of a v2 batch; see ``kafkawire._pure.records``."""
    cdef Py_ssize_t n = len(offset_deltas), i, body, nh, j
    cdef Out o
    cdef uint64_t zts, zoff
    cdef _Field k = _Field(), v = _Field(), hk = _Field(), hv = _Field()
    cdef list hfields
    if not (len(timestamp_deltas) == len(keys) == len(values) == len(headers) == n):
        raise ValueError("encode_records_v2: all five sequences must have the same length")
    o.data = NULL
    o.n = 0
    o.cap = 0
    try:
        for i in range(n):
            zts = zz64(timestamp_deltas[i])
            zoff = zz32(offset_deltas[i])
            k.set(keys[i], "key")
            v.set(values[i], "value")
            hs = headers[i]
            nh = 0 if not hs else len(hs)
            body = 1 + uvar_size(zts) + uvar_size(zoff) + field_size(k) + field_size(v)
            body += uvar_size(<uint64_t>(<uint32_t>nh << 1))
            hfields = None
            if nh:
                hfields = []
                for pair in hs:
                    hkey, hval = pair
                    if isinstance(hkey, str):
                        hkey = (<str>hkey).encode("utf-8")
                    elif not isinstance(hkey, (bytes, bytearray, memoryview)):
                        raise TypeError(f"header key must be str, not {type(hkey).__name__}")
                    if hval is not None and isinstance(hval, str):
                        raise TypeError("header value must be bytes-like or None, not str "
                                        "(encode it first)")
                    hfields.append((hkey, hval))
                    hk.set(hkey, "header key")
                    hv.set(hval, "header value")
                    body += field_size(hk) + field_size(hv)
                    hk.release()
                    hv.release()
            put_record_head(&o, body, zts, zoff)
            put_field(&o, k)
            put_field(&o, v)
            k.release()
            v.release()
            put_uvar(&o, <uint64_t>(<uint32_t>nh << 1))
            if nh:
                for hkey, hval in hfields:
                    hk.set(hkey, "header key")
                    hv.set(hval, "header value")
                    put_field(&o, hk)
                    put_field(&o, hv)
                    hk.release()
                    hv.release()
        return PyBytes_FromStringAndSize(<const char *>o.data, o.n) if o.n else b""
    finally:
        k.release()
        v.release()
        hk.release()
        hv.release()
        free(o.data)
