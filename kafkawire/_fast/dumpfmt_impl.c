/* Dump formatter: renders `kafkawire dump --deep-iteration` text (or --json lines) of v2
 * batches straight from the segment bytes into a growable byte buffer, with no Python
 * object per record and without the GIL.  Every read is bounded by the batch and record
 * lengths; anything this fast path does not render exactly as the Python path would
 * (compressed, control or legacy batches, a CRC mismatch, malformed records, text needing
 * Java's UTF-8 replacement, arithmetic past int64) stops it, and the caller takes the
 * general path for that batch.  The contract is in kafkawire/_pure/dumpfmt.py. */
#include <stdlib.h>
#include <string.h>
#include "dumpfmt_impl.h"
#include "wire_impl.h"
#include "framing_impl.h"
#include "crc_impl.h"

#define INT32_MAXV 2147483647LL

/* a + b, or 1 when it does not fit in int64 (Python would print the exact big number) */
static inline int add_ovf(int64_t a, int64_t b, int64_t *r) {
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
    *r = a + b;
    return 0;
}

static int out_reserve(kwd_out *o, size_t n) {
    if (o->cap - o->len >= n) return 0;
    if (o->fixed) return -2;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap - o->len < n) {
        if (cap > ((size_t)-1) / 2) return -1;
        cap *= 2;
    }
    char *p = (char *)realloc(o->p, cap);
    if (!p) return -1;
    o->p = p;
    o->cap = cap;
    return 0;
}

static int gap_add(kwd_gaps *g, int64_t a, int64_t b) {
    if (g->n + 2 > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 64;
        int64_t *p = (int64_t *)realloc(g->p, cap * sizeof(int64_t));
        if (!p) return -1;
        g->p = p;
        g->cap = cap;
    }
    g->p[g->n++] = a;
    g->p[g->n++] = b;
    return 0;
}

