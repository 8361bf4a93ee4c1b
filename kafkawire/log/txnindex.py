"""The ``.txnindex`` file: aborted transactions whose abort marker sits in a segment.

Each 34-byte entry (Kafka's ``AbortedTxn``): int16 version (0), int64
producer id, int64 first offset, int64 last offset (the abort marker's
offset), int64 last stable offset at the time of the abort.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import List, Optional

from kafkawire.errors import IndexCorruptError

TXN_ENTRY_SIZE = 34
_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0


def parse_txn_index(data: bytes, path: str = "<txnindex>") -> List[AbortedTxn]:
    """Every entry of a ``.txnindex`` file's bytes; raise IndexCorruptError on a bad file."""
    if len(data) % TXN_ENTRY_SIZE:
        raise IndexCorruptError(f"{path}: size {len(data)} is not a multiple of {TXN_ENTRY_SIZE}; "
                                "the transaction index is damaged (recover rebuilds it from the log)")
    out = []
    for pos in range(0, len(data), TXN_ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != 0:
            raise IndexCorruptError(f"{path}: entry at position {pos} has unknown version {version}")
        if last < first:
            raise IndexCorruptError(f"{path}: entry at position {pos} ends ({last}) before it starts ({first})")
        out.append(AbortedTxn(pid, first, last, lso, version))
    return out


def read_txn_index(path: Optional[str]) -> List[AbortedTxn]:
    """Entries of the ``.txnindex`` at ``path`` ([] when there is none)."""
    if path is None or not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        return parse_txn_index(f.read(), path)


def pack_txn_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(txn.version, txn.producer_id, txn.first_offset, txn.last_offset,
                       txn.last_stable_offset)
