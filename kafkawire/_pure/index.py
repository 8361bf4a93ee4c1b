"""Index search kernels (pure-Python twin of ``kafkawire/_fast/index.pyx``).

Kafka's offset index holds 8-byte entries (big-endian int32 offset relative
to the segment's base offset, int32 file position); the time index holds
12-byte entries (int64 timestamp, int32 relative offset).  These kernels
search and measure such entries inside any buffer (bytes, mmap, memoryview);
they know nothing about segments or trust, which is ``kafkawire.log``'s job.
"""
from __future__ import annotations

import struct

from kafkawire._pure.framing import RecordFault, read_record
from kafkawire._pure.wire import flat

__all__ = ["offset_index_lookup", "time_index_lookup", "offset_index_real_entries",
           "time_index_real_entries", "offset_index_first_unordered",
           "time_index_first_unordered", "buffer_is_zero", "records_find_timestamp"]

_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


def _clamp(buf, n: int, width: int) -> int:
    return max(0, min(n, len(buf) // width))


# Every kernel reads ``buf`` through ``flat`` (non-contiguous buffers raise BufferError).


def offset_index_lookup(buf, n: int, target_rel: int) -> int:
    """Slot of the largest entry whose relative offset is <= ``target_rel``, or -1."""
    buf = flat(buf)
    n = _clamp(buf, n, 8)
    lo, hi = 0, n - 1
    if n <= 0 or _OFF.unpack_from(buf, 0)[0] > target_rel:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if _OFF.unpack_from(buf, mid * 8)[0] <= target_rel:
            lo = mid
        else:
            hi = mid - 1
    return lo


def time_index_lookup(buf, n: int, target_ts: int) -> int:
    """Slot of the largest entry whose timestamp is <= ``target_ts``, or -1."""
    buf = flat(buf)
    n = _clamp(buf, n, 12)
    lo, hi = 0, n - 1
    if n <= 0 or _TIME.unpack_from(buf, 0)[0] > target_ts:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if _TIME.unpack_from(buf, mid * 12)[0] <= target_ts:
            lo = mid
        else:
            hi = mid - 1
    return lo


def offset_index_real_entries(buf, n: int) -> int:
    """How many leading entries are real, in a possibly preallocated index.

    A broker preallocates the active segment's index zero-filled; real
    entries end where relative offsets and positions stop strictly
    increasing.  An all-zero first entry is never written by Kafka (no entry
    points at position 0), so it marks an empty index.
    """
    buf = flat(buf)
    n = _clamp(buf, n, 8)
    prev_rel = prev_pos = -1
    for i in range(n):
        rel, pos = _OFF.unpack_from(buf, i * 8)
        if i == 0:
            if rel == 0 and pos == 0:
                return 0
        elif rel <= prev_rel or pos <= prev_pos:
            return i
        prev_rel, prev_pos = rel, pos
    return n


def time_index_real_entries(buf, n: int) -> int:
    """How many leading time entries are real (timestamps strictly rising, offsets not falling)."""
    buf = flat(buf)
    n = _clamp(buf, n, 12)
    prev_ts = prev_rel = 0
    for i in range(n):
        ts, rel = _TIME.unpack_from(buf, i * 12)
        if i == 0:
            if ts == 0 and rel == 0:
                return 0
        elif ts <= prev_ts or rel < prev_rel:
            return i
        prev_ts, prev_rel = ts, rel
    return n


def offset_index_first_unordered(buf, n: int, file_size: int) -> int:
    """First slot breaking Kafka's rules (offsets and positions strictly rising,
    positions inside ``file_size``, relative offset >= 0), or -1 when all hold."""
    buf = flat(buf)
    n = _clamp(buf, n, 8)
    prev_rel = prev_pos = -1
    for i in range(n):
        rel, pos = _OFF.unpack_from(buf, i * 8)
        if rel < 0 or pos < 0 or pos >= file_size or rel <= prev_rel or pos <= prev_pos:
            return i
        prev_rel, prev_pos = rel, pos
    return -1


def time_index_first_unordered(buf, n: int) -> int:
    """First time-index slot whose timestamp does not rise or whose offset falls, or -1."""
    buf = flat(buf)
    n = _clamp(buf, n, 12)
    prev_ts = prev_rel = 0
    for i in range(n):
        ts, rel = _TIME.unpack_from(buf, i * 12)
        if rel < 0 or (i > 0 and (ts <= prev_ts or rel < prev_rel)):
            return i
        prev_ts, prev_rel = ts, rel
    return -1


def buffer_is_zero(buf, start: int, end: int) -> bool:
    """True when every byte in ``buf[start:end]`` is zero."""
    data = bytes(flat(buf)[max(start, 0):max(end, 0)])
    return data.count(0) == len(data)


def records_find_timestamp(buf, pos: int, end: int, count: int, base_offset: int,
                           base_timestamp: int, target_ts: int, min_offset: int):
    """First record of an uncompressed v2 records section ``buf[pos:end]`` (``count``
    records) whose timestamp is >= ``target_ts`` and offset >= ``min_offset``.

    Each record is read by the record walker (``kafkawire._pure.framing``), no
    record object made.  Returns ``(0, offset, timestamp)`` when found,
    ``(1, -1, -1)`` when no record qualifies, ``(2, position, -1)`` when the
    records are malformed at ``position`` (decode the batch for the real error).
    """
    mv = flat(buf)
    end = min(end, len(mv))
    if count <= 0 or pos == end:
        return 1, -1, -1
    if pos < 0 or pos > end:
        return 2, pos, -1
    for _ in range(count):
        try:
            rec = read_record(mv, pos, end)
        except RecordFault:
            return 2, pos, -1
        ts = base_timestamp + rec[3]
        off = base_offset + rec[4]
        if ts >= target_ts and off >= min_offset:
            return 0, off, ts
        pos = rec[0]
    return 1, -1, -1
