"""Constants shared by both twins of the batch header scan kernel (``K.scan_batches``).

``scan_batches`` fills one int64 row per batch (v2) or top-level message (v0/v1);
these names index its columns, and ``OK`` .. ``CRC_MISMATCH`` are its status
codes.  See :mod:`kafkawire._pure.scan` for the full contract.
"""
from __future__ import annotations

# -- columns of the header array ------------------------------------------------
POSITION = 0                #: byte position of the batch in the scanned buffer (its offset field)
SIZE = 1                    #: total bytes, including the 12-byte offset+length prefix
BASE_OFFSET = 2             #: v2 base offset; v0/v1: the message's offset (== LAST_OFFSET)
LAST_OFFSET = 3             #: v2 base offset + last offset delta; v0/v1: the message's offset
MAGIC = 4                   #: 0, 1 or 2
ATTRIBUTES = 5              #: raw attributes (int16 for v2, int8 for v0/v1), not sign-extended
CRC = 6                     #: stored CRC, unsigned 32-bit (CRC-32C for v2, CRC-32 for v0/v1)
PARTITION_LEADER_EPOCH = 7  #: v2 only; -1 for v0/v1
FIRST_TIMESTAMP = 8         #: v2 base timestamp; v1 message timestamp; -1 for v0
MAX_TIMESTAMP = 9           #: v2 max timestamp; v1 message timestamp; -1 for v0
PRODUCER_ID = 10            #: v2 only; -1 for v0/v1
PRODUCER_EPOCH = 11         #: v2 only; -1 for v0/v1
BASE_SEQUENCE = 12          #: v2 only; -1 for v0/v1
RECORD_COUNT = 13           #: v2 record count; v0/v1: 1 uncompressed, -1 compressed wrapper
NFIELDS = 14

COLUMNS = ("POSITION", "SIZE", "BASE_OFFSET", "LAST_OFFSET", "MAGIC", "ATTRIBUTES", "CRC",
           "PARTITION_LEADER_EPOCH", "FIRST_TIMESTAMP", "MAX_TIMESTAMP", "PRODUCER_ID",
           "PRODUCER_EPOCH", "BASE_SEQUENCE", "RECORD_COUNT")

# -- status codes (why scanning stopped at stop_position) ----------------------
OK = 0              #: reached ``end`` exactly, or ``max_count`` batches were read
PARTIAL = 1         #: trailing partial batch at stop_position (<12 bytes left, or length past end)
CORRUPT_LENGTH = 2  #: length field below the minimum for its magic (0 = zero-filled tail)
BAD_MAGIC = 3       #: magic byte not 0, 1 or 2
CRC_MISMATCH = 4    #: stored CRC differs from the computed one (only when check_crc)

STATUS_NAMES = ("OK", "PARTIAL", "CORRUPT_LENGTH", "BAD_MAGIC", "CRC_MISMATCH")

# -- the format's sizes and attribute bits (declared in kafkawire._format) --------
from kafkawire._format import (  # noqa: E402,F401  (re-exported under the names used here)
    COMPRESSION_MASK, CONTROL_MASK, DELETE_HORIZON_MASK, LEGACY_COMPRESSION_MASK,
    LEGACY_TIMESTAMP_TYPE_MASK, LOG_OVERHEAD, MAGIC_OFFSET, TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK, V0_MIN_LENGTH, V1_MIN_LENGTH, V2_CRC_START, V2_HEADER_SIZE,
    V2_MIN_LENGTH,
)
from kafkawire._format import V2_RECORDS as V2_RECORDS_START  # noqa: E402

MIN_LENGTH = V0_MIN_LENGTH   #: below this no magic can be valid ("minimum record overhead")
