# Record framing shared by the compiled decoders (scan's header rows and batch
# objects, the columnar decoder): the v2 batch header read once, by field name,
# from the layout in format.pxd.  (The dump formatter's C helpers read the same
# fields through wire_impl.h.)
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t
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
