/* The v2 record-body walker: the one reader of Kafka's v2 record layout in the
 * compiled kernels (the C side of framing.pxd; the dump formatter's C helpers
 * include it too).  The pure twin is kafkawire/_pure/framing.py.
 *
 * A record is
 *     length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
 *     keyLength varint | key | valueLength varint | value |
 *     headerCount varint | (headerKeyLength varint | headerKey |
 *                           headerValueLength varint | headerValue) * headerCount
 * (lengths -1 mean null, except a header key's, which is never null).
 *
 * kw_record_read() reads one record from a bounded cursor: every field is checked
 * against the record's end and the record's end against the cursor's end, so no
 * read leaves the caller's buffer.  On success the cursor moves past the record;
 * on failure it stays at the record's start and the result names what failed
 * (err), where (at), and whether the offset delta was read by then.  Callers turn
 * that into their own typed error; the headers can then be walked again without
 * checks by kw_header_next().
 */
#ifndef KAFKAWIRE_FRAMING_IMPL_H
#define KAFKAWIRE_FRAMING_IMPL_H
#include "wire_impl.h"

/* What went wrong in a record (KWR_OK: nothing). */
enum {
    KWR_OK = 0,
    KWR_VARINT,          /* a varint runs past the record (varint_err 1) or is overlong (2) */
    KWR_LENGTH,          /* the record's length is below the smallest record (6 bytes) */
    KWR_PAST_END,        /* the record's length runs past the records region */
    KWR_OFFSET_RANGE,    /* (KW_WALK_RANGE) offset delta negative or past the last offset */
    KWR_KEY_LENGTH,      /* key length below -1 */
    KWR_KEY_PAST,        /* key runs past the record */
    KWR_VALUE_LENGTH,    /* value length below -1 */
    KWR_VALUE_PAST,      /* value runs past the record */
    KWR_HEADER_COUNT,    /* header count negative or more than the bytes left */
    KWR_HKEY_LENGTH,     /* header key length negative or past the record */
    KWR_HKEY_UTF8,       /* (KW_WALK_UTF8) header key not valid UTF-8 */
    KWR_HVALUE_LENGTH,   /* header value length below -1 */
    KWR_HVALUE_PAST,     /* header value runs past the record */
    KWR_FIELDS           /* the fields do not use exactly the record's length */
};

/* Walk options. */
enum {
    KW_WALK_UTF8 = 1,    /* check every header key is UTF-8 (in order with the other checks) */
    KW_WALK_RANGE = 2    /* check base_offset + offsetDelta lies in [base_offset, last_offset] */
};

typedef struct {
    const unsigned char *start;     /* the record's first byte (its length varint) */
    const unsigned char *end;       /* one past its last byte */
    int32_t length;                 /* the length varint's value (bytes after it) */
    int attributes;
    int64_t ts_delta;
    int32_t off_delta;
    int32_t klen, vlen;             /* -1: null */
    const unsigned char *key;       /* valid when klen >= 0 */
    const unsigned char *value;     /* valid when vlen >= 0 */
    int32_t nh;                     /* header count */
    const unsigned char *headers;   /* the first header's key length varint */
    /* on failure */
    int err;                        /* KWR_* */
    int varint_err;                 /* for KWR_VARINT: 1 truncated, 2 overlong */
    int has_offset;                 /* the offset delta was read before the failure */
    int64_t bad;                    /* the wrong length or count; KWR_FIELDS: bytes used */
    const unsigned char *at;        /* where: see each check below */
} kw_record;

