"""Typed interface of the batch scan kernels (``scan.pyx``; twin: ``kafkawire/_pure/scan.py``)."""
from typing import Any, List, Optional, Tuple, Type, TypeVar, Union

import numpy as np
from typing_extensions import Buffer

class BatchHeader:
    """A v2 batch header's fields; the front end subclasses it (adding no storage)."""
    _buf: Any
    _base_position: int
    _max_size: Optional[int]
    _control: Any
    _hooks: Optional[Tuple[Any, Any]]
    _pos: int
    size: int
    base_offset: int
    last_offset: int
    attributes: int
    crc: int
    partition_leader_epoch: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

_H = TypeVar("_H", bound=BatchHeader)

def scan_batches(buf: Buffer, start: int = 0, end: int = -1, max_count: int = -1,
                 check_crc: bool = False) -> Tuple[np.ndarray, int, int]: ...
def scan_batch_objects(buf: Buffer, start: int, end: int, max_count: int, check_crc: bool,
                       v2_type: Type[_H], base_position: Any, max_size: Any,
                       hooks: Optional[Tuple[Any, Any]] = None
                       ) -> Tuple[List[Union[_H, Tuple[int, ...]]], int, int, int]: ...
