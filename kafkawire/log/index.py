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
index; an index failing them is reported as untrusted so the segment can
fall back to an index rebuilt in memory from the log.
"""
from __future__ import annotations

import os
import struct
from typing import List, Optional, Tuple

from kafkawire import _kernels as K

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
#: Kafka's default ``index.interval.bytes`` and ``segment.index.bytes``.
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024
NO_TIMESTAMP = -1
_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


def _map_file(path: str) -> bytes:
    """The bytes of index file ``path``.

    Read, not memory-mapped: a broker (or LogWriter) trims a preallocated
    index when it rolls the segment, and touching a mapped page past the new
    end of file would kill the reading process with SIGBUS.  Index files are
    small (``segment.index.bytes``, 10 MiB by default, at most).
    """
    with open(path, "rb") as f:
        return f.read()


class _Index:
    """What the offset and time indexes share: a buffer of ``entries`` real entries."""

    def __init__(self, buf, base_offset: int, entries: int, *, path: Optional[str] = None,
                 status: str = "ok", problem: Optional[str] = None) -> None:
        self.buf = buf
        self.base_offset = base_offset
        self.entries = entries
        self.path = path
        #: "ok" (file trusted), "absent", "rebuilt" (built in memory from the log).
        self.status = status
        #: Why the file on disk was not trusted (None when it was).
        self.problem = problem

    def __len__(self) -> int:
        return self.entries

    def entry(self, slot: int) -> Tuple[int, int]:
        raise NotImplementedError

    def __iter__(self):
        for i in range(self.entries):
            yield self.entry(i)


class OffsetIndex(_Index):
    """A searchable offset index over a buffer holding ``entries`` real entries."""

    entry_size = OFFSET_ENTRY_SIZE

    def entry(self, slot: int) -> Tuple[int, int]:
        """``(absolute_offset, position)`` of entry ``slot``."""
        rel, pos = _OFF.unpack_from(self.buf, slot * 8)
        return self.base_offset + rel, pos

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

    def entry(self, slot: int) -> Tuple[int, int]:
        """``(timestamp, absolute_offset)`` of entry ``slot``."""
        ts, rel = _TIME.unpack_from(self.buf, slot * 12)
        return ts, self.base_offset + rel

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


def _real_entries(buf, n: int, kind: str) -> Tuple[int, Optional[str]]:
    """Real-entry count and, if the tail after them is not zero-filled, why it is corrupt."""
    width = OFFSET_ENTRY_SIZE if kind == "offset" else TIME_ENTRY_SIZE
    real = (K.offset_index_real_entries if kind == "offset" else K.time_index_real_entries)(buf, n)
    if real < n and not K.buffer_is_zero(buf, real * width, n * width):
        return real, (f"entry {real} does not increase and the rest of the index is not a "
                      "zero-filled preallocation")
    return real, None


def load_offset_index(path: Optional[str], base_offset: int, log_size: int, *,
                      trim_past_end: bool = False) -> OffsetIndex:
    """Open ``path`` as an offset index, or return one marked absent/corrupt (``status``).

    With ``trim_past_end``, trailing entries pointing at or past ``log_size``
    are dropped instead of condemning the index: a reader that mapped an
    active segment a moment before the broker appended (and indexed) more
    still gets a usable index for the prefix it sees.
    """
    if path is None or not os.path.exists(path):
        return OffsetIndex(b"", base_offset, 0, path=path, status="absent", problem="no .index file")
    buf = _map_file(path)
    size = len(buf)
    if size % OFFSET_ENTRY_SIZE:
        return OffsetIndex(b"", base_offset, 0, path=path, status="corrupt",
                           problem=f"index file size {size} is not a multiple of {OFFSET_ENTRY_SIZE}")
    real, problem = _real_entries(buf, size // OFFSET_ENTRY_SIZE, "offset")
    if problem is None and real:
        bad = K.offset_index_first_unordered(buf, real, max(log_size, 0))
        if bad >= 0 and trim_past_end:
            # Real entries already rise strictly; if the first bad one is merely past the
            # mapped end, so are all after it.
            rel, pos = _OFF.unpack_from(buf, bad * 8)
            if rel >= 0 and pos >= log_size:
                real, bad = bad, -1
        if bad >= 0:
            rel, pos = _OFF.unpack_from(buf, bad * 8)
            problem = (f"entry {bad} (offset {base_offset + rel}, position {pos}) is out of order "
                       f"or points outside the {log_size}-byte log")
    if problem is not None:
        return OffsetIndex(b"", base_offset, 0, path=path, status="corrupt", problem=problem)
    return OffsetIndex(buf, base_offset, real, path=path)


def load_time_index(path: Optional[str], base_offset: int) -> TimeIndex:
    """Open ``path`` as a time index, or return one marked absent/corrupt (``status``)."""
    if path is None or not os.path.exists(path):
        return TimeIndex(b"", base_offset, 0, path=path, status="absent", problem="no .timeindex file")
    buf = _map_file(path)
    size = len(buf)
    if size % TIME_ENTRY_SIZE:
        return TimeIndex(b"", base_offset, 0, path=path, status="corrupt",
                         problem=f"time index file size {size} is not a multiple of {TIME_ENTRY_SIZE}")
    real, problem = _real_entries(buf, size // TIME_ENTRY_SIZE, "time")
    if problem is None and real:
        bad = K.time_index_first_unordered(buf, real)
        if bad >= 0:
            problem = f"entry {bad} has a negative relative offset or is out of order"
    if problem is not None:
        return TimeIndex(b"", base_offset, 0, path=path, status="corrupt", problem=problem)
    return TimeIndex(buf, base_offset, real, path=path)


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
        return b"".join(_OFF.pack(o - self.base_offset, p) for o, p in self.offset_entries)

    def time_index_bytes(self) -> bytes:
        return b"".join(_TIME.pack(t, o - self.base_offset) for t, o in self.time_entries)


def pack_offset_entry(base_offset: int, offset: int, position: int) -> bytes:
    return _OFF.pack(offset - base_offset, position)


def pack_time_entry(base_offset: int, timestamp: int, offset: int) -> bytes:
    return _TIME.pack(timestamp, offset - base_offset)


def build_indexes(headers, base_offset: int,
                  index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES) -> Tuple[OffsetIndex, TimeIndex]:
    """Indexes rebuilt in memory from a header scan (Kafka's ``LogSegment.recover`` rule:
    one batch per append, time entries naming the batch's last offset)."""
    from kafkawire import _scan_common as C
    b = IndexBuilder(base_offset, index_interval_bytes)
    for row in headers.tolist():
        b.append(row[C.POSITION], row[C.SIZE], row[C.LAST_OFFSET], row[C.MAX_TIMESTAMP],
                 row[C.LAST_OFFSET])
    b.finish()
    off = OffsetIndex(b.offset_index_bytes(), base_offset, len(b.offset_entries), status="rebuilt")
    tim = TimeIndex(b.time_index_bytes(), base_offset, len(b.time_entries), status="rebuilt")
    return off, tim
