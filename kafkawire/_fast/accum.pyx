# cython: language_level=3
"""Producer accumulator kernels (compiled twin of ``kafkawire/_pure/accum.py``).

``RecordBuffer`` encodes each record into its batch's records region as it is
appended (no per-record Python lists; the sender only adds the batch header).
``Appender.send`` is the common case of ``Producer.send`` in one C call: the
record goes into its partition's open batch and a future comes back; anything
else (headers, callbacks, serializers, a new batch, a full buffer, an unknown
topic, a wrong type) goes to the producer's general path, unchanged.

Thread safety: the fast path runs under the GIL without calling Python code
and without allocating objects the cycle collector tracks between its reads
of the shared state and its writes, so it is atomic with respect to every
other thread; the counters it shares with the general path (``used``,
``pending_records``) change only through this object's methods, each one
atomic for the same reason.
"""
cimport cython
import os
import socket
import time
from cpython.exc cimport PyErr_CheckSignals
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport realloc, free
from libc.string cimport memcpy

__all__ = ["RecordBuffer", "Appender", "Sticky", "encode_columns_into", "frame_buffer",
           "recv_exact"]

cdef extern from *:
    """
    #include <time.h>
    static int64_t kw_accum_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    /* Kafka's Utils.murmur2 (seed 0x9747b28c), as an unsigned 32-bit value. */
    static uint32_t kw_murmur2(const unsigned char *data, Py_ssize_t length) {
        const uint32_t m = 0x5bd1e995u;
        uint32_t h = 0x9747b28cu ^ (uint32_t)length;
        Py_ssize_t whole = length & ~(Py_ssize_t)3, i;
        for (i = 0; i < whole; i += 4) {
            uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8)
                       | ((uint32_t)data[i + 2] << 16) | ((uint32_t)data[i + 3] << 24);
            k *= m; k ^= k >> 24; k *= m;
            h *= m; h ^= k;
        }
        switch (length & 3) {
            case 3: h ^= (uint32_t)data[whole + 2] << 16;  /* fall through */
            case 2: h ^= (uint32_t)data[whole + 1] << 8;   /* fall through */
            case 1: h ^= (uint32_t)data[whole]; h *= m;
        }
        h ^= h >> 13; h *= m; h ^= h >> 15;
        return h;
    }
    /* The fast path's atomicity comes from the GIL: without one, every record takes the
       general path (which locks). */
    #ifdef Py_GIL_DISABLED
    #define KW_ACCUM_HAS_GIL 0
    #else
    #define KW_ACCUM_HAS_GIL 1
    #endif
    """
    int KW_ACCUM_HAS_GIL
    bint __builtin_sub_overflow(int64_t a, int64_t b, int64_t *r) nogil
    int64_t kw_accum_now_ms() nogil
    uint32_t kw_murmur2(const unsigned char *data, Py_ssize_t length) nogil

