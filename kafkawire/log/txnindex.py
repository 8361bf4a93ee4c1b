"""The ``.txnindex`` file: aborted transactions whose abort marker sits in a segment.

Each 34-byte entry (Kafka's ``AbortedTxn``): int16 version (0), int64
producer id, int64 first offset, int64 last offset (the abort marker's
offset), int64 last stable offset at the time of the abort.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple, Union

from kafkawire.errors import IndexCorruptError, LogError
from kafkawire.log.files import sibling_path
from kafkawire.log.storage import Storage, storage_for

Buffer = Union[bytes, bytearray, memoryview]

TXN_ENTRY_SIZE = 34
TXN_ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True)
class AbortedTxn:
    """One aborted transaction: its producer, first offset, abort marker offset and the LSO then."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0


def iter_txn_index(data: Buffer, path: Optional[str] = None) -> Iterator[Tuple[int, AbortedTxn]]:
    """``(position, entry)`` for each entry of a ``.txnindex`` file's bytes, in file order.

    Raises IndexCorruptError on reaching an entry of an unknown version, and
    after the last whole entry when bytes are left over (so a dump can show
    what precedes the damage).
    """
    where = f"{path}: " if path else ""
    end = len(data) - len(data) % TXN_ENTRY_SIZE
    for pos in range(0, end, TXN_ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != TXN_ENTRY_VERSION:
            raise IndexCorruptError(f"{where}unexpected aborted transaction version {version} at "
                                    f"position {pos}; the index is damaged (Kafka rebuilds it "
                                    "from the log)")
        yield pos, AbortedTxn(pid, first, last, lso, version)
    if end != len(data):
        raise IndexCorruptError(f"{where}{len(data) - end} trailing bytes are not a whole entry of "
                                f"{TXN_ENTRY_SIZE} bytes; the index is damaged")


def parse_txn_index(data: Buffer, path: str = "<txnindex>") -> List[AbortedTxn]:
    """Every entry of a ``.txnindex`` file's bytes; raise IndexCorruptError on a bad file."""
    if len(data) % TXN_ENTRY_SIZE:
        raise IndexCorruptError(f"{path}: size {len(data)} is not a multiple of {TXN_ENTRY_SIZE}; "
                                "the transaction index is damaged (recover rebuilds it from the log)")
    out = []
    for pos, txn in iter_txn_index(data, path):
        if txn.last_offset < txn.first_offset:
            raise IndexCorruptError(f"{path}: entry at position {pos} ends ({txn.last_offset}) "
                                    f"before it starts ({txn.first_offset})")
        out.append(txn)
    return out


#: The smallest batch that can hold an abort marker (a v2 batch header): a segment of N
#: bytes has at most N // this + 1 aborted transactions ending in it.
_MIN_MARKER_BATCH = 61


#: What is read of a ``.txnindex`` whose ``.log`` is not there (Kafka's default
#: ``segment.index.bytes``).
NO_LOG_TXN_INDEX_LIMIT = 10 << 20


def txn_index_limit(log_size: int) -> int:
    """The most bytes a ``.txnindex`` of a ``log_size``-byte segment can hold."""
    return (max(log_size, 0) // _MIN_MARKER_BATCH + 1) * TXN_ENTRY_SIZE


def read_txn_index_file(path: str, *, storage: Optional[Storage] = None,
                        log_size: Optional[int] = None) -> Tuple[bytes, int, int]:
    """``(data, file_size, limit)``: the first ``limit`` bytes of a ``.txnindex``, where
    ``limit`` is what the index of its segment (``log_size`` bytes; the sibling
    ``.log``'s size when None) can hold, or :data:`NO_LOG_TXN_INDEX_LIMIT` without a ``.log``.  IndexCorruptError if it is not a regular file;
    FileNotFoundError when absent."""
    storage = storage or storage_for(path)
    if log_size is None:
        log = sibling_path(path, ".log")
        try:
            limit = txn_index_limit(storage.size(log))
        except (OSError, LogError):
            limit = NO_LOG_TXN_INDEX_LIMIT    # a file on its own: bounded all the same
    else:
        limit = txn_index_limit(log_size)
    try:
        data, size = storage.read_bounded(path, limit)
    except LogError as exc:
        raise IndexCorruptError(str(exc)) from None
    return data, size, limit


def read_txn_index(path: Optional[str], *, storage: Optional[Storage] = None, log_size: Optional[int] = None) -> List[AbortedTxn]:
    """Entries of the ``.txnindex`` at ``path`` ([] when there is none).

    Reads only what the index of its segment (``log_size`` bytes; the
    sibling ``.log``'s size when None) can hold: a larger file, or one that
    is not a regular file, raises IndexCorruptError.
    """
    if path is None:
        return []
    try:
        data, size, limit = read_txn_index_file(path, storage=storage, log_size=log_size)
    except FileNotFoundError:
        return []
    if size > limit:
        raise IndexCorruptError(f"{path}: size {size} is more than the {limit} bytes of aborted "
                                "transactions its segment can hold; the transaction index is "
                                "damaged (recover rebuilds it from the log)")
    return parse_txn_index(data, path)


def pack_txn_entry(txn: AbortedTxn) -> bytes:
    """The 34 bytes of ``txn`` in a ``.txnindex``."""
    return _ENTRY.pack(txn.version, txn.producer_id, txn.first_offset, txn.last_offset,
                       txn.last_stable_offset)
