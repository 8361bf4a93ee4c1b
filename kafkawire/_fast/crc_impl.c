/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Three implementations, chosen once at run time:
 *  - x86-64 with SSE4.2: the crc32 instruction on three interleaved streams
 *    (it has 3-cycle latency and 1-cycle throughput, so three independent
 *    streams keep it busy), recombined with "shift by N zero bytes" tables;
 *  - ARMv8 with the CRC extension: __crc32cd, same interleaving;
 *  - otherwise slicing-by-8 tables.
 * The register update without pre/post inversion is linear over GF(2), so
 * crc(A||B) = shift(crc(A), |B|) ^ crc_from_zero(B), which is what the
 * recombination uses.
 */
#include "crc_impl.h"
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KW_X86 1
#include <nmmintrin.h>
#endif
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define KW_ARM 1
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif
#endif

#define POLY 0x82F63B78u
#define LONG_BLOCK 8192   /* bytes per stream in the long loop (batch-sized inputs use the short one) */
#define SHORT_BLOCK KW_CRC32C_STRIDE   /* bytes per stream in the short loop (256): streams
                             256 B apart stay within a page or two, which the hardware
                             prefetcher follows better than three far-apart streams when
                             data comes from RAM */

static uint32_t table8[8][256];
static uint32_t shift_long[4][256];   /* shift a register by LONG_BLOCK zero bytes */
static uint32_t shift_short[4][256];  /* shift a register by SHORT_BLOCK zero bytes */
static int initialised = 0;
static int impl = 0;          /* 0 table, 1 sse4.2, 2 armv8 */
static int force_sw = 0;

static uint32_t shift_zeros_slow(uint32_t reg, size_t n) {
    while (n--) reg = table8[0][reg & 0xff] ^ (reg >> 8);
    return reg;
}

static void make_shift_table(uint32_t t[4][256], size_t nbytes) {
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) basis[bit] = shift_zeros_slow((uint32_t)1 << bit, nbytes);
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1 << i)) v ^= basis[8 * k + i];
            t[k][b] = v;
        }
    }
}

static inline uint32_t apply_shift(uint32_t t[4][256], uint32_t reg) {
    return t[0][reg & 0xff] ^ t[1][(reg >> 8) & 0xff] ^ t[2][(reg >> 16) & 0xff] ^ t[3][reg >> 24];
}

static void init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table8[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = table8[0][i];
        for (int k = 1; k < 8; k++) {
            c = table8[0][c & 0xff] ^ (c >> 8);
            table8[k][i] = c;
        }
    }
    make_shift_table(shift_long, LONG_BLOCK);
    make_shift_table(shift_short, SHORT_BLOCK);
#if defined(KW_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) impl = 1;
#elif defined(KW_ARM)
#if defined(__linux__)
    if (getauxval(AT_HWCAP) & HWCAP_CRC32) impl = 2;
#elif defined(__APPLE__)
    impl = 2;  /* every Apple arm64 CPU has the CRC extension */
#endif
#endif
    initialised = 1;
}

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;  /* the stream is little-endian on both hardware paths */
}

/* Slicing-by-8 on the raw register. */
static uint32_t sw_reg(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = table8[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = table8[7][lo & 0xff] ^ table8[6][(lo >> 8) & 0xff] ^ table8[5][(lo >> 16) & 0xff] ^
            table8[4][lo >> 24] ^ table8[3][p[4]] ^ table8[2][p[5]] ^ table8[1][p[6]] ^ table8[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = table8[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(KW_X86)
__attribute__((target("sse4.2")))
static uint32_t hw_reg(uint32_t c0, const unsigned char *p, size_t n) {
    uint64_t c = c0;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 3 * LONG_BLOCK) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + LONG_BLOCK;
        do {
            c = _mm_crc32_u64(c, load64(p));
            c1 = _mm_crc32_u64(c1, load64(p + LONG_BLOCK));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * LONG_BLOCK));
            p += 8;
        } while (p < end);
        c = apply_shift(shift_long, (uint32_t)c) ^ c1;
        c = apply_shift(shift_long, (uint32_t)c) ^ c2;
        p += 2 * LONG_BLOCK;
        n -= 3 * LONG_BLOCK;
    }
    while (n >= 3 * SHORT_BLOCK) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + SHORT_BLOCK;
        do {
            c = _mm_crc32_u64(c, load64(p));
            c1 = _mm_crc32_u64(c1, load64(p + SHORT_BLOCK));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * SHORT_BLOCK));
            p += 8;
        } while (p < end);
        c = apply_shift(shift_short, (uint32_t)c) ^ c1;
        c = apply_shift(shift_short, (uint32_t)c) ^ c2;
        p += 2 * SHORT_BLOCK;
        n -= 3 * SHORT_BLOCK;
    }
    while (n >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

#if defined(KW_ARM)
#if defined(__clang__)
__attribute__((target("crc")))
#else
__attribute__((target("+crc")))
#endif
static uint32_t hw_reg(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = __crc32cb(c, *p++);
        n--;
    }
    while (n >= 3 * SHORT_BLOCK) {
        uint32_t c1 = 0, c2 = 0;
        const unsigned char *end = p + SHORT_BLOCK;
        do {
            c = __crc32cd(c, load64(p));
            c1 = __crc32cd(c1, load64(p + SHORT_BLOCK));
            c2 = __crc32cd(c2, load64(p + 2 * SHORT_BLOCK));
            p += 8;
        } while (p < end);
        c = apply_shift(shift_short, c) ^ c1;
        c = apply_shift(shift_short, c) ^ c2;
        p += 2 * SHORT_BLOCK;
        n -= 3 * SHORT_BLOCK;
    }
    while (n >= 8) {
        c = __crc32cd(c, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--) c = __crc32cb(c, *p++);
    return c;
}
#endif

uint32_t kw_crc32c_sw(uint32_t crc, const unsigned char *buf, size_t len) {
    if (!initialised) init();
    return ~sw_reg(~crc, buf, len);
}

uint32_t kw_crc32c(uint32_t crc, const unsigned char *buf, size_t len) {
    if (!initialised) init();
#if defined(KW_X86) || defined(KW_ARM)
    if (impl && !force_sw) return ~hw_reg(~crc, buf, len);
#endif
    return ~sw_reg(~crc, buf, len);
}

const char *kw_crc32c_impl(void) {
    if (!initialised) init();
    if (force_sw || impl == 0) return "slicing-by-8";
    return impl == 1 ? "sse4.2" : "armv8-crc";
}

int kw_crc32c_x86_hw(void) {
    if (!initialised) init();
    return impl == 1 && !force_sw;
}

const uint32_t (*kw_crc32c_stride_shift(void))[256] {
    if (!initialised) init();
    return (const uint32_t (*)[256])shift_short;
}

int kw_crc32c_force_software(int on) {
    int prev = force_sw;
    if (!initialised) init();
    force_sw = on;
    return prev;
}
