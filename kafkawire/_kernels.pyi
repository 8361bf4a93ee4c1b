"""Typed view of ``kafkawire._kernels``: every kernel name, typed by the compiled
modules' stubs (the pure twins have the same signatures; a test holds them equal)."""
from types import ModuleType
from typing import Dict, Optional, Tuple

from kafkawire._fast.crc import (
    crc32 as crc32,
    crc32c as crc32c,
    crc32c_impl as crc32c_impl,
)
from kafkawire._fast.varint import (
    read_unsigned_varint as read_unsigned_varint,
    read_unsigned_varlong as read_unsigned_varlong,
    read_varint as read_varint,
    read_varlong as read_varlong,
    size_of_unsigned_varint as size_of_unsigned_varint,
    size_of_varint as size_of_varint,
    size_of_varlong as size_of_varlong,
    write_unsigned_varint as write_unsigned_varint,
    write_unsigned_varlong as write_unsigned_varlong,
    write_varint as write_varint,
    write_varlong as write_varlong,
)
from kafkawire._fast.scan import (
    BatchHeader as BatchHeader,
    scan_batch_objects as scan_batch_objects,
    scan_batches as scan_batches,
)
from kafkawire._fast.records import (
    Record as Record,
    decode_legacy_messages as decode_legacy_messages,
    decode_records_v2 as decode_records_v2,
    decode_records_v2_as as decode_records_v2_as,
    encode_records_v2 as encode_records_v2,
    iter_records_v2 as iter_records_v2,
    validate_records_v2 as validate_records_v2,
    check_batch_v2 as check_batch_v2,
)
from kafkawire._fast.columnar import (
    ColumnBuilder as ColumnBuilder,
    columnar_payload as columnar_payload,
    columnar_payload_info as columnar_payload_info,
    columnar_scan as columnar_scan,
)
from kafkawire._fast.index import (
    buffer_is_zero as buffer_is_zero,
    offset_index_first_unordered as offset_index_first_unordered,
    offset_index_lookup as offset_index_lookup,
    offset_index_real_entries as offset_index_real_entries,
    records_find_timestamp as records_find_timestamp,
    time_index_first_unordered as time_index_first_unordered,
    time_index_lookup as time_index_lookup,
    time_index_real_entries as time_index_real_entries,
)
from kafkawire._fast.protocol import (
    decode_struct as decode_struct,
    encode_message as encode_message,
    encode_struct as encode_struct,
    read_uvarint as read_uvarint,
)
from kafkawire._fast.dumpfmt import (
    dump_batches as dump_batches,
    dump_records as dump_records,
)
from kafkawire._fast.accum import (
    Appender as Appender,
    RecordBuffer as RecordBuffer,
    Sticky as Sticky,
    encode_columns_into as encode_columns_into,
    frame_buffer as frame_buffer,
    recv_exact as recv_exact,
)

MODULES: Tuple[str, ...]
backend: str
fast_error: Optional[BaseException]

def _load(name: str) -> Dict[str, ModuleType]: ...
def fast_available() -> bool: ...
def use(name: str) -> None: ...
