/* The fast verdict of RecordBatch.validate() for an uncompressed v2 batch: its CRC-32C
 * and every record's structure, with no record objects.
 *
 * kw_v2_batch_ok() answers only "every check passes" (1) or "something fails" (0);
 * on 0 the caller runs the checked walker (framing_impl.h), which finds the exact
 * error and its position.  So this file decides no error message: it must only
 * never accept what the checked path refuses, nor refuse what it accepts.
 *
 * The CRC is kw_crc32c (crc_impl.c), then the records are walked.  The walk reads
 * each varint speculatively (a record whose end lies at least KW_FAST_MARGIN bytes
 * before the region's end may read past its own end, never past the region's),
 * keeps lengths in their zigzag form, skips keys, values and header values without
 * looking at them, and checks only what the checked walker checks: lengths within
 * the record and the region, header counts and lengths, UTF-8 header keys, offset
 * deltas within the batch's range, the record count, no bytes left over.  The
 * records near the region's end go to kw_record_read.  A record whose fields after the
 * offset delta have the layout of the last such fields walked in full (see kwv_tpl
 * below) is checked by comparing a few 8-byte windows instead of walking them: most
 * batches hold runs of records of one shape, and the walk's chain of dependent loads,
 * not its instruction count, is what made it slower than the CRC.
 *
 * On x86-64 with the crc32 instruction (what kw_crc32c uses then) the CRC runs inside
 * the walk: after each record, a fixed number of 8-byte steps of its three streams
 * (kw_crc32c's layout: aligned words, 768-byte blocks, streams 256 bytes apart), about
 * as many bytes as a record holds, so that the crc32 chains and the walk's loads and
 * compares overlap; what is left of the CRC is kw_crc32c's after the walk.  (With a walk that
 * chained every field's load to the previous one, this measured no faster; with the
 * templates it makes W8 about a quarter faster.)  Elsewhere: the CRC, then the walk.
 */
#ifndef KAFKAWIRE_VALIDATE_IMPL_H
#define KAFKAWIRE_VALIDATE_IMPL_H
#include "framing_impl.h"
#include "crc_impl.h"

/* A record starting and ending at least this many bytes before the region's end is
 * walked without per-byte bounds checks: each of its varints starts at most at the
 * record's end (else the walk fails at once) and reads at most 10 bytes, and a header
 * key's ASCII test reads 16. */
#define KW_FAST_MARGIN 16

#if defined(__GNUC__) || defined(__clang__)
#define KWV_LIKELY(x) __builtin_expect(!!(x), 1)
#define KWV_BAD(x) __builtin_expect(!!(x), 0)
#define KWV_INLINE inline __attribute__((always_inline))
#else
#define KWV_INLINE inline
#define KWV_LIKELY(x) (x)
#define KWV_BAD(x) (x)
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* One crc32 step on the 8 bytes at p.  Inline assembly rather than the SSE4.2
 * intrinsic: the walk that holds it is compiled for any x86-64 and runs this only when
 * kw_crc32c_x86_hw() says the CPU has the instruction. */
#define KWV_CRC_WALK 1
/* The CRC runs inside the walk for records of about 36 to 780 bytes on average (2 to 32
 * steps a record): below, the steps' loop costs more than the overlap saves (W6, 30-byte
 * records, 8% slower); above, there is little walk to overlap (W7, 10 KiB values). */
#define KWV_CRC_MIN_STEPS 2
#define KWV_CRC_MAX_STEPS 32
typedef uint64_t __attribute__((may_alias, aligned(1))) kwv_u64_unaligned;
#define KWV_CRC32_U64(c, p) \
    __asm__("crc32q %1, %0" : "+r"(c) : "m"(*(const kwv_u64_unaligned *)(p)))
#define KWV_CRC32_U8(c, p) __asm__("crc32b %1, %k0" : "+r"(c) : "m"(*(p)))
#else
#define KWV_CRC_WALK 0
#endif

/* The raw (still zigzag-encoded) 32-bit varint at p (at least 10 readable bytes): its
 * value and the byte after it; kw_varint32's rules (five bytes at most, the bits past
 * 32 dropped).  The walk reads lengths in their zigzag form: an even z is the length
 * z / 2, z == 1 is -1 (null), any other odd z a length below -1.  An overlong varint
 * reads as 3 (a length of -2, an offset delta of -2), which every check refuses. */