cdef extern from "Python.h":
    object PyByteArray_FromStringAndSize(const char *s, Py_ssize_t n)
    int PyLong_CheckExact(object o)
    int PyBytes_CheckExact(object o)
    int PyUnicode_CheckExact(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1
    object PySequence_GetItem(object o, Py_ssize_t i)
    Py_ssize_t PyObject_Length(object o) except -1
    const char *PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL


cdef extern from *:
    """
    #include <errno.h>
    #include <poll.h>
    #include <sys/socket.h>
    #include <time.h>
    /* Fill p[0..n) from socket fd, waiting at most timeout_ms in all (poll between reads).
       Returns 0 when filled, 1 on timeout, 2 when the peer closed, 3 on EINTR (the caller
       checks for signals and calls again), or -errno; *got counts the bytes read so far. */
    static int kw_recv_exact(int fd, unsigned char *p, Py_ssize_t n, Py_ssize_t *got,
                             double timeout_ms) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (*got < n) {
            ssize_t r = recv(fd, p + *got, (size_t)(n - *got), MSG_DONTWAIT);
            if (r > 0) { *got += r; continue; }
            if (r == 0) return 2;
            if (errno == EINTR) return 3;
            if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double left = timeout_ms - ((double)(t1.tv_sec - t0.tv_sec) * 1e3
                                        + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
            if (left <= 0) return 1;
            struct pollfd pfd;
            pfd.fd = fd; pfd.events = POLLIN; pfd.revents = 0;
            int k = poll(&pfd, 1, left < 1.0 ? 1 : (int)left);
            if (k < 0) {
                if (errno == EINTR) return 3;
                return -errno;
            }
        }
        return 0;
    }
    """
    int kw_recv_exact(int fd, unsigned char *p, Py_ssize_t n, Py_ssize_t *got,
                      double timeout_ms) nogil


def recv_exact(sock, buf, double timeout):
    """Fill the writable buffer ``buf`` from the plain socket ``sock`` within ``timeout`` s.

    The whole read runs without the GIL (one acquisition per call, not one per
    ``recv``), so a thread reading Fetch answers does not queue for the
    interpreter behind the thread decoding the previous ones.  Raises
    ``socket.timeout`` when the time runs out, ``ConnectionResetError`` when
    the peer closes first, ``OSError`` on other socket errors.
    """
    cdef unsigned char[::1] v = buf
    cdef Py_ssize_t n = v.shape[0], got = 0
    cdef int fd = sock.fileno(), r
    cdef unsigned char* p = &v[0] if n else NULL
    cdef double left_ms
    if fd < 0:
        raise OSError(9, "the socket is closed")
    deadline = time.monotonic() + timeout
    while True:
        left_ms = (deadline - time.monotonic()) * 1000.0
        with nogil:
            r = kw_recv_exact(fd, p, n, &got, left_ms)
        if r == 0:
            return
        if r == 1:
            raise socket.timeout("timed out")
        if r == 2:
            raise ConnectionResetError("the broker closed the connection")
        if r == 3:
            PyErr_CheckSignals()
            continue
        raise OSError(-r, os.strerror(-r))


def frame_buffer(Py_ssize_t n):
    """A ``bytearray`` of ``n`` bytes for the caller to fill completely (a response frame).

    Its bytes are not zeroed first: a connection reads a whole frame into it
    (and drops it if the read fails), so clearing 1 MiB per Fetch answer would
    be work thrown away.
    """
    if n < 0:
        raise ValueError(f"a frame of {n} bytes")
    return PyByteArray_FromStringAndSize(NULL, n)


cdef inline int uvar_size(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline unsigned char *put_uvar(unsigned char *p, uint64_t v) noexcept nogil:
    while v >= 0x80:
        p[0] = <unsigned char>((v & 0x7F) | 0x80)
        p += 1
        v >>= 7
    p[0] = <unsigned char>v
    return p + 1


cdef inline uint64_t zz(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline unsigned char *put_field(unsigned char *p, const unsigned char *data,
                                     Py_ssize_t n) noexcept nogil:
    """A length-prefixed field (length -1: NULL ``data``)."""
    if data == NULL:
        return put_uvar(p, 1)
    p = put_uvar(p, zz(n))
    memcpy(p, data, n)
    return p + n


@cython.final
cdef class Sticky:
    """A topic's keyless partition and the bytes it takes before the producer moves on."""
    cdef public Py_ssize_t partition
    cdef public Py_ssize_t left

    def __init__(self) -> None:
        self.partition = -1
        self.left = 0


@cython.final
cdef class RecordBuffer:
    """The records region of one v2 batch, encoded as records are appended.

    ``count``, ``size`` (the batch's estimated bytes, for ``batch_size`` and
    ``buffer_memory``) and ``closed`` are the batch's own fields; ``buf[i]``
    is the timestamp of record ``i`` (kept after :meth:`take`).
    """
    cdef public Py_ssize_t count
    cdef public Py_ssize_t size
    cdef public bint closed
    cdef unsigned char *data
    cdef Py_ssize_t n, cap
    cdef int64_t *ts
    cdef Py_ssize_t nts, ts_cap
    cdef int64_t max_ts

    def __init__(self, size):
        self.size = size

    def __dealloc__(self):
        free(self.data)
        free(self.ts)

    def __len__(self) -> int:
        return self.nts

    def __getitem__(self, Py_ssize_t i) -> int:
        if i < 0:
            i += self.nts
        if i < 0 or i >= self.nts:
            raise IndexError("record index out of range")
        return self.ts[i]

    @property
    def first_timestamp(self) -> int:
        """The first record's timestamp (-1 when empty): the batch's base timestamp."""
        return self.ts[0] if self.nts else -1

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp appended (-1 when empty)."""
        return self.max_ts if self.nts else -1

    cdef int _reserve(self, Py_ssize_t more) except -1:
        cdef Py_ssize_t cap
        cdef void *p
        if self.n + more > self.cap:
            cap = max(self.cap * 2, self.n + more, 4096)
            p = realloc(self.data, cap)
            if p == NULL:
                raise MemoryError()
            self.data = <unsigned char *>p
            self.cap = cap
        if self.nts == self.ts_cap:
            cap = max(self.ts_cap * 2, 64)
            p = realloc(self.ts, cap * sizeof(int64_t))
            if p == NULL:
                raise MemoryError()
            self.ts = <int64_t *>p
            self.ts_cap = cap
        return 0

    cdef Py_ssize_t _put(self, int64_t timestamp, const unsigned char *k, Py_ssize_t klen,
                         const unsigned char *v, Py_ssize_t vlen, Py_ssize_t extra,
                         Py_ssize_t nh) except -1:
        """Append a record's head, key and value; ``extra`` header bytes follow (caller)."""
        cdef int64_t first = self.ts[0] if self.nts else timestamp
        cdef uint64_t zts = zz(timestamp - first)
        cdef uint64_t zoff = zz(<int64_t>self.nts)
        cdef Py_ssize_t body = 1 + uvar_size(zts) + uvar_size(zoff)
        body += (uvar_size(zz(klen)) + klen) if k != NULL else 1
        body += (uvar_size(zz(vlen)) + vlen) if v != NULL else 1
        body += uvar_size(zz(nh)) + extra
        self._reserve(body + 5)
        cdef unsigned char *p = self.data + self.n
        p = put_uvar(p, zz(body))
        p[0] = 0
        p = put_uvar(p + 1, zts)
        p = put_uvar(p, zoff)
        p = put_field(p, k, klen)
        p = put_field(p, v, vlen)
        p = put_uvar(p, zz(nh))
        self.n = p - self.data
        if not self.nts or timestamp > self.max_ts:
            self.max_ts = timestamp
        self.ts[self.nts] = timestamp
        self.nts += 1
        return self.nts - 1

    def append(self, timestamp, key, value, headers, Py_ssize_t size) -> int:
        """Encode one record (``headers``: ``[(str, bytes | None)]`` or None); returns its index.

        ``size`` is added to the batch's estimated bytes and ``count`` grows by one.
        """
        cdef const unsigned char *k = NULL
        cdef const unsigned char *v = NULL
        cdef Py_ssize_t klen = 0, vlen = 0, extra = 0, nh = 0, hl, i
        cdef unsigned char *p
        cdef list hs = None
        if not isinstance(timestamp, int):
            raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
        if key is not None:
            if not PyBytes_CheckExact(key):
                raise TypeError(f"key must be bytes or None, not {type(key).__name__}")
            k = <const unsigned char *>PyBytes_AS_STRING(key)
            klen = PyBytes_GET_SIZE(key)
        if value is not None:
            if not PyBytes_CheckExact(value):
                raise TypeError(f"value must be bytes or None, not {type(value).__name__}")
            v = <const unsigned char *>PyBytes_AS_STRING(value)
            vlen = PyBytes_GET_SIZE(value)
        if headers:
            hs = []
            for hkey, hval in headers:
                if not PyUnicode_CheckExact(hkey):
                    raise TypeError(f"header keys must be str, not {type(hkey).__name__}")
                if hval is not None and not PyBytes_CheckExact(hval):
                    raise TypeError(f"header value must be bytes or None, not "
                                    f"{type(hval).__name__}")
                hkey = (<str>hkey).encode("utf-8")
                hs.append((hkey, hval))
                hl = PyBytes_GET_SIZE(hkey)
                extra += uvar_size(zz(hl)) + hl
                if hval is None:
                    extra += 1
                else:
                    hl = PyBytes_GET_SIZE(hval)
                    extra += uvar_size(zz(hl)) + hl
            nh = len(hs)
        cdef int64_t ts = timestamp
        i = self._put(ts, k, klen, v, vlen, extra, nh)
        if nh:
            self._reserve(extra)
            p = self.data + self.n
            for hkey, hval in hs:
                p = put_field(p, <const unsigned char *>PyBytes_AS_STRING(hkey),
                              PyBytes_GET_SIZE(hkey))
                if hval is None:
                    p = put_field(p, NULL, 0)
                else:
                    p = put_field(p, <const unsigned char *>PyBytes_AS_STRING(hval),
                                  PyBytes_GET_SIZE(hval))
            self.n = p - self.data
        self.count += 1
        self.size += size
        return i

    def take(self) -> bytes:
        """The encoded records region; the buffer's bytes are released (timestamps stay)."""
        out = PyBytes_FromStringAndSize(<const char *>self.data, self.n) if self.n else b""
        free(self.data)
        self.data = NULL
        self.n = self.cap = 0
        return out


cdef object _EMPTY = ()


@cython.final
cdef class Appender:
    """``Producer.send``'s common case in one call, and the buffer counters it shares.

    ``fallback(topic, value, key, headers, partition, timestamp, on_delivery)``
    is the producer's general path; ``queues`` the accumulator's
    ``{topic: {partition: deque of batches}}`` (a batch has ``buf``, a
    :class:`RecordBuffer`, and ``outcome``); ``topics`` the cluster's
    ``{topic: TopicInfo}``; ``sticky`` ``{topic: Sticky}``; ``future_type``
    the future class (made without ``__init__``, given ``_outcome`` and
    ``_index``; anything but a class sends every record to ``fallback``).
    ``bypass`` sends everything to ``fallback``.
    """
    cdef public bint bypass
    cdef readonly Py_ssize_t used
    cdef readonly Py_ssize_t pending_records
    cdef object fallback
    cdef dict queues, topics, sticky
    cdef object future_type
    cdef Py_ssize_t batch_size, max_record_size, buffer_memory
    cdef bint ignore_keys

    def __init__(self, fallback, queues, topics, sticky, future_type,
                 batch_size, max_record_size, buffer_memory, ignore_keys):
        self.fallback = fallback
        self.queues = queues
        self.topics = topics
        self.sticky = sticky
        # without a future class to make, every record takes the general path
        self.future_type = future_type if isinstance(future_type, type) else None
        self.batch_size = batch_size
        self.max_record_size = max_record_size
        self.buffer_memory = buffer_memory
        self.ignore_keys = ignore_keys

    def reserve(self, size: int, records: int) -> None:
        """Count ``size`` bytes and ``records`` records as queued."""
        self.used += size
        self.pending_records += records

    def release(self, size: int, records: int) -> None:
        """Count ``size`` bytes and ``records`` records as done (delivered or failed)."""
        self.used -= size
        self.pending_records -= records

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp=None,
             on_delivery=None):
        """Append one record to its partition's open batch; a future of its metadata."""
        cdef Py_ssize_t klen = 0, vlen = 0, size, n, p, i
        cdef long long want
        cdef const unsigned char *k = NULL
        cdef const unsigned char *v = NULL
        cdef long long ts
        cdef int overflow = 0
        cdef PyObject *o
        cdef Sticky st = None
        cdef RecordBuffer buf
        if (self.bypass or not KW_ACCUM_HAS_GIL or headers is not None
                or on_delivery is not None or self.future_type is None
                or not PyUnicode_CheckExact(topic)):
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        if value is not None:
            if not PyBytes_CheckExact(value):
                return self.fallback(topic, value, key, headers, partition, timestamp,
                                     on_delivery)
            v = <const unsigned char *>PyBytes_AS_STRING(value)
            vlen = PyBytes_GET_SIZE(value)
        if key is not None:
            if not PyBytes_CheckExact(key):
                return self.fallback(topic, value, key, headers, partition, timestamp,
                                     on_delivery)
            k = <const unsigned char *>PyBytes_AS_STRING(key)
            klen = PyBytes_GET_SIZE(key)
        size = 12 + vlen + klen
        if size > self.max_record_size:
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        if timestamp is None:
            ts = kw_accum_now_ms()
        else:
            if not PyLong_CheckExact(timestamp):
                return self.fallback(topic, value, key, headers, partition, timestamp,
                                     on_delivery)
            ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
            if overflow:
                return self.fallback(topic, value, key, headers, partition, timestamp,
                                     on_delivery)
        if partition is not None and not PyLong_CheckExact(partition):
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        # The future first: making it may run the cycle collector (and so other threads);
        # from here to the end nothing does.
        f = (<PyTypeObject *>self.future_type).tp_new(self.future_type, <PyObject *>_EMPTY, NULL)
        o = PyDict_GetItem(self.topics, topic)
        if o == NULL:
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        parts = (<object>o).partitions
        n = PyObject_Length(parts)
        if n == 0:
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        if partition is None:
            if k == NULL or self.ignore_keys:
                o = PyDict_GetItem(self.sticky, topic)
                if o == NULL or type(<object>o) is not Sticky:
                    return self.fallback(topic, value, key, headers, partition, timestamp,
                                         on_delivery)
                st = <Sticky>o
                if st.left <= 0:
                    return self.fallback(topic, value, key, headers, partition, timestamp,
                                         on_delivery)
                p = st.partition
            else:
                p = <Py_ssize_t>((kw_murmur2(k, klen) & 0x7FFFFFFF) % <uint32_t>n)
        else:
            want = PyLong_AsLongLongAndOverflow(partition, &overflow)
            if overflow or want < 0 or want >= n:
                return self.fallback(topic, value, key, headers, partition, timestamp,
                                     on_delivery)
            p = <Py_ssize_t>want
        o = PyDict_GetItem(self.queues, topic)
        if o == NULL:
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        o = PyDict_GetItem(<object>o, p)
        if o == NULL or PyObject_Length(<object>o) == 0:
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        batch = PySequence_GetItem(<object>o, -1)
        b = batch.buf
        if type(b) is not RecordBuffer:
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        buf = <RecordBuffer>b
        if (buf.closed or (buf.size + size > self.batch_size and buf.count)
                or (self.used + size > self.buffer_memory and self.used > 0)):
            return self.fallback(topic, value, key, headers, partition, timestamp, on_delivery)
        outcome = batch.outcome
        i = buf._put(ts, k, klen, v, vlen, 0, 0)
        buf.count += 1
        buf.size += size
        if st is not None:
            st.left -= size
        self.used += size
        self.pending_records += 1
        f._outcome = outcome
        f._index = i
        return f


# ------------------------------------------------------------ send_batch's column encoder

cdef struct _Col:
    const unsigned char *bits    # validity bitmap (NULL: no nulls)
    const unsigned char *offs
    const unsigned char *data
    Py_ssize_t data_len
    Py_ssize_t base               # the array's offset into its buffers
    int width                     # 4 (binary) or 8 (large_binary)
    bint present


cdef class _Held:
    """The buffers a column borrows, released when the encoder is done."""
    cdef Py_buffer views[6]   # up to three per column, two columns
    cdef int n

    cdef int hold(self, object obj, Py_buffer **view) except -1:
        if self.n >= 6:
            raise ValueError("too many column buffers")
        PyObject_GetBuffer(obj, &self.views[self.n], PyBUF_SIMPLE)
        view[0] = &self.views[self.n]
        self.n += 1
        return 0

    def __dealloc__(self):
        cdef int i
        for i in range(self.n):
            PyBuffer_Release(&self.views[i])


cdef int _open_col(_Col *c, _Held held, object col, Py_ssize_t stop, str what) except -1:
    cdef Py_buffer *view
    c.present = False
    c.bits = NULL
    if col is None:
        return 0
    validity, offsets, data, width, base = col
    if width != 4 and width != 8:
        raise ValueError(f"{what}: offset width must be 4 or 8, not {width}")
    c.width = width
    c.base = base
    if c.base < 0:
        raise ValueError(f"{what}: bad row range")
    held.hold(offsets, &view)
    c.offs = <const unsigned char *>view.buf
    if view.len // c.width < c.base + stop + 1:
        raise ValueError(f"{what}: the offsets buffer holds {view.len // c.width} entries, "
                         f"{c.base + stop + 1} needed")
    held.hold(data, &view)
    c.data = <const unsigned char *>view.buf
    c.data_len = view.len
    if validity is not None:
        held.hold(validity, &view)
        c.bits = <const unsigned char *>view.buf
        if view.len * 8 < c.base + stop:
            raise ValueError(f"{what}: the validity bitmap is too short")
    c.present = True
    return 0


cdef inline Py_ssize_t _col_get(const _Col *c, Py_ssize_t i,
                                const unsigned char **ptr) noexcept nogil:
    """Row ``i``'s length (-1: null; -2: bad offsets), its bytes in ``ptr``."""
    cdef Py_ssize_t j, lo, hi
    if not c.present:
        return -1
    j = c.base + i
    if c.bits != NULL and not ((c.bits[j >> 3] >> (j & 7)) & 1):
        return -1
    if c.width == 4:
        lo = (<const int32_t *>c.offs)[j]
        hi = (<const int32_t *>c.offs)[j + 1]
    else:
        lo = <Py_ssize_t>(<const int64_t *>c.offs)[j]
        hi = <Py_ssize_t>(<const int64_t *>c.offs)[j + 1]
    if lo < 0 or hi < lo or hi > c.data_len:
        return -2
    ptr[0] = c.data + lo
    return hi - lo


cdef inline Py_ssize_t _field_size(Py_ssize_t n) noexcept nogil:
    if n < 0:
        return 1
    return uvar_size(zz(n)) + n


cdef enum:  # the encoder's outcomes besides success
    _BAD_KEY = 1
    _BAD_VALUE = 2
    _TS_RANGE = 3
    _FULL = 4


cdef int _encode_rows(unsigned char *out, Py_ssize_t cap, Py_ssize_t *pos, Py_ssize_t start,
                      Py_ssize_t stop, const int64_t *ts, int64_t base, const _Col *kc,
                      const _Col *vc, Py_ssize_t *bad) noexcept nogil:
    cdef Py_ssize_t i, kn, vn, body, n = pos[0]
    cdef const unsigned char *kp = NULL
    cdef const unsigned char *vp = NULL
    cdef uint64_t zts = 0, zoff
    cdef int64_t d
    cdef unsigned char *p
    for i in range(start, stop):
        kn = _col_get(kc, i, &kp)
        vn = _col_get(vc, i, &vp)
        if kn == -2 or vn == -2:
            bad[0] = i
            pos[0] = n
            return _BAD_KEY if kn == -2 else _BAD_VALUE
        if ts != NULL:
            if __builtin_sub_overflow(ts[i], base, &d):
                bad[0] = i
                pos[0] = n
                return _TS_RANGE
            zts = zz(d)
        zoff = zz(i - start)
        body = 2 + uvar_size(zts) + uvar_size(zoff) + _field_size(kn) + _field_size(vn)
        if cap - n < body + uvar_size(zz(body)):
            bad[0] = i
            pos[0] = n
            return _FULL
        p = put_uvar(out + n, zz(body))
        p[0] = 0
        p = put_uvar(p + 1, zts)
        p = put_uvar(p, zoff)
        p = put_field(p, kp if kn >= 0 else NULL, kn)
        p = put_field(p, vp if vn >= 0 else NULL, vn)
        p[0] = 0
        n = p + 1 - out
    pos[0] = n
    return 0


def encode_columns_into(out, Py_ssize_t pos, Py_ssize_t start, Py_ssize_t stop, timestamps,
                        int64_t base_timestamp, keys, values) -> int:
    """Encode rows ``start..stop-1`` of Arrow-layout columns as v2 records into ``out``.

    ``out`` is a writable buffer; the records go from byte ``pos`` on and the
    end position is returned.  ``keys``/``values`` are ``(validity, offsets,
    data, offset width, array offset)`` or None (every row null);
    ``timestamps`` a buffer of int64 (or None: every delta 0) whose deltas
    from ``base_timestamp`` are written.  The loop runs without the GIL, so
    the producer's I/O thread sends earlier batches meanwhile.  A ValueError
    names the row whose offsets or timestamp are bad, or the row that does
    not fit (size ``out`` with 32 bytes per row besides keys and values).
    """
    cdef _Held held = _Held()
    cdef _Col kc, vc
    cdef Py_buffer ob, tb
    cdef bint has_t = False
    cdef const int64_t *ts = NULL
    cdef Py_ssize_t n = pos, bad = -1
    cdef int err
    if start < 0 or stop < start:
        raise ValueError(f"bad row range {start}..{stop}")
    if stop - start > 0x80000000:
        raise ValueError("value out of 32-bit varint range: too many rows for one batch")
    _open_col(&kc, held, keys, stop, "keys")
    _open_col(&vc, held, values, stop, "values")
    PyObject_GetBuffer(out, &ob, PyBUF_WRITABLE)
    try:
        if pos < 0 or pos > ob.len:
            raise ValueError(f"position {pos} is outside the {ob.len}-byte buffer")
        if timestamps is not None:
            PyObject_GetBuffer(timestamps, &tb, PyBUF_SIMPLE)
            has_t = True
            if tb.len // 8 < stop:
                raise ValueError(f"timestamps: the buffer holds {tb.len // 8} entries, "
                                 f"{stop} needed")
            ts = <const int64_t *>tb.buf
        with nogil:
            err = _encode_rows(<unsigned char *>ob.buf, ob.len, &n, start, stop, ts,
                               base_timestamp, &kc, &vc, &bad)
        if err == _BAD_KEY or err == _BAD_VALUE:
            what = "keys" if err == _BAD_KEY else "values"
            raise ValueError(f"{what}: offsets of row {bad} are out of order or past the data")
        if err == _TS_RANGE:
            raise ValueError(f"timestamps: row {bad}'s delta from {base_timestamp} is out of "
                             "64-bit varlong range")
        if err == _FULL:
            raise ValueError(f"row {bad} does not fit in the {ob.len}-byte buffer "
                             f"(at byte {n})")
        return n
    finally:
        if has_t:
            PyBuffer_Release(&tb)
        PyBuffer_Release(&ob)
