"""Offset and time indexes: loading them untrusted, searching, and building them by Kafka's rules.

``.index``: 8-byte entries (int32 offset relative to the segment's base
offset, int32 byte position in the ``.log``).  An entry names the *last*
offset of an append and points at the append's *first* batch, so a lookup
gives a position from which a forward header scan reaches the target.
``.timeindex``: 12-byte entries (int64 timestamp, int32 relative offset):
the largest timestamp seen so far and the offset where it was first seen
(the batch's last offset on Kafka 3.9, the record's offset on older brokers).

Indexes are untrusted.  :func:`load_offset_index`/:func:`load_time_index`
apply Kafka's sanity checks (size a whole number of entries, entries
strictly increasing, positions inside the log, offsets not below the base)
and recognise the zero-filled preallocated tail of an active segment's
index; an index failing them is reported as untrusted (no entries) so the
segment can fall back to an index rebuilt in memory from the log.  These
are the only trust rules: every reader (``Segment``, the Spark planner, the
CLI's lookups) loads indexes through them.  Kafka's own, weaker
``sanityCheck`` (the dump tool's ``--index-sanity-check``) and the raw
entries of a file as written (for dumps) are here too.

Entries are searched in place by the index kernels, and are also available
as numpy arrays (:attr:`OffsetIndex.array` views the bytes; ``offsets`` and
``positions`` are converted once) for vectorised planning.
"""
from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple, Union

import numpy as np

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import IndexCorruptError, LogError, StorageError
from kafkawire.log.files import offset_from_file_name, sibling_path
from kafkawire.log.storage import Storage, storage_for

if TYPE_CHECKING:
    from numpy.typing import NDArray

#: An index's bytes (a file read whole, or a view of one).
Buffer = Union[bytes, bytearray, memoryview]

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
#: Kafka's default ``index.interval.bytes`` and ``segment.index.bytes``.
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024
NO_TIMESTAMP = -1
#: The largest index file Kafka can write: ``segment.index.bytes`` is an int.
MAX_INDEX_FILE_BYTES = 0x7FFFFFFF
#: The smallest a batch (a v0 message with its offset and length) can be: no segment holds
#: more batches, so no index of it more entries, than its size over this (plus one).
MIN_BATCH_BYTES = C.LOG_OVERHEAD + C.MIN_LENGTH
_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")
#: The entries as numpy sees them in the file (big-endian, no copy).
OFFSET_DTYPE = np.dtype([("rel", ">i4"), ("pos", ">i4")])
TIME_DTYPE = np.dtype([("ts", ">i8"), ("rel", ">i4")])


class _Index:
    """What the offset and time indexes share: a buffer of ``entries`` real entries."""

    entry_size = 0
    dtype = OFFSET_DTYPE

    def __init__(self, buf: Buffer, base_offset: int, entries: int, *, path: Optional[str] = None,
                 status: str = "ok", problem: Optional[str] = None) -> None:
        self.buf = buf
        self.base_offset = base_offset
        self.entries = entries
        self.path = path
        #: "ok" (file trusted), "absent", "corrupt" (not trusted: no entries), "rebuilt" (built
        #: in memory from the log), "unchecked" (every whole entry of the file, as written).
        self.status = status
        #: Why the file on disk was not trusted (None when it was).
        self.problem = problem
        self._array: Optional[np.ndarray] = None
        self._columns: Optional[Tuple[np.ndarray, np.ndarray]] = None

    def __len__(self) -> int:
        return self.entries

    def entry(self, slot: int) -> Tuple[int, int]:
        raise NotImplementedError

    @property
    def array(self) -> np.ndarray:
        """The entries as a structured numpy array viewing the index bytes (big-endian, no copy)."""
        if self._array is None:
            self._array = np.frombuffer(self.buf, self.dtype, count=self.entries)
        return self._array

    def _pair(self) -> Tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Tuple[int, int]]:
        a, b = self._pair()
        return zip(a.tolist(), b.tolist())


