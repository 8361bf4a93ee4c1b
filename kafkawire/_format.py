"""Kafka's record format, as numbers: the one Python declaration of its constants.

``kafkawire/_fast/format.pxd`` declares the same names for the compiled kernels
(``tests/test_kernels_boundary.py`` holds the two to the same values).  Positions
are byte offsets from the start of a batch (its offset field).
"""
from __future__ import annotations

# -- framing shared by every magic ------------------------------------------------
LOG_OVERHEAD = 12          #: offset (8) + length (4) before every batch / message
MAGIC_OFFSET = 16          #: the magic byte (signed int8; valid values 0, 1, 2)

# -- v2 batch header layout (KIP-98) --------------------------------------------
V2_BASE_OFFSET = 0         #: int64
V2_LENGTH = 8              #: int32, bytes after this field
V2_PARTITION_LEADER_EPOCH = 12   #: int32
V2_MAGIC = 16              #: int8
V2_CRC = 17                #: uint32, CRC-32C of attributes .. end
V2_ATTRIBUTES = 21         #: int16
V2_LAST_OFFSET_DELTA = 23  #: int32
V2_BASE_TIMESTAMP = 27     #: int64
V2_MAX_TIMESTAMP = 35      #: int64
V2_PRODUCER_ID = 43        #: int64
V2_PRODUCER_EPOCH = 51     #: int16
V2_BASE_SEQUENCE = 53      #: int32
V2_RECORD_COUNT = 57       #: int32
V2_RECORDS = 61            #: the records (possibly compressed) follow the header
V2_HEADER_SIZE = 61
V2_CRC_START = V2_ATTRIBUTES
V2_MIN_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD   #: 49: smallest legal v2 length field

# -- v0/v1 messages ---------------------------------------------------------------
V0_MIN_LENGTH = 14         #: crc 4 + magic 1 + attributes 1 + key len 4 + value len 4
V1_MIN_LENGTH = 22         #: V0_MIN_LENGTH + timestamp 8

# -- v2 attribute bits -------------------------------------------------------------
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
# -- v0/v1 attribute bits ----------------------------------------------------------
LEGACY_COMPRESSION_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_MASK = 0x08

# -- codecs ------------------------------------------------------------------------
CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
#: Codec names by id (attributes bits 0-2); ids 5-7 are undefined.
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

# -- timestamp types ---------------------------------------------------------------
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
TIMESTAMP_TYPE_NAMES = ("CreateTime", "LogAppendTime")

# -- control records (key: version int16, type int16) ------------------------------
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_TYPE_NAMES = {CONTROL_ABORT: "abort", CONTROL_COMMIT: "commit"}

#: Every integer constant above that ``format.pxd`` declares too.
INT_CONSTANTS = tuple(name for name, value in list(globals().items())
                      if name.isupper() and type(value) is int)