static inline const unsigned char *kwv_u32(const unsigned char *p, uint32_t *out) {
    uint32_t b0 = p[0], b1;
    if (KWV_LIKELY(b0 < 0x80)) {
        *out = b0;
        return p + 1;
    }
    b1 = p[1];
    if (KWV_LIKELY(b1 < 0x80)) {
        *out = (b0 & 0x7f) | (b1 << 7);
        return p + 2;
    }
    {
        uint64_t r;
        int err = 0;
        const unsigned char *q = kw_uvarint64(p, p + 10, 5, &r, &err);
        if (q == NULL) {
            *out = 3;
            return p;
        }
        *out = (uint32_t)r;
        return q;
    }
}

/* Skip a varlong at p (at least 10 readable bytes): the byte after it, or NULL when
 * it is overlong (more than 10 bytes). */
static inline const unsigned char *kwv_skip64(const unsigned char *p) {
    if (KWV_LIKELY(p[0] < 0x80)) return p + 1;
    if (KWV_LIKELY(p[1] < 0x80)) return p + 2;
    for (int i = 2; i < 10; i++)
        if (p[i] < 0x80) return p + i + 1;
    return NULL;
}

/* Whether the n bytes at p are valid UTF-8, reading 16 bytes at p whatever n is (the
 * caller knows they are readable): header keys are short and mostly ASCII. */
static inline int kwv_utf8(const unsigned char *p, int32_t n) {
    if (KWV_LIKELY(n <= 16)) {
        uint64_t a, b, ma, mb;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        /* keep the first n bytes (little-endian order: the low bytes come first) */
        ma = n >= 8 ? ~0ull : (1ull << (8 * n)) - 1;
        mb = n >= 16 ? ~0ull : n <= 8 ? 0 : (1ull << (8 * (n - 8))) - 1;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        a = KW_BSWAP64(a);
        b = KW_BSWAP64(b);
#endif
        if (KWV_LIKELY((((a & ma) | (b & mb)) & 0x8080808080808080ull) == 0)) return 1;
    }
    return kw_utf8_valid(p, (size_t)n);
}

/* The walk's state: the next record, the records still expected, and the checks'
 * parameters. */
typedef struct {
    const unsigned char *p;        /* the next record's first byte */
    const unsigned char *end;      /* the records region's end */
    const unsigned char *fast_end; /* records ending at or before this are walked fast */
    const unsigned char *stop;     /* ... when they start before this (their length varint
                                      and 6 bytes lie before fast_end) */
    int64_t left;                  /* records still to read */
    uint64_t max_delta;            /* last_offset - base_offset */
    int64_t base_offset, last_offset;
    /* the CRC run alongside (kwv_walk_records_crc): kw_crc32c's three streams */
    const unsigned char *cblk;     /* the current 768-byte block */
    const unsigned char *clast;    /* blocks start before this (they end within the batch) */
    unsigned cstep;                /* 8-byte steps done in the block, 0..31 */
    int csteps;                    /* steps to take after each record */
    uint64_t c0, c1, c2;           /* the streams' raw registers */
    const uint32_t (*shift)[256];  /* kw_crc32c_stride_shift() */
} kwv_walk;

/* Read the record at w->p the checked way (kw_record_read): 1 and past it when it
 * passes.  For the records near the region's end. */
static int kwv_checked_one(kwv_walk *w) {
    kw_cursor c;
    kw_record r;
    c.base = w->p;
    c.p = w->p;
    c.end = w->end;
    if (kw_record_read(&c, &r, KW_WALK_UTF8 | KW_WALK_RANGE, w->base_offset,
                       w->last_offset) != KWR_OK)
        return 0;
    w->p = c.p;
    w->left--;
    return 1;
}

/* q is past a field that must end within the record (at or before rend). */
#define KWV_PAST(q, rend) ((q) > (rend))

/* Skip a field whose zigzag length is z at q (z == 1: null); fail when the length is
 * below -1 or the field runs past rend. */