class OffsetIndex(_Index):
    """A searchable offset index over a buffer holding ``entries`` real entries."""

    entry_size = OFFSET_ENTRY_SIZE
    dtype = OFFSET_DTYPE

    def entry(self, slot: int) -> Tuple[int, int]:
        """``(absolute_offset, position)`` of entry ``slot``."""
        rel, pos = _OFF.unpack_from(self.buf, slot * OFFSET_ENTRY_SIZE)
        return self.base_offset + rel, pos

    def _pair(self) -> Tuple[np.ndarray, np.ndarray]:
        if self._columns is None:
            a = self.array
            self._columns = (a["rel"].astype(np.int64) + self.base_offset, a["pos"].astype(np.int64))
        return self._columns

    @property
    def offsets(self) -> np.ndarray:
        """Absolute offsets of the entries (int64, converted once and kept): for ``searchsorted``."""
        return self._pair()[0]

    @property
    def positions(self) -> np.ndarray:
        """``.log`` positions of the entries (int64, converted once and kept)."""
        return self._pair()[1]

    def lookup(self, offset: int) -> Tuple[int, int]:
        """Largest entry at or below ``offset`` as ``(offset, position)``; ``(base, 0)`` if none."""
        rel = offset - self.base_offset
        if rel < 0 or self.entries == 0:
            return self.base_offset, 0
        slot = K.offset_index_lookup(self.buf, self.entries, min(rel, 0x7FFFFFFF))
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)

    @property
    def last_offset(self) -> int:
        return self.entry(self.entries - 1)[0] if self.entries else self.base_offset


class TimeIndex(_Index):
    """A searchable time index over a buffer holding ``entries`` real entries."""

    entry_size = TIME_ENTRY_SIZE
    dtype = TIME_DTYPE

    def entry(self, slot: int) -> Tuple[int, int]:
        """``(timestamp, absolute_offset)`` of entry ``slot``."""
        ts, rel = _TIME.unpack_from(self.buf, slot * TIME_ENTRY_SIZE)
        return ts, self.base_offset + rel

    def _pair(self) -> Tuple[np.ndarray, np.ndarray]:
        if self._columns is None:
            a = self.array
            self._columns = (a["ts"].astype(np.int64), a["rel"].astype(np.int64) + self.base_offset)
        return self._columns

    @property
    def timestamps(self) -> np.ndarray:
        """Timestamps of the entries (int64, converted once and kept)."""
        return self._pair()[0]

    @property
    def offsets(self) -> np.ndarray:
        """Absolute offsets of the entries (int64, converted once and kept)."""
        return self._pair()[1]

    def lookup(self, timestamp: int) -> Tuple[int, int]:
        """Largest entry with timestamp <= ``timestamp``; ``(-1, base)`` if none (Kafka's rule)."""
        if self.entries == 0:
            return NO_TIMESTAMP, self.base_offset
        slot = K.time_index_lookup(self.buf, self.entries, timestamp)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self.entry(slot)

    @property
    def last_entry(self) -> Tuple[int, int]:
        return self.entry(self.entries - 1) if self.entries else (NO_TIMESTAMP, self.base_offset)


# -- trust --------------------------------------------------------------------------

def _real_entries(buf: Buffer, n: int, kind: str) -> Tuple[int, Optional[str]]:
    """Real-entry count and, if the tail after them is not zero-filled, why it is corrupt."""
    width = OFFSET_ENTRY_SIZE if kind == "offset" else TIME_ENTRY_SIZE
    real = (K.offset_index_real_entries if kind == "offset" else K.time_index_real_entries)(buf, n)
    if real < n and not K.buffer_is_zero(buf, real * width, n * width):
        return real, (f"entry {real} does not increase and the rest of the index is not a "
                      "zero-filled preallocation")
    return real, None


