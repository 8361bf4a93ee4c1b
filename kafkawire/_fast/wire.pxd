# Declarations of wire_impl.h (inline big-endian loads and varint readers).
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t

cdef extern from "wire_impl.h" nogil:
    int16_t kw_be_i16(const unsigned char *p)
    int32_t kw_be_i32(const unsigned char *p)
    uint32_t kw_be_u32(const unsigned char *p)
    int64_t kw_be_i64(const unsigned char *p)
    const unsigned char *kw_uvarint64(const unsigned char *p, const unsigned char *end,
                                      int maxbytes, uint64_t *out, int *err)
    const unsigned char *kw_varint32(const unsigned char *p, const unsigned char *end,
                                     int32_t *out, int *err)
    const unsigned char *kw_varint64(const unsigned char *p, const unsigned char *end,
                                     int64_t *out, int *err)