/* ---- writers (the caller reserved room) ----------------------------------------------- */
static const char DIGITS2[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline int ndigits(uint64_t v) {
    int n = 1;
    for (;;) {
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* decimal digits of v, written in place (no temporary, no library call) */
static inline char *put_u64(char *w, uint64_t v) {
    int n = ndigits(v);
    char *t = w + n;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        t -= 2;
        t[0] = DIGITS2[i];
        t[1] = DIGITS2[i + 1];
    }
    if (v >= 10) {
        t[-2] = DIGITS2[v * 2];
        t[-1] = DIGITS2[v * 2 + 1];
    } else {
        t[-1] = (char)('0' + v);
    }
    return w + n;
}

/* Consecutive records' offsets and timestamps share their leading digits: those of
 * v / 10000 are kept and reused while they do not change (needs 24 bytes of room at w). */
typedef struct { uint64_t hi; size_t n; char d[24]; } numcache;

static inline char *put_u64_c(char *w, uint64_t v, numcache *c) {
    uint64_t hi = v / 10000;
    unsigned lo = (unsigned)(v - hi * 10000);
    if (hi == 0) return put_u64(w, v);
    if (hi != c->hi) {
        c->hi = hi;
        c->n = (size_t)(put_u64(c->d, hi) - c->d);
    }
    memcpy(w, c->d, sizeof c->d);
    w += c->n;
    memcpy(w, DIGITS2 + (lo / 100) * 2, 2);
    memcpy(w + 2, DIGITS2 + (lo % 100) * 2, 2);
    return w + 4;
}

static inline char *put_i64_c(char *w, int64_t v, numcache *c) {
    if (v < 0) {
        *w++ = '-';
        return put_u64(w, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64_c(w, (uint64_t)v, c);
}

static inline char *put_i64(char *w, int64_t v) {
    if (v < 0) {
        *w++ = '-';
        return put_u64(w, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(w, (uint64_t)v);
}

#define PUTS(w, lit) (memcpy((w), (lit), sizeof(lit) - 1), (w) + sizeof(lit) - 1)

static inline char *put_mem(char *w, const void *s, size_t n) {
    memcpy(w, s, n);
    return w + n;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* two base64 characters per 12 bits, built by kwd_init() when the module loads */
static uint16_t B64PAIRS[4096];

static int use_ssse3;

void kwd_init(void) {
    for (int i = 0; i < 4096; i++) {
        char pair[2] = {B64[i >> 6], B64[i & 63]};
        memcpy(&B64PAIRS[i], pair, 2);
    }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    use_ssse3 = __builtin_cpu_supports("ssse3");
#endif
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KWD_HAVE_SSSE3 1

/* 12 input bytes -> 16 characters per step (W. Mula's pshufb method); returns bytes consumed.
 * Reads 16 bytes per step, so it stops 4 bytes before the end of the input. */
__attribute__((target("ssse3")))
static size_t b64_ssse3(char *w, const unsigned char *s, size_t n) {
    size_t i = 0;
    const __m128i spread = _mm_set_epi8(10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1);
    const __m128i shift_lut = _mm_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                                            '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
                                            '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
    for (; i + 16 <= n; i += 12) {
        __m128i in = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(s + i)), spread);
        __m128i t0 = _mm_and_si128(in, _mm_set1_epi32(0x0fc0fc00));
        __m128i t1 = _mm_mulhi_epu16(t0, _mm_set1_epi32(0x04000040));
        __m128i t2 = _mm_and_si128(in, _mm_set1_epi32(0x003f03f0));
        __m128i t3 = _mm_mullo_epi16(t2, _mm_set1_epi32(0x01000010));
        __m128i idx = _mm_or_si128(t1, t3);
        __m128i r = _mm_subs_epu8(idx, _mm_set1_epi8(51));
        __m128i less = _mm_cmpgt_epi8(_mm_set1_epi8(26), idx);
        r = _mm_or_si128(r, _mm_and_si128(less, _mm_set1_epi8(13)));
        r = _mm_add_epi8(_mm_shuffle_epi8(shift_lut, r), idx);
        _mm_storeu_si128((__m128i *)w, r);
        w += 16;
    }
    return i;
}
#endif

static char *put_b64(char *w, const unsigned char *s, size_t n) {
    size_t i = 0;
#ifdef KWD_HAVE_SSSE3
    if (use_ssse3 && n >= 16) {
        i = b64_ssse3(w, s, n);
        w += i / 3 * 4;
    }
#endif
    for (; i + 8 <= n; i += 6) {   /* six bytes per step from one 8-byte load */
        uint64_t v;
        memcpy(&v, s + i, 8);
        v = KW_BE64(v);
        memcpy(w, &B64PAIRS[(v >> 52) & 4095], 2);
        memcpy(w + 2, &B64PAIRS[(v >> 40) & 4095], 2);
        memcpy(w + 4, &B64PAIRS[(v >> 28) & 4095], 2);
        memcpy(w + 6, &B64PAIRS[(v >> 16) & 4095], 2);
        w += 8;
    }
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        memcpy(w, &B64PAIRS[v >> 12], 2);
        memcpy(w + 2, &B64PAIRS[v & 4095], 2);
        w += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        w[0] = B64[v >> 18];
        w[1] = B64[(v >> 12) & 63];
        w[2] = '=';
        w[3] = '=';
        w += 4;
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        w[0] = B64[v >> 18];
        w[1] = B64[(v >> 12) & 63];
        w[2] = B64[(v >> 6) & 63];
        w[3] = '=';
        w += 4;
    }
    return w;
}

/* JSON string body of valid UTF-8 as Python's json.dumps(ensure_ascii=False) writes it. */
static char *put_json_str(char *w, const unsigned char *s, size_t n) {
    static const char HEX[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *w++ = (char)c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        default:
            *w++ = 'u'; *w++ = '0'; *w++ = '0';
            *w++ = HEX[c >> 4]; *w++ = HEX[c & 15];
        }
    }
    return w;
}

/* s[0:n) copied to w if it is valid UTF-8 (else NULL): ASCII runs go 16 bytes per step */
static inline char *put_utf8(char *w, const unsigned char *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint64_t a, b;
        memcpy(&a, s + i, 8);
        memcpy(&b, s + i + 8, 8);
        if ((a | b) & 0x8080808080808080ULL) break;
        memcpy(w + i, &a, 8);
        memcpy(w + i + 8, &b, 8);
    }
    if (i < n) {
        if (!kw_utf8_valid(s + i, n - i)) return NULL;
        memcpy(w + i, s + i, n - i);
    }
    return w + n;
}

/* ---- records ------------------------------------------------------------------------- */
#define FAIL(c, at) do { err->code = (c); err->pos = (int64_t)((at) - buf); goto fail; } while (0)
int kwd_records(kwd_out *out, const unsigned char *buf, size_t start, size_t end, int64_t count,
                int64_t base_offset, int64_t last_offset, int64_t base_ts, int64_t max_ts,
                int lat, int64_t base_seq, int mode, int64_t *prev, kwd_gaps *gaps, kwd_err *err) {
    const unsigned char *p = buf + start, *e = buf + end;
    const int json = mode & KWD_JSON, print = mode & KWD_PRINT, shallow = mode & KWD_SHALLOW;
    int64_t last = *prev;
    size_t out0 = out->len, gaps0 = gaps->n;
    numcache c_off = {0, 0, {0}}, c_ts = {0, 0, {0}}, c_seq = {0, 0, {0}};
    err->has_offset = 0;
    err->offset = err->a = err->b = 0;
    if (count < 0 || (count > 0 && count > (int64_t)((end - start) / 7))) {
        err->a = count;
        err->b = (int64_t)(end - start);
        err->offset = base_offset;
        err->has_offset = 1;
        FAIL(KWE_COUNT, p);
    }
    kw_cursor cur = {buf, p, e};
    for (int64_t i = 0; i < count; i++) {
        kw_record r;
        if (kw_record_read(&cur, &r, KW_WALK_UTF8 | KW_WALK_RANGE, base_offset, last_offset)
                != KWR_OK) {
            static const int codes[] = {
                [KWR_LENGTH] = KWE_REC_LENGTH, [KWR_PAST_END] = KWE_REC_PAST_END,
                [KWR_OFFSET_RANGE] = KWE_RANGE, [KWR_KEY_LENGTH] = KWE_KEY_LEN,
                [KWR_KEY_PAST] = KWE_KEY_PAST, [KWR_VALUE_LENGTH] = KWE_VALUE_LEN,
                [KWR_VALUE_PAST] = KWE_VALUE_PAST, [KWR_HEADER_COUNT] = KWE_HEADER_COUNT,
                [KWR_HKEY_LENGTH] = KWE_HKEY_LEN, [KWR_HKEY_UTF8] = KWE_HKEY_UTF8,
                [KWR_HVALUE_LENGTH] = KWE_HVALUE_LEN, [KWR_HVALUE_PAST] = KWE_HVALUE_PAST,
                [KWR_FIELDS] = KWE_FIELDS};
            err->has_offset = r.has_offset;
            err->offset = base_offset + (int64_t)r.off_delta;   /* (in range when has_offset) */
            switch (r.err) {
            case KWR_VARINT: FAIL(r.varint_err == 1 ? KWE_VARINT_TRUNC : KWE_VARINT_LONG, r.at);
            case KWR_LENGTH: case KWR_PAST_END: err->a = r.length; break;
            case KWR_OFFSET_RANGE: err->a = r.off_delta; break;
            case KWR_KEY_LENGTH: err->a = r.klen; break;
            case KWR_VALUE_LENGTH: err->a = r.vlen; break;
            case KWR_HEADER_COUNT: err->a = r.nh; break;
            case KWR_HKEY_LENGTH: case KWR_HVALUE_LENGTH: err->a = r.bad; break;
            case KWR_FIELDS: err->a = r.length; err->b = r.bad; break;
            default: break;
            }
            FAIL(codes[r.err], r.at);
        }
        const unsigned char *rec = r.start, *re = r.end;
        int32_t length = r.length, off_delta = r.off_delta, klen = r.klen, vlen = r.vlen;
        int32_t nh = r.nh;
        int64_t ts_delta = r.ts_delta;
        int64_t offset = base_offset + (int64_t)off_delta;
        const unsigned char *key = r.key, *val = r.value, *hdrs = r.headers;
        p = re;
        err->offset = offset;
        err->has_offset = 1;
        int64_t ts;
        if (lat) {
            ts = max_ts;
        } else if (add_ovf(base_ts, ts_delta, &ts)) {
            FAIL(KWE_TS_OVERFLOW, rec);
        }
        if (shallow) continue;
        if (last != -1 && offset != last + 1) {
            if (gap_add(gaps, last, offset)) goto nomem;
        }
        last = offset;

        /* ---- render (room: fixed part + every byte of the record, grown for JSON/base64) */
        size_t need = 320 + (size_t)length * (json ? 8 : 2) + (size_t)nh * 32;
        int room = out_reserve(out, need);
        if (room) {
            out->len = out0;
            gaps->n = gaps0;
            return room == -2 ? KWD_ROOM : KWD_NOMEM;
        }
        char *w = out->p + out->len;
        const unsigned char *hp = hdrs;
        if (json) {
            w = PUTS(w, "{\"type\":\"record\",\"offset\":");
            w = put_i64_c(w, offset, &c_off);
            w = PUTS(w, ",\"timestamp\":");
            w = put_i64_c(w, ts, &c_ts);
            w = lat ? PUTS(w, ",\"timestampType\":\"LogAppendTime\",\"key\":")
                    : PUTS(w, ",\"timestampType\":\"CreateTime\",\"key\":");
            if (klen < 0) { w = PUTS(w, "null"); }
            else { *w++ = '"'; w = put_b64(w, key, (size_t)klen); *w++ = '"'; }
            w = PUTS(w, ",\"value\":");
            if (vlen < 0) { w = PUTS(w, "null"); }
            else { *w++ = '"'; w = put_b64(w, val, (size_t)vlen); *w++ = '"'; }
            w = PUTS(w, ",\"headers\":[");
            for (int32_t h = 0; h < nh; h++) {
                const unsigned char *hk, *hv;
                int32_t hkl, hvl;
                kw_header_next(&hp, re, &hk, &hkl, &hv, &hvl);
                if (h) *w++ = ',';
                w = PUTS(w, "[\"");
                w = put_json_str(w, hk, (size_t)hkl);
                w = PUTS(w, "\",");
                if (hvl < 0) { w = PUTS(w, "null"); }
                else { *w++ = '"'; w = put_b64(w, hv, (size_t)hvl); *w++ = '"'; }
                *w++ = ']';
            }
            w = PUTS(w, "]}\n");
        } else {
            int64_t seq = -1;
            if (base_seq >= 0) {
                int64_t d = off_delta;
                seq = base_seq > INT32_MAXV - d ? d - (INT32_MAXV - base_seq) - 1 : base_seq + d;
            }
            w = PUTS(w, "| offset: ");
            w = put_i64_c(w, offset, &c_off);
            w = lat ? PUTS(w, " LogAppendTime: ") : PUTS(w, " CreateTime: ");
            w = put_i64_c(w, ts, &c_ts);
            w = PUTS(w, " keySize: ");
            w = put_i64(w, klen);
            w = PUTS(w, " valueSize: ");
            w = put_i64(w, vlen);
            w = PUTS(w, " sequence: ");
            w = put_i64_c(w, seq, &c_seq);
            w = PUTS(w, " headerKeys: [");
            for (int32_t h = 0; h < nh; h++) {
                const unsigned char *hk, *hv;
                int32_t hkl, hvl;
                kw_header_next(&hp, re, &hk, &hkl, &hv, &hvl);
                if (h) *w++ = ',';
                w = put_mem(w, hk, (size_t)hkl);
            }
            *w++ = ']';
            if (print) {  /* text needing Java's UTF-8 replacement: the general path's */
                if (klen >= 0) {
                    w = PUTS(w, " key: ");
                    if (!(w = put_utf8(w, key, (size_t)klen))) goto general;
                }
                if (vlen >= 0) {
                    w = PUTS(w, " payload: ");
                    if (!(w = put_utf8(w, val, (size_t)vlen))) goto general;
                }
            }
            *w++ = '\n';
        }
        out->len = (size_t)(w - out->p);
    }
    if (p != e) {
        err->a = (int64_t)(e - p);
        err->b = count;
        err->has_offset = 0;
        FAIL(KWE_LEFTOVER, p);
    }
    *prev = last;
    return KWD_OK;
nomem:
    out->len = out0;
    gaps->n = gaps0;
    return KWD_NOMEM;
general:
    out->len = out0;
    gaps->n = gaps0;
    return KWD_GENERAL;
fail:
    out->len = out0;
    gaps->n = gaps0;
    return KWD_CORRUPT;
}

/* ---- batches ------------------------------------------------------------------------- */
static char *put_batch_line(char *w, const unsigned char *b, int64_t position, int64_t size,
                            int json) {
    int64_t base_offset = kw_be_i64(b);
    int32_t ple = kw_be_i32(b + 12);
    uint32_t crc = kw_be_u32(b + 17);
    unsigned attrs = (unsigned)(uint16_t)kw_be_i16(b + 21);
    int32_t last_delta = kw_be_i32(b + 23);
    int64_t first_ts = kw_be_i64(b + 27);
    int64_t max_ts = kw_be_i64(b + 35);
    int64_t pid = kw_be_i64(b + 43);
    int16_t pepoch = kw_be_i16(b + 51);
    int32_t base_seq = kw_be_i32(b + 53);
    int32_t count = kw_be_i32(b + 57);
    int64_t last_offset = base_offset + last_delta;
    int txn = (attrs & 0x10) != 0;
    if (json) {
        w = PUTS(w, "{\"type\":\"batch\",\"baseOffset\":");
        w = put_i64(w, base_offset);
        w = PUTS(w, ",\"lastOffset\":");
        w = put_i64(w, last_offset);
        w = PUTS(w, ",\"magic\":2,\"compresscodec\":\"none\",\"isTransactional\":");
        w = txn ? PUTS(w, "true") : PUTS(w, "false");
        w = PUTS(w, ",\"isControl\":false,\"producerId\":");
        w = put_i64(w, pid);
        w = PUTS(w, ",\"producerEpoch\":");
        w = put_i64(w, pepoch);
        w = PUTS(w, ",\"baseSequence\":");
        w = put_i64(w, base_seq);
        w = PUTS(w, ",\"partitionLeaderEpoch\":");
        w = put_i64(w, ple);
        w = PUTS(w, ",\"position\":");
        w = put_i64(w, position);
        w = PUTS(w, ",\"size\":");
        w = put_i64(w, size);
        w = PUTS(w, ",\"crc\":");
        w = put_u64(w, crc);
        w = PUTS(w, ",\"isvalid\":true}\n");
        return w;
    }
    int64_t last_seq = -1;
    if (base_seq >= 0) {
        int64_t d = last_delta;
        last_seq = base_seq > INT32_MAXV - d ? d - (INT32_MAXV - base_seq) - 1 : base_seq + d;
    }
    w = PUTS(w, "baseOffset: ");
    w = put_i64(w, base_offset);
    w = PUTS(w, " lastOffset: ");
    w = put_i64(w, last_offset);
    w = PUTS(w, " count: ");
    w = put_i64(w, count);
    w = PUTS(w, " baseSequence: ");
    w = put_i64(w, base_seq);
    w = PUTS(w, " lastSequence: ");
    w = put_i64(w, last_seq);
    w = PUTS(w, " producerId: ");
    w = put_i64(w, pid);
    w = PUTS(w, " producerEpoch: ");
    w = put_i64(w, pepoch);
    w = PUTS(w, " partitionLeaderEpoch: ");
    w = put_i64(w, ple);
    w = PUTS(w, " isTransactional: ");
    w = txn ? PUTS(w, "true") : PUTS(w, "false");
    w = PUTS(w, " isControl: false deleteHorizonMs: ");
    if (attrs & 0x40) {
        w = PUTS(w, "OptionalLong[");
        w = put_i64(w, first_ts);
        *w++ = ']';
    } else {
        w = PUTS(w, "OptionalLong.empty");
    }
    w = PUTS(w, " position: ");
    w = put_i64(w, position);
    w = (attrs & 0x08) ? PUTS(w, " LogAppendTime: ") : PUTS(w, " CreateTime: ");
    w = put_i64(w, max_ts);
    w = PUTS(w, " size: ");
    w = put_i64(w, size);
    w = PUTS(w, " magic: 2 compresscodec: none crc: ");
    w = put_u64(w, crc);
    w = PUTS(w, " isvalid: true\n");
    return w;
}

int kwd_batches(kwd_out *out, const unsigned char *buf, size_t start, size_t end, int mode,
                int64_t base_position, size_t max_output, int64_t *prev, kwd_gaps *gaps,
                size_t *stop) {
    size_t pos = start;
    kwd_err err;
    while (pos < end) {
        if (pos > start && out->len >= max_output) { *stop = pos; return KWD_FULL; }
        const unsigned char *b = buf + pos;
        if (end - pos < 61) break;
        int32_t length = kw_be_i32(b + 8);
        if (length < 49 || (size_t)length > end - pos - 12) break;
        size_t size = (size_t)length + 12;
        if (b[16] != 2) break;
        unsigned attrs = (unsigned)(uint16_t)kw_be_i16(b + 21);
        if (attrs & 0x27) break;                      /* compressed or control */
        int64_t base_offset = kw_be_i64(b);
        int32_t last_delta = kw_be_i32(b + 23);
        int32_t count = kw_be_i32(b + 57);
        int64_t last_offset, position;
        if (last_delta < 0 || count < 0) break;
        if (add_ovf(base_offset, (int64_t)last_delta, &last_offset)) break;
        if (add_ovf(base_position, (int64_t)pos, &position)) break;
        if (kw_crc32c(0, b + 21, size - 21) != kw_be_u32(b + 17)) break;
        size_t out0 = out->len, gaps0 = gaps->n;
        int64_t last = *prev;
        int room = out_reserve(out, 1024);
        if (room) { *stop = pos; return room == -2 ? KWD_ROOM : KWD_NOMEM; }
        char *w = put_batch_line(out->p + out->len, b, position, (int64_t)size, mode & KWD_JSON);
        out->len = (size_t)(w - out->p);
        int r = kwd_records(out, buf, pos + 61, pos + size, count, base_offset, last_offset,
                            kw_be_i64(b + 27), kw_be_i64(b + 35), (attrs & 0x08) != 0,
                            kw_be_i32(b + 53), mode, &last, gaps, &err);
        if (r != KWD_OK) {
            out->len = out0;
            gaps->n = gaps0;
            if (r == KWD_NOMEM || r == KWD_ROOM) { *stop = pos; return r; }
            break;
        }
        *prev = last;
        pos += size;
    }
    *stop = pos;
    return pos < end ? KWD_GENERAL : KWD_OK;
}
