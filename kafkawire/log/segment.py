"""One log segment: a ``.log`` with its indexes, mapped when first read.

Batches are found from their headers alone (``K.scan_batches``: no payload
is copied or decompressed); batch objects and records are built only when
asked for.  Indexes are loaded untrusted (see :mod:`kafkawire.log.index`):
when one is absent, corrupt or proves stale during a lookup, the segment
rebuilds both in memory from a header scan and carries on.  The log end
offset, the largest timestamp and lookups by offset or time are answered
here, for ``Log`` and the Spark planner alike.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Generator, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import CorruptRecordError, LogError
from kafkawire.log import files as F
from kafkawire.log.index import (OffsetIndex, TimeIndex, build_indexes,
                                 load_offset_index, load_time_index)
from kafkawire.log.storage import MappedFile, ObjectStorage, RemoteFile, Storage, absolute, storage_for
from kafkawire.log.txnindex import AbortedTxn, read_txn_index
from kafkawire.records import iter_batches
from kafkawire.records.columnar import ColumnChunk, iter_column_chunks
from kafkawire.records.iterate import Batch

if TYPE_CHECKING:
    import mmap

    from numpy.typing import NDArray

    #: Header rows from the scan kernel, one per batch (columns: ``kafkawire._scan_common``).
    HeaderRows = NDArray[np.int64]

#: Batches read per header-scan call during lookups.
_LOOKUP_CHUNK = 8
#: Bytes per ranged read of a lookup's scan on object storage (a few batches, not a block).
_LOOKUP_BLOCK = 64 << 10


def _no_rows() -> "HeaderRows":
    return np.zeros((0, C.NFIELDS), dtype=np.int64)


class Segment:
    """A segment of a partition: ``<base>.log`` plus ``.index``/``.timeindex``/``.txnindex``.

    ``size`` is the byte size of the ``.log`` when the segment was opened (or
    last :meth:`refresh`\\ ed): a reader sees that prefix of a segment another
    process appends to.  The file is mapped on first read, not at opening.
    """

    def __init__(self, files: F.SegmentFiles, *, size: Optional[int] = None,
                 storage: Optional[Storage] = None) -> None:
        if files.log is None:
            raise LogError(f"segment {files.base_offset} has no .log file")
        self.files = files
        self.base_offset = files.base_offset
        self.path = files.log
        self.storage = storage or storage_for(files.log)
        self._mapped: Union[MappedFile, RemoteFile, None] = None
        self._buf: Union[None, bytes, bytearray, mmap.mmap] = None   # the mapped bytes, once mapped
        #: Iterators reading this segment's map right now (a recovery must not truncate under them).
        self.readers = 0
        if size is None:
            size = self._stat()
        self.size = size
        self._reset()

    # -- opening ------------------------------------------------------------
    @classmethod
    def open(cls, path: str, *, storage: Optional[Storage] = None) -> "Segment":
        """Open the segment whose ``.log`` (or any sibling segment file) is ``path``."""
        sf = F.segment_files(path, storage)
        if sf.log is None:
            stem = os.path.join(os.path.dirname(absolute(path)),
                                F.segment_file_name(sf.base_offset, ""))
            raise LogError(f"{stem}.log does not exist")
        return cls(sf, storage=storage)

    def _stat(self) -> int:
        try:
            return self.storage.size(self.path)
        except OSError as exc:
            raise LogError(f"cannot open {self.path}: {exc}") from exc

    def _reset(self) -> None:
        self._disk_offset_index: Optional[OffsetIndex] = None
        self._disk_time_index: Optional[TimeIndex] = None
        self._offset_index: Optional[OffsetIndex] = None
        self._time_index: Optional[TimeIndex] = None
        self._end: Optional[Tuple[int, int]] = None      # (next_offset, end of readable batches)
        self._max_ts: Optional[int] = None

    def refresh(self) -> bool:
        """Take in bytes appended since opening (re-mapping on next read); True if the size changed.

        A ``Log`` does not refresh its segments in place: it opens a new
        ``Segment`` for a file that grew, so readers holding the old one keep
        the bytes they started with.
        """
        try:
            size = self.storage.size(self.path)
        except OSError:
            return False
        if size == self.size:
            return False
        self._unmap()
        self.size = size
        self._reset()
        return True

    def close(self) -> bool:
        """Unmap the ``.log`` (it is mapped again if read again); False when a reader still
        holds batches or records viewing the map, which then lives until they go."""
        return self._unmap()

    def _unmap(self) -> bool:
        self._buf = None
        closed = True
        if self._mapped is not None:
            closed = self._mapped.close() is not False   # a remote file's copy always goes
            self._mapped = None
        return closed

    def __enter__(self) -> "Segment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Segment({self.path!r}, base_offset={self.base_offset}, size={self.size})"

    @property
    def buffer(self) -> Union[bytes, bytearray, mmap.mmap]:
        """The ``.log``'s first ``size`` bytes, memory-mapped (``b""`` when empty)."""
        buf = self._buf
        if buf is None:
            if self.size:
                try:
                    self._mapped = self.storage.map(self.path, self.size)
                except OSError as exc:
                    raise LogError(f"cannot open {self.path}: {exc}") from exc
                buf = self._mapped.data
            else:
                buf = b""
            self._buf = buf
        return buf

    def read_at(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes of the ``.log`` at ``position`` (one ranged read on object
        storage unless the file was read whole)."""
        end = min(position + length, self.size)
        if end <= position:
            return b""
        if self._buf is None and self.storage.ranged:
            return self.storage.read_range(self.path, position, end - position)
        return bytes(self.buffer[position:end])

    def is_zero(self, start: int, end: int) -> bool:
        """Whether the ``.log``'s bytes ``[start, end)`` are all zeros (a preallocated or
        crash-cut tail); streamed from object storage, never read whole."""
        end = min(end, self.size)
        if end <= start:
            return True
        if self._buf is not None or not self.storage.ranged:
            return bool(K.buffer_is_zero(self.buffer, start, end))
        blocks = cast(ObjectStorage, self.storage).stream(self.path, start, end, batches=False)
        try:
            return all(K.buffer_is_zero(v, 0, len(v)) for v in blocks)
        finally:
            blocks.close()

    # -- indexes ------------------------------------------------------------
    @property
    def disk_offset_index(self) -> OffsetIndex:
        """The ``.index`` file if it passes the trust rules, else an empty index saying why
        (``status``, ``problem``); never rebuilt from the log (planning reads indexes only)."""
        if self._disk_offset_index is None:
            self._disk_offset_index = load_offset_index(self.files.index, self.base_offset, self.size,
                                                        trim_past_end=True, storage=self.storage)
        return self._disk_offset_index

    @property
    def disk_time_index(self) -> TimeIndex:
        """The ``.timeindex`` file if it passes the trust rules, else an empty index saying why."""
        if self._disk_time_index is None:
            self._disk_time_index = load_time_index(self.files.timeindex, self.base_offset, self.size,
                                                    storage=self.storage)
        return self._disk_time_index

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index to search: the file's, or one rebuilt from the log when it is not trusted."""
        if self._offset_index is None:
            self._load_indexes()
        return cast(OffsetIndex, self._offset_index)

    @property
    def time_index(self) -> TimeIndex:
        """The time index to search: the file's, or one rebuilt from the log when it is not trusted."""
        if self._time_index is None:
            self._load_indexes()
        return cast(TimeIndex, self._time_index)

    def _load_indexes(self) -> None:
        off, tim = self.disk_offset_index, self.disk_time_index
        if off.status == "ok" and tim.status == "ok":
            self._offset_index, self._time_index = off, tim
            return
        if off.status == "ok" and tim.status == "absent" and off.entries == 0:
            # A tiny segment with no index entries: scanning from 0 is the index.
            self._offset_index, self._time_index = off, tim
            return
        self._rebuild_indexes(off.problem if off.status != "ok" else tim.problem)

    def _rebuild_indexes(self, problem: Optional[str]) -> None:
        off, tim = build_indexes(self.headers(), self.base_offset)
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

    def positions_are_batches(self, positions: Sequence[int]) -> bool:
        """Whether each position (an index entry's) holds a plausible batch header: known magic,
        a length at least the minimum that ends inside the segment.  Reads 17 bytes per position,
        without mapping the file."""
        want = []
        for p in positions:
            p = int(p)
            if p == 0 or p == self.size:
                continue
            if not 0 < p < self.size:
                return False
            want.append(p)
        if not want:
            return True
        heads = self.storage.read_ranges(self.path, [(p, C.MAGIC_OFFSET + 1) for p in want])
        for pos, head in zip(want, heads):
            if len(head) <= C.MAGIC_OFFSET:
                return False
            length = int.from_bytes(head[8:12], "big", signed=True)
            if (head[C.MAGIC_OFFSET] > 2 or length < C.MIN_LENGTH
                    or pos + C.LOG_OVERHEAD + length > self.size):
                return False
        return True

    def aborted_transactions(self) -> List[AbortedTxn]:
        """Entries of this segment's ``.txnindex`` ([] when absent)."""
        return read_txn_index(self.files.txnindex, storage=self.storage, log_size=self.size)

    # -- scanning -----------------------------------------------------------
    def scan(self, start: int = 0, end: int = -1, max_count: int = -1,
             check_crc: bool = False) -> Tuple[HeaderRows, int, int]:
        """``K.scan_batches`` over this segment: ``(headers, stop_position, status)``.

        On a ranged storage (object stores) with the file not read whole, only
        ``[start, end)`` is fetched, block by block (see :meth:`ObjectStorage.stream`),
        and only as far as ``max_count`` batches need: planning's scans from the
        last index entry never download a whole segment, and a scan of a whole
        segment holds one block at a time.
        """
        end = self.size if end < 0 or end > self.size else end
        if self._buf is None and self.storage.ranged and end > start:
            return self._scan_ranged(start, end, max_count, check_crc)
        scanned: Tuple[HeaderRows, int, int] = K.scan_batches(self.buffer, start, end, max_count,
                                                              check_crc)
        return scanned

    def _scan_ranged(self, start: int, end: int, max_count: int,
                     check_crc: bool) -> Tuple[HeaderRows, int, int]:
        st = cast(ObjectStorage, self.storage)
        few = 0 < max_count <= _LOOKUP_CHUNK
        blocks = st.stream(self.path, start, end, _LOOKUP_BLOCK if few else None,
                           read_ahead=False if few else None)
        parts = []
        pos, status, left = start, C.OK, max_count
        try:
            for view in blocks:
                rows, stop, status = K.scan_batches(view, 0, len(view), left, check_crc)
                if len(rows):
                    rows[:, C.POSITION] += pos
                    parts.append(rows)
                    left -= len(rows)
                pos += stop
                if status != C.OK or stop < len(view) or left == 0 or (few and parts):
                    break       # a lookup takes what one block holds and asks again
        finally:
            blocks.close()
        if len(parts) == 1:
            return parts[0], pos, status
        return (np.concatenate(parts) if parts else _no_rows()), pos, status

    def headers(self, start: int = 0, end: int = -1) -> HeaderRows:
        """Header rows (see :mod:`kafkawire._scan_common`) of the readable batches."""
        return self.scan(start, end)[0]

    def batches(self, start_position: int = 0, end_position: Optional[int] = None, *,
                verify_crc: bool = False) -> Iterator[Batch]:
        """Batch objects from ``start_position``; a trailing partial batch ends iteration.

        A mapped (local) file is read in place; on a ranged storage (object
        stores), unless the file was read whole, ``[start_position, end)`` is
        streamed in sequential ranged reads, so memory stays within a few
        blocks whatever the segment's size.
        """
        end = self.size if end_position is None else min(end_position, self.size)
        if self._buf is None and self.storage.ranged:
            yield from self._streamed_batches(start_position, end, verify_crc)
            return
        buf = self.buffer
        self.readers += 1
        try:
            yield from iter_batches(buf, start=start_position, end=end, verify_crc=verify_crc)
        except CorruptRecordError as exc:
            # A zero-filled tail (preallocated file, or a crash before the data reached
            # disk) ends the readable log, as a preallocated index's zero tail does;
            # verify() still reports it and recover() truncates it.
            if (exc.reason == "length" and exc.position is not None
                    and K.buffer_is_zero(buf, exc.position, end)):
                return
            raise exc.at(path=self.path) from None
        finally:
            self.readers -= 1

    def _streamed_batches(self, start: int, end: int, verify_crc: bool,
                          block_size: Optional[int] = None) -> Generator[Batch, None, None]:
        """The batches of ``[start, end)`` from a ranged storage, a block of whole batches at a
        time.  Each block is copied out of the storage's reused read buffer, so batches and
        records a caller keeps stay valid (a block is freed once nothing of it is kept)."""
        st = cast(ObjectStorage, self.storage)
        blocks = st.stream(self.path, start, end, block_size,
                           read_ahead=False if block_size else None)
        pos = start
        self.readers += 1
        try:
            for view in blocks:
                data = bytes(view)
                it = iter_batches(data, verify_crc=verify_crc, base_position=pos)
                try:
                    yield from it
                except CorruptRecordError as exc:
                    if (exc.reason == "length" and exc.position is not None
                            and K.buffer_is_zero(data, exc.position - pos, len(data))
                            and all(K.buffer_is_zero(v, 0, len(v)) for v in blocks)):
                        return      # a zero-filled tail, as above
                    raise exc.at(path=self.path) from None
                pos += len(data)
                if it.stop_position != pos:
                    return          # a batch running past the end ends iteration, as above
        finally:
            blocks.close()
            self.readers -= 1

    def column_chunks(self, start_position: int = 0, **options: Any) -> Iterator[ColumnChunk]:
        """:func:`~kafkawire.records.columnar.iter_column_chunks` over the segment from
        ``start_position`` (``options``: its keyword arguments): in place from a mapped file,
        block by block from object storage (a chunk then never spans two blocks)."""
        if self._buf is not None or not self.storage.ranged:
            yield from iter_column_chunks(self.buffer, start=start_position, end=self.size, **options)
            return
        blocks = cast(ObjectStorage, self.storage).stream(self.path, start_position, self.size)
        pos = start_position
        try:
            for view in blocks:     # chunks are copies: the read buffer can be reused
                it = iter_column_chunks(view, base_position=pos, **options)
                yield from it
                pos += len(view)
                if it.stop_position != pos:
                    return          # the end offset was reached, or a partial batch ends the log
        finally:
            blocks.close()

    def batch_at(self, position: int) -> Batch:
        """The batch object starting at ``position``."""
        if self._buf is None and self.storage.ranged:
            # that batch alone, its length read from its header
            head = self.storage.read_range(self.path, position, C.LOG_OVERHEAD)
            size = (C.LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True)
                    if len(head) == C.LOG_OVERHEAD else 0)
            end = min(position + size, self.size) if size > C.LOG_OVERHEAD else self.size
            gen = self._streamed_batches(position, end, False, max(size, _LOOKUP_BLOCK))
            try:
                for batch in gen:
                    return batch
            finally:
                gen.close()
        else:
            for batch in self.batches(position):
                return batch
        raise CorruptRecordError("no complete batch here", position=position, reason="truncated",
                                 path=self.path)

    # -- lookups ------------------------------------------------------------
    def locate(self, offset: int) -> Optional[Tuple[int, List[int]]]:
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
        return None if isinstance(found, str) else found

    def _scan_for_offset(self, pos: int, offset: int,
                         entry_offset: Optional[int]) -> Union[None, str, Tuple[int, List[int]]]:
        first = True
        while pos < self.size:
            rows, stop, status = self.scan(pos, self.size, _LOOKUP_CHUNK)
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

    def offset_at(self, position: int) -> Optional[int]:
        """First offset of the batch starting at ``position`` (its header's base offset), or None."""
        if position >= self.size:
            return None
        rows = self.scan(position, -1, 1)[0]
        return int(rows[0, C.BASE_OFFSET]) if len(rows) else None

    def _end_info(self) -> Tuple[int, int]:
        """``(next_offset, end_of_readable_batches)``, scanned from the last offset-index entry."""
        if self._end is None:
            idx = self._offset_index if self._offset_index is not None else self.disk_offset_index
            start = idx.entry(idx.entries - 1)[1] if idx.entries else 0
            rows, stop, _ = self.scan(start)
            if len(rows) == 0 and start > 0:
                rows, stop, _ = self.scan(0)
            if len(rows):
                next_offset = int(rows[-1, C.LAST_OFFSET]) + 1
            elif idx.entries:
                next_offset = idx.last_offset + 1
            else:
                next_offset = self.base_offset
            self._end = (next_offset, int(stop))
        return self._end

    @property
    def next_offset(self) -> int:
        """One past the last offset of the last complete batch (base offset if empty)."""
        return self._end_info()[0]

    @property
    def valid_end(self) -> int:
        """Byte position where the readable batches end (a partial or damaged tail starts there)."""
        return self._end_info()[1]

    @property
    def max_timestamp(self) -> int:
        """Largest batch max-timestamp in the segment (-1 when it has none, e.g. magic 0).

        The time index's last entry covers every batch before the offset
        index's last entry (a broker adds both together); the batches from
        there on are scanned.
        """
        if self._max_ts is None:
            idx, tim = self.offset_index, self.time_index
            max_ts, ts_offset = tim.last_entry
            start = idx.lookup(max(idx.last_offset, ts_offset))[1] if idx.entries and tim.entries else 0
            rows = self.scan(start)[0]
            if len(rows) == 0 and start > 0:
                rows = self.scan(0)[0]
            if len(rows):
                max_ts = max(max_ts, int(rows[:, C.MAX_TIMESTAMP].max()))
            self._max_ts = max_ts
        return self._max_ts

    def find_timestamp(self, timestamp: int, starting_offset: int = 0) -> Optional[Tuple[int, int]]:
        """First ``(offset, timestamp)`` at or after ``starting_offset`` whose timestamp is
        >= ``timestamp`` (Kafka's ``LogSegment.findOffsetByTimestamp``), or None."""
        _, ts_offset = self.time_index.lookup(timestamp)
        pos = self.offset_index.lookup(max(ts_offset, starting_offset))[1]
        while pos < self.size:
            rows, stop, status = self.scan(pos, self.size, _LOOKUP_CHUNK)
            for row in rows.tolist():
                if row[C.MAX_TIMESTAMP] >= timestamp and row[C.LAST_OFFSET] >= starting_offset:
                    found = self._search_batch(row, timestamp, starting_offset)
                    if found is not None:
                        return found
            if status != C.OK or stop <= pos:
                return None
            pos = stop
        return None

    def _search_batch(self, row: List[int], timestamp: int, starting_offset: int) -> Optional[Tuple[int, int]]:
        """First record of the batch in ``row`` at/after both targets (Kafka's searchForTimestamp)."""
        attrs = row[C.ATTRIBUTES]
        if row[C.MAGIC] == 2 and not attrs & C.COMPRESSION_MASK:
            # Uncompressed v2: walk record lengths and deltas only, in the kernel.
            pos, buf = row[C.POSITION], self._buf
            if buf is None and self.storage.ranged:   # that batch alone, not the segment
                buf, pos = self.storage.read_range(self.path, pos, row[C.SIZE]), 0
            elif buf is None:
                buf = self.buffer
            log_append = bool(attrs & C.TIMESTAMP_TYPE_MASK)
            status, off, ts = K.records_find_timestamp(
                buf, pos + C.V2_RECORDS_START, pos + row[C.SIZE], row[C.RECORD_COUNT],
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