#define KWV_SKIP_FIELD(q, z, rend) do { \
        if (KWV_LIKELY(((z) & 1) == 0)) { \
            if (KWV_BAD((z) >> 1 > (uint64_t)((rend) - (q)))) return 0; \
            (q) += (z) >> 1; \
        } else if (KWV_BAD((z) != 1)) { \
            return 0; \
        } \
    } while (0)

/* Little-endian 64-bit load (the window layout below numbers bytes from the low end). */
static inline uint64_t kwv_ld64le(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = KW_BSWAP64(v);
#endif
    return v;
}

/* A record's tail: its fields after the offset delta (key, value, headers).  Producers
 * write runs of records whose tails have the same layout: the same length varints at
 * the same places, only the keys', values' and header values' bytes differ.  The walk
 * remembers the layout of the last tail it walked in full (a template): every length
 * varint's exact bytes and where each header key lies.  A tail of the same length whose
 * bytes at those places are the same varints, and whose header keys are ASCII, passes
 * every check the full walk makes, exactly as the template's tail did (each varint reads
 * the same value at the same place; the lengths are compared with the same distances
 * to the record's end; ASCII is UTF-8).  Anything else is walked in full.  The checks
 * read 8-byte windows at fixed distances from the tail's start: no chain of dependent
 * loads, unlike the walk. */
#define KWV_TPL_WINDOWS 12   /* 8-byte windows a template checks */
#define KWV_TPL_ITEMS 40     /* varints and 8-byte pieces of header keys a template covers */
#define KWV_TPL_KEY 32       /* longer header keys: no template */

typedef struct {
    uint32_t off;            /* from the tail's start */
    uint32_t n;              /* bytes, 1..8 */
    uint32_t exact;          /* 1: these bytes exactly (a varint); 0: their top bits clear */
} kwv_item;

typedef struct {
    ptrdiff_t tail;          /* the tail's length; -1: no template (an empty tail must be
                                walked, and fails) */
    int n;                   /* windows */
    uint32_t off[KWV_TPL_WINDOWS];
    uint64_t mask[KWV_TPL_WINDOWS], val[KWV_TPL_WINDOWS];
} kwv_tpl;

/* The template of the tail at q0 (tail bytes, which passed the full walk, the items it met). */
static void kwv_tpl_build(kwv_tpl *t, const unsigned char *q0, ptrdiff_t tail,
                          const kwv_item *it, int ni) {
    int n = 0;
    t->tail = -1;
    if (ni < 0) return;
    for (int i = 0; i < ni; i++) {
        uint32_t off = it[i].off, len = it[i].n, shift;
        uint64_t m;
        if (n == 0 || off + len > t->off[n - 1] + 8) {
            if (n == KWV_TPL_WINDOWS) return;
            t->off[n] = off;
            t->mask[n] = 0;
            t->val[n] = 0;
            n++;
        }
        shift = 8 * (off - t->off[n - 1]);
        m = (len >= 8 ? ~0ull : (1ull << (8 * len)) - 1) << shift;
        if (it[i].exact) {
            t->mask[n - 1] |= m;
            t->val[n - 1] |= kwv_ld64le(q0 + t->off[n - 1]) & m;
        } else {
            t->mask[n - 1] |= m & 0x8080808080808080ull;
        }
    }
    t->n = n;
    t->tail = tail;
}

/* Whether the tail at q (up to rend) has the template's layout. */
static inline int kwv_tpl_match(const kwv_tpl *t, const unsigned char *q,
                                const unsigned char *rend) {
    uint64_t diff = 0;
    if (rend - q != t->tail) return 0;
    for (int i = 0; i < t->n; i++)
        diff |= (kwv_ld64le(q + t->off[i]) & t->mask[i]) ^ t->val[i];
    return diff == 0;
}

/* Note an item of the tail starting at q0 (no template past KWV_TPL_ITEMS of them). */
#define KWV_ITEM(at, len, ex) do { \
        if (rec && ni >= 0) { \
            if (ni < KWV_TPL_ITEMS) { \
                it[ni].off = (uint32_t)((at) - q0); \
                it[ni].n = (uint32_t)(len); \
                it[ni].exact = (ex); \
                ni++; \
            } else { \
                ni = -1; \
            } \
        } \
    } while (0)