def index_read_limit(log_size: int, entry_size: int) -> int:
    """Bytes of an index that can hold real entries for a ``log_size``-byte segment.

    An index gets at most one entry per append (Kafka's ``index.interval.bytes`` rule;
    a time index one more on roll), and no segment holds more batches than its size
    over :data:`MIN_BATCH_BYTES`; what lies past this in a file is a zero-filled
    preallocation (Kafka's ``segment.index.bytes``) or damage, and is never read.
    """
    return (max(log_size, 0) // MIN_BATCH_BYTES + 2) * entry_size


def _read(path: Optional[str], storage: Optional[Storage], limit: int) -> Tuple[Optional[bytes], int, Optional[str]]:
    """``(first limit bytes, file size, problem)`` of an index file; ``(None, 0, None)``
    when there is none; the problem says why it cannot be an index at all."""
    if path is None:
        return None, 0, None
    try:
        data, size = (storage or storage_for(path)).read_bounded(path, limit)
    except FileNotFoundError:
        return None, 0, None
    except StorageError:
        raise                      # a remote read that failed: not a verdict on the file
    except (LogError, OSError) as exc:
        return b"", 0, str(exc)
    if size > MAX_INDEX_FILE_BYTES:
        return b"", size, (f"index file size {size} is larger than any index Kafka writes "
                           f"(segment.index.bytes is at most {MAX_INDEX_FILE_BYTES})")
    return data, size, None


def load_offset_index(path: Optional[str], base_offset: int, log_size: int, *,
                      trim_past_end: bool = False, storage: Optional[Storage] = None) -> OffsetIndex:
    """Open ``path`` as an offset index, or return one marked absent/corrupt (``status``).

    The index is trusted when its size is a whole number of entries, its
    entries rise strictly (offsets not below the base, positions inside the
    ``log_size``-byte log) up to a zero-filled preallocated tail.  With
    ``trim_past_end``, trailing entries pointing at or past ``log_size`` are
    dropped instead of condemning the index: a reader that mapped an active
    segment a moment before the broker appended (and indexed) more still
    gets a usable index for the prefix it sees.
    """
    buf, size, problem = _read(path, storage, index_read_limit(log_size, OFFSET_ENTRY_SIZE))
    if buf is None:
        return OffsetIndex(b"", base_offset, 0, path=path, status="absent", problem="no .index file")
    if problem is None and size % OFFSET_ENTRY_SIZE:
        problem = f"index file size {size} is not a multiple of {OFFSET_ENTRY_SIZE}"
    if problem is not None:
        return OffsetIndex(b"", base_offset, 0, path=path, status="corrupt", problem=problem)
    real, problem = _real_entries(buf, len(buf) // OFFSET_ENTRY_SIZE, "offset")
    if problem is None and real:
        bad = K.offset_index_first_unordered(buf, real, max(log_size, 0))
        if bad >= 0 and trim_past_end:
            # Real entries already rise strictly; if the first bad one is merely past the
            # mapped end, so are all after it.
            rel, pos = _OFF.unpack_from(buf, bad * OFFSET_ENTRY_SIZE)
            if rel >= 0 and pos >= log_size:
                real, bad = bad, -1
        if bad >= 0:
            rel, pos = _OFF.unpack_from(buf, bad * OFFSET_ENTRY_SIZE)
            problem = (f"entry {bad} (offset {base_offset + rel}, position {pos}) is out of order "
                       f"or points outside the {log_size}-byte log")
    if problem is not None:
        return OffsetIndex(b"", base_offset, 0, path=path, status="corrupt", problem=problem)
    return OffsetIndex(buf, base_offset, real, path=path)


def load_time_index(path: Optional[str], base_offset: int, log_size: Optional[int] = None, *,
                    storage: Optional[Storage] = None) -> TimeIndex:
    """Open ``path`` as a time index, or return one marked absent/corrupt (``status``).

    Trusted when its size is a whole number of entries and its entries rise
    strictly (timestamps, and offsets not below the base) up to a
    zero-filled preallocated tail.  Only what a ``log_size``-byte segment's
    index can hold is read (the ``.log``'s size when None).
    """
    if log_size is None:
        log_size = _sibling_log_size(path, storage)
    buf, size, problem = _read(path, storage, index_read_limit(log_size, TIME_ENTRY_SIZE))
    if buf is None:
        return TimeIndex(b"", base_offset, 0, path=path, status="absent", problem="no .timeindex file")
    if problem is None and size % TIME_ENTRY_SIZE:
        problem = f"time index file size {size} is not a multiple of {TIME_ENTRY_SIZE}"
    if problem is not None:
        return TimeIndex(b"", base_offset, 0, path=path, status="corrupt", problem=problem)
    real, problem = _real_entries(buf, len(buf) // TIME_ENTRY_SIZE, "time")
    if problem is None and real:
        bad = K.time_index_first_unordered(buf, real)
        if bad >= 0:
            problem = f"entry {bad} has a negative relative offset or is out of order"
    if problem is not None:
        return TimeIndex(b"", base_offset, 0, path=path, status="corrupt", problem=problem)
    return TimeIndex(buf, base_offset, real, path=path)


# -- files as written (for dumps) ------------------------------------------------------

def _sibling_log_size(path: Optional[str], storage: Optional[Storage]) -> int:
    """Size of the ``.log`` of the segment ``path`` belongs to (0 when there is none)."""
    if path is None:
        return 0
    log = sibling_path(path, ".log")
    try:
        return (storage or storage_for(log)).size(log)
    except (OSError, LogError):
        return 0


def _read_as_written(path: str, storage: Optional[Storage], entry_size: int) -> Tuple[bytes, int]:
    """The entries' bytes an index of its segment can hold, and the file's size; LogError
    (one line, naming the file) when it is not a regular file or cannot be an index."""
    limit = max(index_read_limit(_sibling_log_size(path, storage), entry_size),
                DEFAULT_MAX_INDEX_BYTES)
    buf, size = (storage or storage_for(path)).read_bounded(path, limit)
    if size > MAX_INDEX_FILE_BYTES:
        raise IndexCorruptError(f"{path}: index file size {size} is larger than any index Kafka "
                                f"writes (segment.index.bytes is at most {MAX_INDEX_FILE_BYTES})")
    return buf, size


def read_offset_index_file(path: str, base_offset: Optional[int] = None, *,
                           storage: Optional[Storage] = None) -> Tuple[OffsetIndex, int]:
    """``(index, file_size)``: the whole entries of ``path`` as written, unchecked (status
    ``"unchecked"``, zero-filled tail included); the base offset comes from the file name.

    Only what an index of its segment can hold is read (see
    :func:`index_read_limit`; at least Kafka's default ``segment.index.bytes``).
    """
    base = offset_from_file_name(path) if base_offset is None else base_offset
    buf, size = _read_as_written(path, storage, OFFSET_ENTRY_SIZE)
    return (OffsetIndex(buf, base, len(buf) // OFFSET_ENTRY_SIZE, path=path, status="unchecked"),
            size)


def read_time_index_file(path: str, base_offset: Optional[int] = None, *,
                         storage: Optional[Storage] = None) -> Tuple[TimeIndex, int]:
    """``(index, file_size)``: the whole entries of ``path`` as written (see :func:`read_offset_index_file`)."""
    base = offset_from_file_name(path) if base_offset is None else base_offset
    buf, size = _read_as_written(path, storage, TIME_ENTRY_SIZE)
    return (TimeIndex(buf, base, len(buf) // TIME_ENTRY_SIZE, path=path, status="unchecked"),
            size)


def sanity_check_offset_index(path: str, *, storage: Optional[Storage] = None) -> None:
    """Kafka's ``OffsetIndex.sanityCheck`` on the file as written; IndexCorruptError (in
    Kafka's words) when it fails.  Weaker than :func:`load_offset_index`'s trust rule."""
    idx, size = read_offset_index_file(path, storage=storage)
    last = idx.entry(idx.entries - 1)[0] if idx.entries else None
    if last is not None and last < idx.base_offset:
        raise IndexCorruptError(
            f"Corrupt index found, index file ({os.path.abspath(path)}) has non-zero size but the "
            f"last offset is {last} which is less than the base offset {idx.base_offset}")
    if size % OFFSET_ENTRY_SIZE:
        raise IndexCorruptError(
            f"Index file {os.path.abspath(path)} is corrupt, found {size} bytes which is neither "
            f"positive nor a multiple of {OFFSET_ENTRY_SIZE}")


def sanity_check_time_index(path: str, *, storage: Optional[Storage] = None) -> None:
    """Kafka's ``TimeIndex.sanityCheck`` on the file as written; IndexCorruptError (in Kafka's
    words) when it fails."""
    idx, size = read_time_index_file(path, storage=storage)
    if idx.entries:
        first_ts = idx.entry(0)[0]
        last_ts, last_off = idx.entry(idx.entries - 1)
        if last_ts < first_ts:
            raise IndexCorruptError(
                f"Corrupt time index found, time index file ({os.path.abspath(path)}) has non-zero "
                f"size but the last timestamp is {last_ts} which is less than the first timestamp "
                f"{first_ts}")
        if last_off < idx.base_offset:
            raise IndexCorruptError(
                f"Corrupt time index found, time index file ({os.path.abspath(path)}) has non-zero "
                f"size but the last offset is {last_off} which is less than the first offset "
                f"{idx.base_offset}")
    if size % TIME_ENTRY_SIZE:
        raise IndexCorruptError(
            f"Time index file {os.path.abspath(path)} is corrupt, found {size} bytes which is "
            f"neither positive nor a multiple of {TIME_ENTRY_SIZE}")


# -- building ------------------------------------------------------------------------

class IndexBuilder:
    """Builds ``.index``/``.timeindex`` entries the way a broker does.

    Feed it each append (one or more batches written together) in log order
    with :meth:`append`.  Following Kafka's ``LogSegment``: when more than
    ``index_interval_bytes`` were written since the last entry, an offset entry
    (the append's last offset, the append's start position) is added, and a
    time entry (the max timestamp so far and where it was first seen) when
    that timestamp grew.  :meth:`finish` adds the final time entry a roll or a
    clean close adds.
    """

    def __init__(self, base_offset: int, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 *, max_entries: Optional[int] = None) -> None:
        self.base_offset = base_offset
        self.interval = index_interval_bytes
        self.max_entries = max_entries
        self.offset_entries: List[Tuple[int, int]] = []   # (absolute offset, position)
        self.time_entries: List[Tuple[int, int]] = []     # (timestamp, absolute offset)
        self.bytes_since_last_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset

    @property
    def full(self) -> bool:
        return self.max_entries is not None and len(self.offset_entries) >= self.max_entries

    def append(self, position: int, size: int, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int) -> Tuple[Optional[Tuple[int, int]], Optional[Tuple[int, int]]]:
        """Account for one append; return the (offset entry, time entry) added, if any."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        added_off = added_time = None
        if self.bytes_since_last_entry > self.interval and not self.full:
            added_off = (last_offset, position)
            self.offset_entries.append(added_off)
            added_time = self._maybe_time_entry()
            self.bytes_since_last_entry = 0
        self.bytes_since_last_entry += size
        return added_off, added_time

    def _maybe_time_entry(self) -> Optional[Tuple[int, int]]:
        last_ts = self.time_entries[-1][0] if self.time_entries else NO_TIMESTAMP
        if self.max_timestamp > last_ts:
            entry = (self.max_timestamp, self.offset_of_max_timestamp)
            self.time_entries.append(entry)
            return entry
        return None

    def finish(self) -> Optional[Tuple[int, int]]:
        """The final time entry of a roll or clean close (if the max timestamp grew)."""
        return self._maybe_time_entry()

    def offset_index_bytes(self) -> bytes:
        return b"".join(pack_offset_entry(self.base_offset, o, p) for o, p in self.offset_entries)

    def time_index_bytes(self) -> bytes:
        return b"".join(pack_time_entry(self.base_offset, t, o) for t, o in self.time_entries)


def pack_offset_entry(base_offset: int, offset: int, position: int) -> bytes:
    """One ``.index`` entry: ``offset`` relative to the segment's base, and the ``.log`` position."""
    return _OFF.pack(offset - base_offset, position)


def pack_time_entry(base_offset: int, timestamp: int, offset: int) -> bytes:
    """One ``.timeindex`` entry: ``timestamp`` and ``offset`` relative to the segment's base."""
    return _TIME.pack(timestamp, offset - base_offset)


def build_indexes(headers: "NDArray[np.int64]", base_offset: int,
                  index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES) -> Tuple[OffsetIndex, TimeIndex]:
    """Indexes rebuilt in memory from a header scan (Kafka's ``LogSegment.recover`` rule:
    one batch per append, time entries naming the batch's last offset)."""
    b = IndexBuilder(base_offset, index_interval_bytes)
    for row in headers.tolist():
        b.append(row[C.POSITION], row[C.SIZE], row[C.LAST_OFFSET], row[C.MAX_TIMESTAMP],
                 row[C.LAST_OFFSET])
    b.finish()
    off = OffsetIndex(b.offset_index_bytes(), base_offset, len(b.offset_entries), status="rebuilt")
    tim = TimeIndex(b.time_index_bytes(), base_offset, len(b.time_entries), status="rebuilt")
    return off, tim
