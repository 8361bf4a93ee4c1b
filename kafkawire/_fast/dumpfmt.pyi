"""Typed interface of the dump formatting kernels (``dumpfmt.pyx``; twin: ``kafkawire/_pure/dumpfmt.py``)."""
from typing import List, Optional, Tuple

from typing_extensions import Buffer

def dump_batches(buf: Buffer, start: int, end: int, mode: int, base_position: int,
                 prev_offset: int, max_output: int
                 ) -> Tuple[bytes, int, int, int, List[Tuple[int, int]]]: ...
def dump_records(buf: Buffer, start: int, end: int, count: int, base_offset: int,
                 last_offset: int, base_timestamp: int, max_timestamp: int, timestamp_type: int,
                 base_sequence: int, mode: int, prev_offset: int
                 ) -> Tuple[Optional[bytes], int, List[Tuple[int, int]]]: ...
