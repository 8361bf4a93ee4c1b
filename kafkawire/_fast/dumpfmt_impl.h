/* Dump formatter core (see dumpfmt_impl.c and kafkawire/_pure/dumpfmt.py). */
#ifndef KAFKAWIRE_DUMPFMT_IMPL_H
#define KAFKAWIRE_DUMPFMT_IMPL_H
#include <stddef.h>
#include <stdint.h>

#define KWD_PRINT 1   /* --print-data-log: keys and payloads */
#define KWD_JSON 2    /* one JSON object per line */
#define KWD_SHALLOW 4 /* batch lines only (records still checked, for isvalid) */

/* results of kwd_records / kwd_batches */
#define KWD_OK 0
#define KWD_FULL 1        /* kwd_batches: output reached max_output (call again) */
#define KWD_GENERAL 2     /* needs the general (Python) path: e.g. Java's UTF-8 replacement */
#define KWD_CORRUPT 3     /* malformed records (err filled) */
#define KWD_NOMEM 4
#define KWD_ROOM 5        /* a fixed-capacity output is full before the batch at *stop */

/* output: malloc'ed and grown (fixed == 0), or caller-owned with a fixed capacity */
typedef struct { char *p; size_t len, cap; int fixed; } kwd_out;
typedef struct { int64_t *p; size_t n, cap; } kwd_gaps;   /* pairs (previous, current) */
typedef struct { int64_t pos; int64_t offset; int has_offset; int code; int64_t a, b; } kwd_err;

/* error codes (messages built by the caller) */
enum { KWE_COUNT = 1, KWE_REC_LENGTH, KWE_REC_PAST_END, KWE_VARINT_TRUNC, KWE_VARINT_LONG,
       KWE_KEY_LEN, KWE_KEY_PAST, KWE_VALUE_LEN, KWE_VALUE_PAST, KWE_HEADER_COUNT,
       KWE_HKEY_LEN, KWE_HKEY_UTF8, KWE_HVALUE_LEN, KWE_HVALUE_PAST, KWE_FIELDS,
       KWE_LEFTOVER, KWE_RANGE, KWE_TS_OVERFLOW };

/* build the lookup tables; call once before the others */
void kwd_init(void);

int kwd_records(kwd_out *out, const unsigned char *buf, size_t start, size_t end, int64_t count,
                int64_t base_offset, int64_t last_offset, int64_t base_ts, int64_t max_ts,
                int lat, int64_t base_seq, int mode, int64_t *prev, kwd_gaps *gaps, kwd_err *err);

int kwd_batches(kwd_out *out, const unsigned char *buf, size_t start, size_t end, int mode,
                int64_t base_position, size_t max_output, int64_t *prev, kwd_gaps *gaps,
                size_t *stop);
#endif
