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

#endif
