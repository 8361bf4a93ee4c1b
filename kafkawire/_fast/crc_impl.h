/* CRC-32C (Castagnoli) with run-time CPU dispatch; see crc_impl.c. */
#ifndef KAFKAWIRE_CRC_IMPL_H
#define KAFKAWIRE_CRC_IMPL_H
#include <stddef.h>
#include <stdint.h>

/* Continue CRC-32C `crc` (a finished checksum, 0 to start) over len bytes. */
uint32_t kw_crc32c(uint32_t crc, const unsigned char *buf, size_t len);
/* Name of the implementation chosen at first use. */
const char *kw_crc32c_impl(void);
/* Force the table-driven fallback (tests compare both); returns previous state. */
int kw_crc32c_force_software(int on);
/* The table-driven fallback alone. */
uint32_t kw_crc32c_sw(uint32_t crc, const unsigned char *buf, size_t len);

/* For a kernel that computes a CRC-32C alongside other work (validate_impl.h), with the
 * crc32 instruction on three streams KW_CRC32C_STRIDE bytes apart as kw_crc32c does:
 * whether kw_crc32c uses x86-64's crc32 instruction now (SSE4.2, software not forced),
 * and the table shifting a raw register by KW_CRC32C_STRIDE zero bytes (four 256-entry
 * tables, one per register byte) to combine the streams. */
#define KW_CRC32C_STRIDE 256
int kw_crc32c_x86_hw(void);
const uint32_t (*kw_crc32c_stride_shift(void))[256];

#endif
