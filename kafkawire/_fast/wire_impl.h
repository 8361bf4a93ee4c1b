/* Inline big-endian loads, zigzag and varint readers: the C side of wire.pxd,
 * shared by every compiled kernel (and dumpfmt's C helpers). */
#ifndef KAFKAWIRE_WIRE_IMPL_H
#define KAFKAWIRE_WIRE_IMPL_H
#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#include <stdlib.h>
#define KW_BSWAP16(x) _byteswap_ushort(x)
#define KW_BSWAP32(x) _byteswap_ulong(x)
#define KW_BSWAP64(x) _byteswap_uint64(x)
#else
#define KW_BSWAP16(x) __builtin_bswap16(x)
#define KW_BSWAP32(x) __builtin_bswap32(x)
#define KW_BSWAP64(x) __builtin_bswap64(x)
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KW_BE16(x) (x)
#define KW_BE32(x) (x)
#define KW_BE64(x) (x)
#else
#define KW_BE16(x) KW_BSWAP16(x)
#define KW_BE32(x) KW_BSWAP32(x)
#define KW_BE64(x) KW_BSWAP64(x)
#endif

static inline int16_t kw_be_i16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return (int16_t)KW_BE16(v); }
static inline uint16_t kw_be_u16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return (uint16_t)KW_BE16(v); }
static inline uint64_t kw_be_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return KW_BE64(v); }
static inline int32_t kw_be_i32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return (int32_t)KW_BE32(v); }
static inline uint32_t kw_be_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return KW_BE32(v); }
static inline int64_t kw_be_i64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return (int64_t)KW_BE64(v); }

/* The bounded read cursor (wire.pxd's Cursor): reads never pass `end`. */
typedef struct {
    const unsigned char *base;   /* positions are counted from here */
    const unsigned char *p;      /* the next byte to read */
    const unsigned char *end;    /* reads never pass this */
} kw_cursor;

/* Zigzag decoding (Kafka's signed varints). */
static inline int64_t kw_zigzag64(uint64_t v) { return (int64_t)((v >> 1) ^ (0ull - (v & 1))); }
static inline int32_t kw_zigzag32(uint32_t v) { return (int32_t)((v >> 1) ^ (0u - (v & 1))); }

/* Varint readers: return the position after the varint, or NULL when it
 * runs past `end` (*err = 1, truncated) or is overlong (*err = 2). */
static inline const unsigned char *kw_uvarint64(const unsigned char *p, const unsigned char *end,
                                                int maxbytes, uint64_t *out, int *err) {
    uint64_t result = 0;
    int shift = 0;
    for (int i = 0; i < maxbytes; i++) {
        if (p >= end) { *err = 1; return NULL; }
        unsigned char b = *p++;
        result |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = result; return p; }
        shift += 7;
    }
    *err = 2;
    return NULL;
}

static inline const unsigned char *kw_varint32(const unsigned char *p, const unsigned char *end,
                                               int32_t *out, int *err) {
    if (end - p >= 2) {   /* one or two bytes: most lengths and deltas */
        uint32_t v = p[0];
        if (!(v & 0x80)) {
            *out = (int32_t)((v >> 1) ^ (0u - (v & 1)));
            return p + 1;
        }
        if (!(p[1] & 0x80)) {
            v = (v & 0x7f) | ((uint32_t)p[1] << 7);
            *out = (int32_t)((v >> 1) ^ (0u - (v & 1)));
            return p + 2;
        }
    }
    uint64_t r;
    p = kw_uvarint64(p, end, 5, &r, err);
    if (p) {
        uint32_t v = (uint32_t)r;
        *out = (int32_t)((v >> 1) ^ (0u - (v & 1)));
    }
    return p;
}

static inline const unsigned char *kw_varint64(const unsigned char *p, const unsigned char *end,
                                               int64_t *out, int *err) {
    if (end - p >= 2) {   /* one or two bytes */
        uint64_t v = p[0];
        if (!(v & 0x80)) {
            *out = (int64_t)((v >> 1) ^ (0ull - (v & 1)));
            return p + 1;
        }
        if (!(p[1] & 0x80)) {
            v = (v & 0x7f) | ((uint64_t)p[1] << 7);
            *out = (int64_t)((v >> 1) ^ (0ull - (v & 1)));
            return p + 2;
        }
    }
    uint64_t v;
    p = kw_uvarint64(p, end, 10, &v, err);
    if (p) *out = (int64_t)((v >> 1) ^ (0ull - (v & 1)));
    return p;
}
#endif