/* Walk the tail at q0 in full: 1 when it ends exactly at rend and passes every check.
 * The items it meets go to it[] (*nitems of them; -1 when no template can hold them). */
static KWV_INLINE int kwv_tail_walk(const unsigned char *q0, const unsigned char *rend,
                                    kwv_item *it, int *nitems, const int rec) {
    const unsigned char *q = q0, *v;
    uint32_t zk, zv, znh;
    int ni = 0;
    v = q;
    q = kwv_u32(q, &zk);
    if (KWV_BAD(KWV_PAST(q, rend))) return 0;
    KWV_ITEM(v, q - v, 1);
    KWV_SKIP_FIELD(q, zk, rend);
    v = q;
    q = kwv_u32(q, &zv);
    if (KWV_BAD(KWV_PAST(q, rend))) return 0;
    KWV_ITEM(v, q - v, 1);
    KWV_SKIP_FIELD(q, zv, rend);
    v = q;
    q = kwv_u32(q, &znh);
    if (KWV_BAD(KWV_PAST(q, rend))) return 0;
    KWV_ITEM(v, q - v, 1);
    if (znh != 0) {
        /* a header count: not negative (z even), and each header takes two bytes
         * at least, so the count bounds the loop by the record's bytes */
        if (KWV_BAD((znh & 1) || (znh >> 1) > (uint64_t)(rend - q))) return 0;
        for (uint32_t h = znh >> 1; h > 0; h--) {
            uint32_t zhk, zhv, k;
            v = q;
            q = kwv_u32(q, &zhk);
            if (KWV_BAD(KWV_PAST(q, rend) || (zhk & 1) || (zhk >> 1) > (uint64_t)(rend - q)))
                return 0;
            KWV_ITEM(v, q - v, 1);
            k = zhk >> 1;
            if (KWV_BAD(!kwv_utf8(q, (int32_t)k))) return 0;
            if (rec) {
                if (k > KWV_TPL_KEY) ni = -1;
                for (uint32_t j = 0; j < k; j += 8) KWV_ITEM(q + j, k - j < 8 ? k - j : 8, 0);
            }
            q += k;
            v = q;
            q = kwv_u32(q, &zhv);
            if (KWV_BAD(KWV_PAST(q, rend))) return 0;
            KWV_ITEM(v, q - v, 1);
            KWV_SKIP_FIELD(q, zhv, rend);
        }
    }
    *nitems = ni;
    return q == rend;
}
#undef KWV_ITEM

/* Shift a raw CRC register by KW_CRC32C_STRIDE zero bytes (t: kw_crc32c_stride_shift()). */
static inline uint32_t kwv_crc_shift(const uint32_t (*t)[256], uint32_t reg) {
    return t[0][reg & 0xff] ^ t[1][(reg >> 8) & 0xff] ^ t[2][(reg >> 16) & 0xff] ^ t[3][reg >> 24];
}

/* Walk the records still expected: 1 when all of them pass, 0 at the first that does
 * not (the caller then checks that nothing follows them).  With crc_on (a constant:
 * two copies are compiled), w->csteps CRC steps follow each record walked fast. */
