"""One log segment: a memory-mapped ``.log`` with its indexes.

Batches are found from their headers alone (``K.scan_batches``: no payload
is copied or decompressed); batch objects and records are built only when
asked for.  Indexes are loaded untrusted (see :mod:`kafkawire.log.index`):
when one is absent, corrupt or proves stale during a lookup, the segment
rebuilds both in memory from a header scan and carries on.
"""
from __future__ import annotations

import mmap
import os
from typing import List, Optional, Tuple

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import CorruptRecordError, LogError
from kafkawire.log import files as F
from kafkawire.log.index import (OffsetIndex, TimeIndex, build_indexes,
                                 load_offset_index, load_time_index)
from kafkawire.log.txnindex import AbortedTxn, read_txn_index

#: Batches read per header-scan call during lookups.
_LOOKUP_CHUNK = 8


class Segment:
    """A segment of a partition: ``<base>.log`` plus ``.index``/``.timeindex``/``.txnindex``.

    ``size`` is the byte size mapped when opened (or last :meth:`refresh`\\ ed):
    a reader sees that prefix of a segment another process appends to.
    """

    def __init__(self, files: F.SegmentFiles) -> None:
        if files.log is None:
            raise LogError(f"segment {files.base_offset} has no .log file")
        self.files = files
        self.base_offset = files.base_offset
        self.path = files.log
        self._buf = b""
        self._mm: Optional[mmap.mmap] = None
        self._map()

    # -- opening ------------------------------------------------------------
    @classmethod
    def open(cls, path: str) -> "Segment":
        """Open the segment whose ``.log`` (or any sibling segment file) is ``path``."""
        parsed = F.parse_segment_file_name(os.path.basename(path))
        if parsed is None:
            raise LogError(f"{path}: not a segment file (expected <20-digit base offset>.log)")
        base = parsed[0]
        folder = os.path.dirname(os.path.abspath(path))
        stem = os.path.join(folder, F.segment_file_name(base, ""))
        sf = F.SegmentFiles(base)
        for suffix in F.SEGMENT_SUFFIXES + (F.SNAPSHOT_SUFFIX,):
            if os.path.exists(stem + suffix):
                setattr(sf, suffix[1:], stem + suffix)
        if sf.log is None:
            raise LogError(f"{stem}.log does not exist")
        return cls(sf)

    def _map(self) -> None:
        self._offset_index: Optional[OffsetIndex] = None
        self._time_index: Optional[TimeIndex] = None
        self._tail: Optional[Tuple[int, int, int]] = None  # (next_offset, max_ts, valid_end)
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                old = self._mm
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except OSError as exc:
            raise LogError(f"cannot open {self.path}: {exc}") from exc
        self._buf = self._mm if self._mm is not None else b""
        self.size = size
        if old is not None:
            _close_quietly(old)

    def refresh(self) -> bool:
        """Re-map the ``.log`` if it changed size (a writer appended); True if it did."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return False
        if size == self.size:
            return False
        self._map()
        return True

    def close(self) -> None:
        if self._mm is not None:
            _close_quietly(self._mm)
            self._mm = None
        self._buf = b""

    def __enter__(self) -> "Segment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Segment({self.path!r}, base_offset={self.base_offset}, size={self.size})"

    @property
    def buffer(self):
        """The mapped ``.log`` bytes (an mmap, or ``b""`` for an empty file)."""
        return self._buf

    # -- indexes ------------------------------------------------------------
    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
        return self._time_index

    def _load_indexes(self) -> None:
        off = load_offset_index(self.files.index, self.base_offset, self.size, trim_past_end=True)
        tim = load_time_index(self.files.timeindex, self.base_offset)
        if off.status == "ok" and tim.status == "ok":
            self._offset_index, self._time_index = off, tim
            return
        if off.status == "ok" and tim.status == "absent" and off.entries == 0:
            # A tiny segment with no index entries: scanning from 0 is the index.
            self._offset_index, self._time_index = off, tim
            return
        self._rebuild_indexes(off.problem if off.status != "ok" else tim.problem)

    def _rebuild_indexes(self, problem: Optional[str]) -> None:
        headers = self.headers()
        off, tim = build_indexes(headers, self.base_offset)
        off.problem = tim.problem = problem
        self._offset_index, self._time_index = off, tim

    @property
    def index_problems(self) -> List[str]:
        """Why the on-disk indexes were not used (empty when they were trusted)."""
        out = []
        for idx in (self.offset_index, self.time_index):
            if idx.problem and idx.status != "ok":
                out.append(idx.problem)
        return out

    def aborted_transactions(self) -> List[AbortedTxn]:
        """Entries of this segment's ``.txnindex`` ([] when absent)."""
        return read_txn_index(self.files.txnindex)

    # -- scanning -----------------------------------------------------------
    def scan(self, start: int = 0, end: int = -1, max_count: int = -1, check_crc: bool = False):
        """``K.scan_batches`` over this segment: ``(headers, stop_position, status)``."""
        end = self.size if end < 0 or end > self.size else end
        return K.scan_batches(self._buf, start, end, max_count, check_crc)

    def headers(self, start: int = 0, end: int = -1):
        """Header rows (see :mod:`kafkawire._scan_common`) of the readable batches."""
        return self.scan(start, end)[0]

    def batches(self, start_position: int = 0, end_position: Optional[int] = None, *,
                verify_crc: bool = False):
        """Batch objects from ``start_position``; a trailing partial batch ends iteration."""
        from kafkawire.records import iter_batches
        end = self.size if end_position is None else min(end_position, self.size)
        try:
            yield from iter_batches(self._buf, start=start_position, end=end, verify_crc=verify_crc)
        except CorruptRecordError as exc:
            # A zero-filled tail (preallocated file, or a crash before the data reached
            # disk) ends the readable log, as a preallocated index's zero tail does;
            # verify() still reports it and recover() truncates it.
            if (exc.reason == "length" and exc.position is not None
                    and K.buffer_is_zero(self._buf, exc.position, end)):
                return
            raise exc.at(path=self.path) from None

    def batch_at(self, position: int):
        """The batch object starting at ``position``."""
        for batch in self.batches(position):
            return batch
        raise CorruptRecordError("no complete batch here", position=position, reason="truncated",
                                 path=self.path)

    # -- lookups ------------------------------------------------------------
    def locate(self, offset: int) -> Optional[Tuple[int, list]]:
        """First batch whose last offset is >= ``offset``: ``(position, header_row)``, or None.

        Starts at the offset index's largest entry at or below ``offset``; if
        that entry proves stale (no batch there, or one starting above the
        entry's offset), the indexes are rebuilt from the log and the search
        repeated.
        """
        idx = self.offset_index
        entry_offset, pos = idx.lookup(offset)
        found = self._scan_for_offset(pos, offset, entry_offset if pos > 0 else None)
        if found == "stale":
            self._rebuild_indexes(f"index entry (offset {entry_offset}, position {pos}) does not match the log")
            found = self._scan_for_offset(self.offset_index.lookup(offset)[1], offset, None)
        return None if found == "stale" else found

    def _scan_for_offset(self, pos: int, offset: int, entry_offset: Optional[int]):
        first = True
        while pos < self.size:
            rows, stop, status = K.scan_batches(self._buf, pos, self.size, _LOOKUP_CHUNK, False)
            if first and entry_offset is not None:
                # The entry's batch must start at or before the entry's offset.  A compressed
                # v0/v1 wrapper is skipped: its header carries its *last* inner offset, and
                # brokers before 0.11 indexed an append's *first* offset.
                if len(rows) == 0 or (rows[0, C.BASE_OFFSET] > entry_offset
                                      and (rows[0, C.MAGIC] == 2 or rows[0, C.RECORD_COUNT] >= 0)):
                    return "stale"
            first = False
            for row in rows.tolist():
                if row[C.LAST_OFFSET] >= offset:
                    return row[C.POSITION], row
            if status != C.OK or stop <= pos:
                return None
            pos = stop
        return None

    def _tail_info(self) -> Tuple[int, int, int]:
        """``(next_offset, max_timestamp, end_of_readable_batches)``, cached per size."""
        if self._tail is None:
            idx = self.offset_index
            tim = self.time_index
            max_ts, ts_offset = tim.last_entry
            # Batches before the last offset entry are covered by the time index's last entry
            # (a broker adds both together); with no time entries at all, scan everything.
            start = idx.lookup(max(idx.last_offset, ts_offset))[1] if idx.entries and tim.entries else 0
            next_offset = self.base_offset
            rows, stop, _ = K.scan_batches(self._buf, start, self.size, -1, False)
            if len(rows) == 0 and start > 0:
                rows, stop, _ = K.scan_batches(self._buf, 0, self.size, -1, False)
            if len(rows):
                next_offset = int(rows[-1, C.LAST_OFFSET]) + 1
                max_ts = max(max_ts, int(rows[:, C.MAX_TIMESTAMP].max()))
            elif idx.entries:
                next_offset = idx.last_offset + 1
            self._tail = (next_offset, max_ts, stop)
        return self._tail

    @property
    def next_offset(self) -> int:
        """One past the last offset of the last complete batch (base offset if empty)."""
        return self._tail_info()[0]

    @property
    def max_timestamp(self) -> int:
        """Largest batch max-timestamp in the segment (-1 when it has none, e.g. magic 0)."""
        return self._tail_info()[1]

    def find_timestamp(self, timestamp: int, starting_offset: int = 0) -> Optional[Tuple[int, int]]:
        """First ``(offset, timestamp)`` at or after ``starting_offset`` whose timestamp is
        >= ``timestamp`` (Kafka's ``LogSegment.findOffsetByTimestamp``), or None."""
        _, ts_offset = self.time_index.lookup(timestamp)
        pos = self.offset_index.lookup(max(ts_offset, starting_offset))[1]
        while pos < self.size:
            rows, stop, status = K.scan_batches(self._buf, pos, self.size, _LOOKUP_CHUNK, False)
            for row in rows.tolist():
                if row[C.MAX_TIMESTAMP] >= timestamp and row[C.LAST_OFFSET] >= starting_offset:
                    found = self._search_batch(row, timestamp, starting_offset)
                    if found is not None:
                        return found
            if status != C.OK or stop <= pos:
                return None
            pos = stop
        return None


    def _search_batch(self, row, timestamp: int, starting_offset: int) -> Optional[Tuple[int, int]]:
        """First record of the batch in ``row`` at/after both targets (Kafka's searchForTimestamp)."""
        attrs = row[C.ATTRIBUTES]
        if row[C.MAGIC] == 2 and not attrs & C.COMPRESSION_MASK:
            # Uncompressed v2: walk record lengths and deltas only, in the kernel.
            pos = row[C.POSITION]
            log_append = bool(attrs & C.TIMESTAMP_TYPE_MASK)
            status, off, ts = K.records_find_timestamp(
                self._buf, pos + C.V2_RECORDS_START, pos + row[C.SIZE], row[C.RECORD_COUNT],
                row[C.BASE_OFFSET], row[C.FIRST_TIMESTAMP],
                -(1 << 63) if log_append else timestamp, starting_offset)
            if status == 0:
                return off, (row[C.MAX_TIMESTAMP] if log_append else ts)
            if status == 1:
                return None
        for rec in self.batch_at(row[C.POSITION]):
            if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                return rec.offset, rec.timestamp
        return None


def _close_quietly(mm: mmap.mmap) -> None:
    try:
        mm.close()
    except BufferError:
        # Batch objects still hold views into the map; it closes when they are gone.
        pass
