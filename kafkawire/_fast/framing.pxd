# Record framing shared by the compiled decoders (scan's header rows and batch
# objects, the columnar decoder): the v2 batch header read once, by field name,
# from the layout in format.pxd.  (The dump formatter's C helpers read the same
# fields through wire_impl.h.)
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t
from libc.stddef cimport size_t
from kafkawire._fast.wire cimport kw_be_i16, kw_be_i32, kw_be_u32, kw_be_i64
from kafkawire._fast.format cimport (
    V2_BASE_OFFSET, V2_LENGTH, V2_PARTITION_LEADER_EPOCH, V2_MAGIC, V2_CRC, V2_ATTRIBUTES,
    V2_LAST_OFFSET_DELTA, V2_BASE_TIMESTAMP, V2_MAX_TIMESTAMP, V2_PRODUCER_ID,
    V2_PRODUCER_EPOCH, V2_BASE_SEQUENCE, V2_RECORD_COUNT, LOG_OVERHEAD, MAGIC_OFFSET,
    COMPRESSION_MASK, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, CONTROL_MASK)


cdef struct V2Header:
    int64_t base_offset
    int32_t length
    int32_t partition_leader_epoch
    uint32_t crc
    int attributes              # unsigned 16-bit, as Kafka's tools print it
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t record_count


cdef inline int32_t frame_length(const unsigned char *b) noexcept nogil:
    """The length field of the batch or message at ``b`` (bytes after the first 12)."""
    return kw_be_i32(b + V2_LENGTH)


cdef inline int frame_magic(const unsigned char *b) noexcept nogil:
    """The magic byte (signed, as Kafka reads it) of the batch or message at ``b``."""
    return <signed char>b[MAGIC_OFFSET]


cdef inline void read_v2_header(const unsigned char *b, V2Header *h) noexcept nogil:
    """Every field of the v2 batch header at ``b`` (the caller checked 61 bytes are there)."""
    h.base_offset = kw_be_i64(b + V2_BASE_OFFSET)
    h.length = kw_be_i32(b + V2_LENGTH)
    h.partition_leader_epoch = kw_be_i32(b + V2_PARTITION_LEADER_EPOCH)
    h.crc = kw_be_u32(b + V2_CRC)
    h.attributes = <unsigned short>kw_be_i16(b + V2_ATTRIBUTES)
    h.last_offset_delta = kw_be_i32(b + V2_LAST_OFFSET_DELTA)
    h.base_timestamp = kw_be_i64(b + V2_BASE_TIMESTAMP)
    h.max_timestamp = kw_be_i64(b + V2_MAX_TIMESTAMP)
    h.producer_id = kw_be_i64(b + V2_PRODUCER_ID)
    h.producer_epoch = kw_be_i16(b + V2_PRODUCER_EPOCH)
    h.base_sequence = kw_be_i32(b + V2_BASE_SEQUENCE)
    h.record_count = kw_be_i32(b + V2_RECORD_COUNT)


# -- the v2 record-body walker (framing_impl.h): the one reader of a record's layout
from kafkawire._fast.wire cimport Cursor

cdef extern from "framing_impl.h" nogil:
    enum:
        KWR_OK
        KWR_VARINT
        KWR_LENGTH
        KWR_PAST_END
        KWR_OFFSET_RANGE
        KWR_KEY_LENGTH
        KWR_KEY_PAST
        KWR_VALUE_LENGTH
        KWR_VALUE_PAST
        KWR_HEADER_COUNT
        KWR_HKEY_LENGTH
        KWR_HKEY_UTF8
        KWR_HVALUE_LENGTH
        KWR_HVALUE_PAST
        KWR_FIELDS
        KW_WALK_UTF8
        KW_WALK_RANGE
    ctypedef struct RecordFields "kw_record":
        const unsigned char *start
        const unsigned char *end
        int32_t length
        int attributes
        int64_t ts_delta
        int32_t off_delta
        int32_t klen
        int32_t vlen
        const unsigned char *key
        const unsigned char *value
        int32_t nh
        const unsigned char *headers
        int err
        int varint_err
        int has_offset
        int64_t bad
        const unsigned char *at
    # Read the record at the cursor: KWR_OK and the cursor past it, or the error
    # (the cursor unchanged).  See framing_impl.h.
    int record_read "kw_record_read" (Cursor *c, RecordFields *r, int flags,
                                      int64_t base_offset, int64_t last_offset)
    # The next header of an accepted record (no checks: record_read made them).
    void header_next "kw_header_next" (const unsigned char **hp, const unsigned char *rend,
                                       const unsigned char **key, int32_t *klen,
                                       const unsigned char **value, int32_t *vlen)
    bint utf8_valid "kw_utf8_valid" (const unsigned char *s, size_t n)