static KWV_INLINE int kwv_walk_records_impl(kwv_walk *w, const int crc_on) {
    const unsigned char *p = w->p;
    const unsigned char *const fast_end = w->fast_end;
    const unsigned char *const stop = w->stop;
    /* an offset delta d in [0, max_delta] has the zigzag form 2d; rotated right by one
     * bit it is d, and any odd (negative) form is 2**31 or more */
    const uint32_t max_d = w->max_delta >= 0x7FFFFFFFu ? 0x7FFFFFFFu : (uint32_t)w->max_delta;
    int64_t left = w->left;
    int64_t hits = 0, builds = 0;
    kwv_tpl tpl;
    kwv_item items[KWV_TPL_ITEMS];
#if KWV_CRC_WALK
    const unsigned char *cblk = w->cblk, *const clast = w->clast;
    unsigned cstep = w->cstep;
    uint64_t c0 = w->c0, c1 = w->c1, c2 = w->c2;
    const int csteps = w->csteps;
    const uint32_t (*const shift)[256] = w->shift;
#endif
    (void)crc_on;
    tpl.tail = -1;
    tpl.n = 0;
    while (left > 0 && p < stop) {
        uint32_t zlen, zoff;
        const unsigned char *q, *rend;
        int ni;
        q = kwv_u32(p, &zlen);
        /* a length of at least 6 (z even, z >= 12) and the record ends at or before
         * fast_end (q + 6 <= fast_end here), else: the checked reader or a failure */
        if (KWV_BAD((zlen & 1) || (uint64_t)zlen - 12 > (uint64_t)(2 * (fast_end - q) - 12))) {
            if ((zlen & 1) || zlen < 12 || (int64_t)(zlen >> 1) > w->end - q) return 0;
            break;   /* it ends in the margin */
        }
        rend = q + (zlen >> 1);
        q = kwv_skip64(q + 1);                       /* attributes, timestampDelta */
        if (KWV_BAD(q == NULL || q > rend)) return 0;
        q = kwv_u32(q, &zoff);
        if (KWV_BAD(KWV_PAST(q, rend) || ((zoff >> 1) | (zoff << 31)) > max_d)) return 0;
        if (KWV_LIKELY(kwv_tpl_match(&tpl, q, rend))) {
            hits++;
        } else {
            /* a new template, unless templates keep failing in this batch */
            if (builds <= hits + 2) {
                if (KWV_BAD(!kwv_tail_walk(q, rend, items, &ni, 1))) return 0;
                builds++;
                kwv_tpl_build(&tpl, q, rend - q, items, ni);
            } else if (KWV_BAD(!kwv_tail_walk(q, rend, items, &ni, 0))) {
                return 0;
            }
        }
        p = rend;
        left--;
#if KWV_CRC_WALK
        if (crc_on) {
            int k = csteps;
            while (k > 0 && cblk < clast) {
                /* the steps left in this block, at most k of them */
                unsigned m = 32 - cstep;
                const unsigned char *cp, *ce;
                if (m > (unsigned)k) m = (unsigned)k;
                cp = cblk + 8 * cstep;
                ce = cp + 8 * m;
                do {
                    KWV_CRC32_U64(c0, cp);
                    KWV_CRC32_U64(c1, cp + KW_CRC32C_STRIDE);
                    KWV_CRC32_U64(c2, cp + 2 * KW_CRC32C_STRIDE);
                    cp += 8;
                } while (cp < ce);
                cstep += m;
                k -= (int)m;
                if (cstep == 32) {   /* the block's streams into one register */
                    c0 = kwv_crc_shift(shift, (uint32_t)c0) ^ c1;
                    c0 = kwv_crc_shift(shift, (uint32_t)c0) ^ c2;
                    c1 = c2 = 0;
                    cstep = 0;
                    cblk += 3 * KW_CRC32C_STRIDE;
                }
            }
        }
#endif
    }
#if KWV_CRC_WALK
    if (crc_on) {
        w->cblk = cblk;
        w->cstep = cstep;
        w->c0 = c0;
        w->c1 = c1;
        w->c2 = c2;
    }
#endif
    w->p = p;
    w->left = left;
    /* records in the margin (a record ending there is followed only by such records):
     * the checked reader */
    while (w->left > 0 && w->p < w->end)
        if (!kwv_checked_one(w)) return 0;
    return 1;
}

static int kwv_walk_records(kwv_walk *w) {
    return kwv_walk_records_impl(w, 0);
}

#if KWV_CRC_WALK
static int kwv_walk_records_crc(kwv_walk *w) {
    return kwv_walk_records_impl(w, 1);
}

