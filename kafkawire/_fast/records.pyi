"""Typed interface of the record kernels (``records.pyx``; twin: ``kafkawire/_pure/records.py``)."""
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

from typing_extensions import Buffer

from kafkawire.errors import CorruptRecordError

Header = Tuple[str, Optional[bytes]]
OnError = Optional[Callable[[CorruptRecordError], BaseException]]

class Record:
    offset: int
    timestamp: int
    timestamp_type: str
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Header]
    def __init__(self, offset: int = 0, timestamp: int = -1, key: Optional[bytes] = None,
                 value: Optional[bytes] = None, headers: Optional[Iterable[Header]] = None,
                 timestamp_type: str = "CreateTime") -> None: ...

def decode_records_v2(buf: Buffer, start: int, end: int, count: int, base_offset: int,
                      base_timestamp: int, max_timestamp: int, timestamp_type: int,
                      on_error: OnError = None) -> List[Record]: ...
def decode_records_v2_as(cls: type, prefix: Tuple[Any, ...], suffix: Tuple[Any, ...],
                         buf: Buffer, start: int, end: int, count: int, base_offset: int,
                         base_timestamp: int, max_timestamp: int, timestamp_type: int,
                         on_error: OnError = None) -> List[Any]: ...
def iter_records_v2(buf: Buffer, start: int, end: int, count: int, base_offset: int,
                    base_timestamp: int, max_timestamp: int, timestamp_type: int,
                    on_error: OnError = None) -> Iterator[Record]: ...
def validate_records_v2(buf: Buffer, start: int, end: int, count: int, base_offset: int,
                        last_offset: int, on_error: OnError = None,
                        consecutive: bool = False) -> Optional[int]: ...
def check_batch_v2(buf: Buffer, position: int, size: int, crc: int, count: int,
                   base_offset: int, last_offset: int) -> bool: ...
def decode_legacy_messages(buf: Buffer, start: int, end: int, wrapper_offset: int,
                           wrapper_magic: int, wrapper_timestamp: int,
                           wrapper_timestamp_type: int, check_crc: bool) -> Any: ...
def encode_records_v2(offset_deltas: Sequence[int], timestamp_deltas: Sequence[int],
                      keys: Sequence[Optional[bytes]], values: Sequence[Optional[bytes]],
                      headers: Sequence[Optional[Iterable[Header]]]) -> bytes: ...
