# The records kernel's C interface, for the kernels that cimport it (scan's
# BatchHeader iterates its records through iter_v2_batch, a direct C call).
cimport cython
from libc.stdint cimport int64_t, uint32_t
from kafkawire._fast.framing cimport RecordFields


cdef class Record:
    cdef object offset
    cdef object timestamp
    cdef object timestamp_type
    cdef object key
    cdef object value
    cdef object headers


@cython.final
cdef class RecordIterator:
    cdef Py_buffer view
    cdef bint held
    cdef object owner
    cdef const unsigned char *base
    cdef const unsigned char *p
    cdef const unsigned char *pend
    cdef Py_ssize_t remaining
    cdef int64_t base_offset, base_timestamp, max_timestamp
    cdef bint lat
    cdef object ts_name
    cdef object last_ts
    cdef int64_t last_ts_value
    cdef list hcache
    cdef list hvcache
    cdef object on_error
    cdef object err_relocate     # relocate(exc, batch, compressed) -> the exception to raise
    cdef object err_batch
    cdef bint err_compressed
    # The last two records made (see records.pyx): a dropped one is reused.
    cdef object spare0
    cdef object spare1
    cdef bint flip

    cdef int _open(self, object buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                   int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
                   int timestamp_type, object on_error) except -1
    cdef int _fail(self, object exc) except -1
    cdef int _finish(self) except -1
    cdef Record _next_checked(self, RecordFields *rec)


cdef object iter_v2_batch(object buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                          int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
                          int timestamp_type, object batch, bint compressed,
                          object relocate)


# RecordBatch.validate()'s verdict for an uncompressed batch at buf[position:position+size]
# (CRC and records in one pass; see check_batch_v2): scan's BatchHeader.validate calls it.
cdef bint v2_batch_ok(object buf, Py_ssize_t position, int64_t size, uint32_t crc,
                      int64_t count, int64_t base_offset, int64_t last_offset) except -1