/* Strict UTF-8 (what Python's bytes.decode("utf-8") accepts). */
static inline int kw_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {   /* ASCII runs, 16 bytes per step */
        uint64_t a, b;
        memcpy(&a, s + i, 8);
        memcpy(&b, s + i + 8, 8);
        if ((a | b) & 0x8080808080808080ULL) break;
    }
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ULL)) { i += 8; continue; }
        }
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            unsigned char b1 = s[i + 1];
            if ((b1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if ((c == 0xE0 && b1 < 0xA0) || (c == 0xED && b1 >= 0xA0)) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            unsigned char b1 = s[i + 1];
            if ((b1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xF0 && b1 < 0x90) || (c == 0xF4 && b1 >= 0x90)) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* (The walker works on locals, which the compiler keeps in registers, and stores the
 * result once: byte reads could otherwise alias the result's fields.) */
#define KWR_FAIL(code, where) do { at = (where); err = (code); goto fail; } while (0)
#if defined(__GNUC__) || defined(__clang__)
#define KWR_BAD(x) __builtin_expect(!!(x), 0)
#else
#define KWR_BAD(x) (x)
#endif
#define KWR_VARINT32(dst, lim) do { \
        const unsigned char *q_ = kw_varint32(p, (lim), &(dst), &verr); \
        if (KWR_BAD(!q_)) { KWR_FAIL(KWR_VARINT, p); } \
        p = q_; \
    } while (0)

/* Read the record at the cursor (see the top of this file).  `flags`: KW_WALK_*;
 * base_offset and last_offset are used only with KW_WALK_RANGE.  Positions (`at`):
 * a varint's first byte; the record's start for KWR_LENGTH, KWR_PAST_END,
 * KWR_OFFSET_RANGE and KWR_FIELDS; otherwise the byte after the length varint
 * that is wrong (the key, value or header key it describes).  Fields not read
 * before a failure are 0. */
static inline int kw_record_read(kw_cursor *c, kw_record *r, int flags,
                                 int64_t base_offset, int64_t last_offset) {
    const unsigned char *const start = c->p, *const end = c->end;
    const unsigned char *p = start, *rend = start, *at = start, *key = start, *value = start;
    const unsigned char *headers = start;
    int32_t length = 0, off_delta = 0, klen = 0, vlen = 0, nh = 0, h, hkl, hvl;
    int64_t ts_delta = 0, bad = 0;
    int err = KWR_OK, verr = 0, has_offset = 0, attributes = 0;
    KWR_VARINT32(length, end);
    if (KWR_BAD(length < 6)) KWR_FAIL(KWR_LENGTH, start);
    if (KWR_BAD(length > end - p)) KWR_FAIL(KWR_PAST_END, start);
    rend = p + length;
    attributes = *p++;
    {
        const unsigned char *q_ = kw_varint64(p, rend, &ts_delta, &verr);
        if (KWR_BAD(!q_)) KWR_FAIL(KWR_VARINT, p);
        p = q_;
    }
    KWR_VARINT32(off_delta, rend);
    if ((flags & KW_WALK_RANGE) && (off_delta < 0
            || base_offset > INT64_MAX - (int64_t)off_delta
            || base_offset + (int64_t)off_delta > last_offset))
        KWR_FAIL(KWR_OFFSET_RANGE, start);
    has_offset = 1;
    KWR_VARINT32(klen, rend);
    key = p;
    if (klen >= 0) {
        if (KWR_BAD(klen > rend - p)) KWR_FAIL(KWR_KEY_PAST, p);
        p += klen;
    } else if (klen != -1) {
        KWR_FAIL(KWR_KEY_LENGTH, p);
    }
    KWR_VARINT32(vlen, rend);
    value = p;
    if (vlen >= 0) {
        if (KWR_BAD(vlen > rend - p)) KWR_FAIL(KWR_VALUE_PAST, p);
        p += vlen;
    } else if (vlen != -1) {
        KWR_FAIL(KWR_VALUE_LENGTH, p);
    }
    KWR_VARINT32(nh, rend);
    headers = p;
    if (nh != 0) {
        if (KWR_BAD(nh < 0 || nh > rend - p)) KWR_FAIL(KWR_HEADER_COUNT, p);
        for (h = 0; h < nh; h++) {
            KWR_VARINT32(hkl, rend);
            if (KWR_BAD(hkl < 0 || hkl > rend - p)) { bad = hkl; KWR_FAIL(KWR_HKEY_LENGTH, p); }
            if ((flags & KW_WALK_UTF8) && !kw_utf8_valid(p, (size_t)hkl))
                KWR_FAIL(KWR_HKEY_UTF8, p);
            p += hkl;
            KWR_VARINT32(hvl, rend);
            if (hvl >= 0) {
                if (KWR_BAD(hvl > rend - p)) KWR_FAIL(KWR_HVALUE_PAST, p);
                p += hvl;
            } else if (hvl != -1) {
                bad = hvl;
                KWR_FAIL(KWR_HVALUE_LENGTH, p);
            }
        }
    }
    if (KWR_BAD(p != rend)) { bad = length - (rend - p); KWR_FAIL(KWR_FIELDS, start); }
    c->p = rend;
fail:
    r->start = start;
    r->end = rend;
    r->length = length;
    r->attributes = attributes;
    r->ts_delta = ts_delta;
    r->off_delta = off_delta;
    r->klen = klen;
    r->vlen = vlen;
    r->key = key;
    r->value = value;
    r->nh = nh;
    r->headers = headers;
    r->err = err;
    r->varint_err = verr;
    r->has_offset = has_offset;
    r->bad = bad;
    r->at = at;
    return err;
}
#undef KWR_VARINT32
#undef KWR_FAIL
#undef KWR_BAD

/* The next header of a record kw_record_read() accepted: *hp moves past it. */
static inline void kw_header_next(const unsigned char **hp, const unsigned char *rend,
                                  const unsigned char **key, int32_t *klen,
                                  const unsigned char **value, int32_t *vlen) {
    int e_ = 0;
    const unsigned char *p = *hp, *q;
    *klen = 0;
    *vlen = -1;
    if ((q = kw_varint32(p, rend, klen, &e_)) != NULL) p = q;
    *key = p;
    p += *klen;
    if ((q = kw_varint32(p, rend, vlen, &e_)) != NULL) p = q;
    *value = p;
    if (*vlen > 0) p += *vlen;
    *hp = p;
}
#endif