/* The CRC the walk left: the rest of its block, then kw_crc32c from there. */
static uint32_t kwv_crc_finish(kwv_walk *w, const unsigned char *end) {
    uint64_t c0 = w->c0, c1 = w->c1, c2 = w->c2;
    const unsigned char *cp;
    if (w->cstep != 0) {
        for (cp = w->cblk + 8 * w->cstep; cp < w->cblk + KW_CRC32C_STRIDE; cp += 8) {
            KWV_CRC32_U64(c0, cp);
            KWV_CRC32_U64(c1, cp + KW_CRC32C_STRIDE);
            KWV_CRC32_U64(c2, cp + 2 * KW_CRC32C_STRIDE);
        }
        c0 = kwv_crc_shift(w->shift, (uint32_t)c0) ^ c1;
        c0 = kwv_crc_shift(w->shift, (uint32_t)c0) ^ c2;
        w->cblk += 3 * KW_CRC32C_STRIDE;
    }
    /* kw_crc32c continues a finished checksum: the raw register inverted */
    return kw_crc32c(~(uint32_t)c0, w->cblk, (size_t)(end - w->cblk));
}
#endif
#undef KWV_PAST
#undef KWV_SKIP_FIELD

/* Start a walk of the records region [start, end) holding `count` records with
 * offsets in [base_offset, last_offset]: 0 when the header already rules it out. */
static inline int kwv_walk_init(kwv_walk *w, const unsigned char *start,
                                const unsigned char *end, int64_t count,
                                int64_t base_offset, int64_t last_offset) {
    if (count < 0 || last_offset < base_offset) return 0;
    if (count > (end - start) / 7) return 0;       /* a record takes at least 7 bytes */
    w->p = start;
    w->end = end;
    w->fast_end = end - start > KW_FAST_MARGIN + 11 ? end - KW_FAST_MARGIN : start;
    w->stop = w->fast_end > start ? w->fast_end - 11 : start;
    w->left = count;
    w->max_delta = (uint64_t)last_offset - (uint64_t)base_offset;
    w->base_offset = base_offset;
    w->last_offset = last_offset;
    return 1;
}

/* Every record read and nothing after them. */
static inline int kwv_walk_done(const kwv_walk *w) {
    return w->left == 0 && w->p == w->end;
}

/* The records region [start, end) alone (no CRC): 1 when it passes every check. */
static inline int kw_v2_records_ok(const unsigned char *start, const unsigned char *end,
                                   int64_t count, int64_t base_offset, int64_t last_offset) {
    kwv_walk w;
    if (!kwv_walk_init(&w, start, end, count, base_offset, last_offset)) return 0;
    return kwv_walk_records(&w) && kwv_walk_done(&w);
}

/* 1 when the uncompressed v2 batch at b (size bytes, at least 61) passes the CRC
 * check against `crc` and the records check (see kw_v2_records_ok). */
static inline int kw_v2_batch_ok(const unsigned char *b, size_t size, uint32_t crc,
                                 int64_t count, int64_t base_offset, int64_t last_offset) {
    if (size < 61) return 0;
#if KWV_CRC_WALK
    {
        /* CRC steps per record: about a record's bytes (24 bytes a step, rounded) */
        int64_t steps = count > 0 ? ((int64_t)size - 21 + 12 * count) / (24 * count) : 0;
        if (steps >= KWV_CRC_MIN_STEPS && steps <= KWV_CRC_MAX_STEPS && kw_crc32c_x86_hw()) {
            kwv_walk w;
            if (!kwv_walk_init(&w, b + 61, b + size, count, base_offset, last_offset)) return 0;
            /* kw_crc32c's start: the register ~0, bytes one by one up to an 8-byte
             * boundary (its steps read aligned words), then whole blocks */
            w.c0 = 0xFFFFFFFFu;
            w.cblk = b + 21;
            while ((uintptr_t)w.cblk & 7) {
                KWV_CRC32_U8(w.c0, w.cblk);
                w.cblk++;
            }
            w.clast = b + size - w.cblk >= 3 * KW_CRC32C_STRIDE
                ? b + size - (3 * KW_CRC32C_STRIDE - 1) : w.cblk;
            w.cstep = 0;
            w.c1 = w.c2 = 0;
            w.shift = kw_crc32c_stride_shift();
            w.csteps = (int)steps;
            if (!kwv_walk_records_crc(&w) || !kwv_walk_done(&w)) return 0;
            return kwv_crc_finish(&w, b + size) == crc;
        }
    }
#endif
    if (kw_crc32c(0, b + 21, size - 21) != crc) return 0;
    return kw_v2_records_ok(b + 61, b + size, count, base_offset, last_offset);
}

#undef KWV_LIKELY
#undef KWV_BAD
#endif
