"""Constants shared by the columnar kernel twins (``_fast/columnar.pyx``, ``_pure/columnar.py``)."""
from __future__ import annotations

from kafkawire import _format as F

#: ``columnar_scan`` / ``columnar_payload`` statuses.
DONE = 0        # reached the end of the range (or of the payload)
PARTIAL = 1     # a trailing partial batch starts at the returned position
FULL = 2        # the builder hit max_records/max_bytes: take() a chunk, then resume
COMPRESSED = 3  # the batch at the returned position needs decompressing (columnar_payload)
PAST_END = 4    # the batch at the returned position starts at/after end_offset

#: Column name, numpy dtype string and group, in the kernels' buffer order.
#: Groups: "rec" one per data record, "rec+1" record offsets (n+1), "data" bytes,
#: "hdr*" only with headers, "ctl" one per control record, "run" one per run of
#: consecutive records from the same batch (``run_start`` = its first row):
#: per-batch facts are stored once per run, not once per record.
COLUMNS = (
    ("offset", "int64", "rec"),
    ("timestamp", "int64", "rec"),
    ("timestamp_type", "int32", "rec"),
    ("key_offsets", "int32", "rec+1"),
    ("key_data", "uint8", "data"),
    ("key_valid", "bool", "rec"),
    ("value_offsets", "int32", "rec+1"),
    ("value_data", "uint8", "data"),
    ("value_valid", "bool", "rec"),
    ("run_start", "int64", "run"),
    ("run_transactional", "bool", "run"),
    ("run_base_offset", "int64", "run"),
    ("header_offsets", "int32", "hdr-rec+1"),
    ("header_valid", "bool", "hdr-rec"),
    ("header_key_offsets", "int32", "hdr+1"),
    ("header_key_data", "uint8", "hdr-data"),
    ("header_value_offsets", "int32", "hdr+1"),
    ("header_value_data", "uint8", "hdr-data"),
    ("header_value_valid", "bool", "hdr"),
    ("control_offset", "int64", "ctl"),
    ("control_producer_id", "int64", "ctl"),
    ("control_type", "int8", "ctl"),
    ("control_timestamp", "int64", "ctl"),
    ("run_producer_id", "int64", "run"),
)
COLUMN_NAMES = tuple(c[0] for c in COLUMNS)
HEADER_COLUMNS = frozenset(c[0] for c in COLUMNS if c[2].startswith("hdr"))
#: Columns holding Arrow offsets: they start with a 0 entry.
OFFSET_COLUMNS = frozenset(c[0] for c in COLUMNS if c[2].endswith("+1"))

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
#: Arrow ``binary`` uses int32 offsets: a chunk's data column stays below this.
MAX_CHUNK_BYTES = (1 << 31) - 1

# the format's sizes, under the names the columnar twins use (declared in kafkawire._format)
V2_HEADER = F.V2_HEADER_SIZE          # bytes of a v2 batch header, records follow
LOG_OVERHEAD = F.LOG_OVERHEAD         # offset + length fields before every batch/message
HEADER_UP_TO_MAGIC = F.MAGIC_OFFSET + 1
MIN_MESSAGE_V0 = F.V0_MIN_LENGTH      # crc, magic, attributes, key and value lengths
MIN_MESSAGE_V1 = F.V1_MIN_LENGTH      # + timestamp
MIN_BATCH_V2 = F.V2_MIN_LENGTH
