"""``LogWriter``: append batches to a partition folder the way a broker does.

Offsets are assigned (or checked, for pre-offset data such as a compacted
log), segments roll at a size or time limit (or when an index fills, or
relative offsets would overflow), and ``.index``/``.timeindex`` are kept by
Kafka's ``index.interval.bytes`` rule in files preallocated to
``max_index_bytes`` and trimmed when the segment is rolled or closed.

Each append is one ``write`` of the whole append to the ``.log``, then the
index entries: a reader mapping the segment at any moment sees a prefix of
complete batches, possibly followed by a partial one (which every reader
treats as the end).  ``flush()`` fsyncs the log and indexes; closing and
rolling flush too.
"""
from __future__ import annotations

import mmap
import os
import random
import time
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, NamedTuple, Optional,
                    Sequence, Tuple, Union)

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import CorruptRecordError, LogError
from kafkawire.log import files as F
from kafkawire.log import isolation as I
from kafkawire.log.index import (DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_MAX_INDEX_BYTES,
                                 NO_TIMESTAMP, OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, IndexBuilder,
                                 pack_offset_entry, pack_time_entry)
from kafkawire.log.lock import FolderLock
from kafkawire.log.log import Log
from kafkawire.log.txnindex import AbortedTxn, pack_txn_entry
from kafkawire.records import (BatchBuilder, RecordBatch, control_batch, iter_batches,
                               set_base_offset)

if TYPE_CHECKING:
    from kafkawire.log.recover import RecoverReport
    from kafkawire.log.segment import HeaderRows

Bytes = Union[bytes, bytearray, memoryview]
#: Header rows as lists (``rows.tolist()``): an append reads a few fields of one or two rows,
#: which costs less from lists than from numpy scalars.
RowList = List[List[int]]
_INT32_MAX = 0x7FFFFFFF
try:    # buffers one pwritev takes (1024 on Linux; POSIX guarantees 16)
    _IOV_MAX = int(os.sysconf("SC_IOV_MAX"))
except (AttributeError, ValueError, OSError):
    _IOV_MAX = 16
DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_SEGMENT_MS = 7 * 24 * 3600 * 1000
_V2_KNOWN_ATTRS = 0x7F
_TXN_OR_CONTROL = C.TRANSACTIONAL_MASK | C.CONTROL_MASK


class AppendedBatches(NamedTuple):
    """Where an append's batches went, so a reader can serve them without re-reading the
    segment (the broker's read view of its active segment)."""
    #: Base offset and ``.log`` path of the segment written to.
    segment_base: int
    segment_path: str
    #: Byte positions where the append begins and ends in that segment.
    position: int
    end: int
    #: ``(last offset, position, transactional or control)`` of each batch, in order.
    batches: List[Tuple[int, int, bool]]

_LEGACY_KNOWN_ATTRS = {0: 0x07, 1: 0x0F}


_HAVE_PWRITE = hasattr(os, "pwrite")
_HAVE_PWRITEV = hasattr(os, "pwritev")


def _pwrite(fd: int, data: bytes, position: int) -> int:
    """``os.pwrite`` where it exists (POSIX); seek + write elsewhere (Windows)."""
    if _HAVE_PWRITE:
        return os.pwrite(fd, data, position)
    os.lseek(fd, position, os.SEEK_SET)
    return os.write(fd, data)


def _pwritev(fd: int, pieces: Sequence[Bytes], position: int) -> int:
    """Write ``pieces`` one after the other at ``position``: one ``os.pwritev`` (no joined
    copy) where it exists, else one write of their concatenation."""
    if _HAVE_PWRITEV and len(pieces) <= _IOV_MAX:
        return os.pwritev(fd, pieces, position)
    return _pwrite(fd, b"".join(pieces), position)


def _flat(view: memoryview) -> Bytes:
    """``view`` as a flat byte buffer the kernels and ``pwritev`` take, without copying."""
    if not view.c_contiguous:
        return view.tobytes()
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class _ActiveSegment:
    """The segment being appended to: open descriptors plus LogSegment's index state."""

    def __init__(self, folder: str, base_offset: int, interval: int, max_index_bytes: int,
                 created_ms: int, roll_jitter_ms: int = 0) -> None:
        self.base_offset = base_offset
        stem = os.path.join(folder, F.segment_file_name(base_offset, ""))
        self.log_path = stem + F.LOG_SUFFIX
        self.index_path = stem + F.INDEX_SUFFIX
        self.time_path = stem + F.TIME_INDEX_SUFFIX
        self.txn_path = stem + F.TXN_INDEX_SUFFIX
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0)
        self.log_fd = os.open(self.log_path, flags, 0o644)
        self.index_fd = os.open(self.index_path, flags, 0o644)
        self.time_fd = os.open(self.time_path, flags, 0o644)
        self.size = os.fstat(self.log_fd).st_size
        self.max_offset_entries = max_index_bytes // OFFSET_ENTRY_SIZE
        self.max_time_entries = max_index_bytes // TIME_ENTRY_SIZE
        self.builder = IndexBuilder(base_offset, interval)
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        # The first batch's max timestamp (Kafka's rollingBasedTimestamp; NO_TIMESTAMP for a
        # batch without one), None until the segment has a batch.
        self.rolling_ts: Optional[int] = None
        self.dirty = False
        # Preallocate the indexes zero-filled, as a broker does for its active segment.
        os.ftruncate(self.index_fd, self.max_offset_entries * OFFSET_ENTRY_SIZE)
        os.ftruncate(self.time_fd, self.max_time_entries * TIME_ENTRY_SIZE)

    def time_waited_for_roll(self, now: int, max_ts: int) -> int:
        """Kafka's ``LogSegment.timeWaitedForRoll``: from the first batch's timestamp to the
        append's, or, when the first batch has none, from the segment's creation to now."""
        if self.rolling_ts is not None and self.rolling_ts >= 0:
            return max_ts - self.rolling_ts
        return now - self.created_ms

    @property
    def index_full(self) -> bool:
        return (len(self.builder.offset_entries) >= self.max_offset_entries
                or len(self.builder.time_entries) >= self.max_time_entries)

    def write_entries(self, off_entry: Optional[Tuple[int, int]],
                      time_entry: Optional[Tuple[int, int]]) -> None:
        if off_entry is not None:
            slot = len(self.builder.offset_entries) - 1
            _pwrite(self.index_fd, pack_offset_entry(self.base_offset, *off_entry),
                      slot * OFFSET_ENTRY_SIZE)
        if time_entry is not None:
            slot = len(self.builder.time_entries) - 1
            _pwrite(self.time_fd, pack_time_entry(self.base_offset, *time_entry),
                      slot * TIME_ENTRY_SIZE)

    def add_aborted(self, txn: AbortedTxn) -> None:
        with open(self.txn_path, "ab") as f:
            f.write(pack_txn_entry(txn))
            f.flush()
            os.fsync(f.fileno())

    def flush(self) -> None:
        if self.dirty:
            os.fsync(self.log_fd)
            os.fsync(self.index_fd)
            os.fsync(self.time_fd)
            self.dirty = False

    def close(self) -> None:
        """Final time entry, trim the preallocated indexes, fsync, close."""
        entry = self.builder.finish()
        if entry is not None:
            self.write_entries(None, entry)
        os.ftruncate(self.index_fd, len(self.builder.offset_entries) * OFFSET_ENTRY_SIZE)
        os.ftruncate(self.time_fd, len(self.builder.time_entries) * TIME_ENTRY_SIZE)
        self.dirty = True
        self.flush()
        for fd in (self.log_fd, self.index_fd, self.time_fd):
            os.close(fd)


def _refuse(batch: Any, message: str, reason: str) -> None:
    raise CorruptRecordError(f"{message}; nothing was written", position=batch.position,
                             offset=batch.base_offset, reason=reason)


def _refuse_at(position: int, base_offset: int, message: str, reason: str) -> None:
    raise CorruptRecordError(f"{message}; nothing was written", position=position,
                             offset=base_offset, reason=reason)


def _check_v2_records(data: Bytes, row: List[int], produced: bool) -> None:
    """The records of the v2 data batch ``row`` (neither a control batch nor legacy): walked
    once by the kernel, in place when uncompressed, without making a record object; with
    ``produced`` the walk also requires offset deltas 0, 1, 2, ...."""
    pos, base, last, count = row[C.POSITION], row[C.BASE_OFFSET], row[C.LAST_OFFSET], \
        row[C.RECORD_COUNT]
    if count < 0:
        _refuse_at(pos, base, f"negative record count {count}", "count")
    if last < base:
        _refuse_at(pos, base, f"negative last offset delta {last - base}", "offset")
    compressed = bool(row[C.ATTRIBUTES] & C.COMPRESSION_MASK)
    try:
        if compressed:
            batch = RecordBatch.from_buffer(data, pos)
            records = batch.records_bytes()         # decompressed, bounded
            outside = K.validate_records_v2(records, 0, len(records), count, base, last, None,
                                            produced)
        else:
            outside = K.validate_records_v2(data, pos + C.V2_RECORDS_START, pos + row[C.SIZE],
                                            count, base, last, None, produced)
    except CorruptRecordError as exc:
        if exc.message.startswith("batch at offset"):     # a decompression error
            message = exc.message
        else:
            where = "" if not compressed or exc.position is None else \
                f" (byte {exc.position} of the decompressed records)"
            message = f"batch at offset {base}: {exc.message}{where}"
        raise CorruptRecordError(f"{message}; nothing was written", position=pos, offset=base,
                                 reason=exc.reason) from None
    if outside is not None:
        if base <= outside <= last:
            _refuse_at(pos, base, "record offsets are not consecutive from the batch's base "
                       "offset", "offset")
        _refuse_at(pos, base, f"batch at offset {base}: record offset {outside} outside the "
                   f"batch's range [{base}, {last}]", "offset")


def validate_batches(data: Bytes, produced: bool = True,
                     rows: Optional[RowList] = None) -> None:
    """Check every batch of ``data`` as a broker checks an append; CorruptRecordError
    (naming the batch's position) for the first that fails.

    Always (a follower's checks): CRC; known magic and attribute bits (codecs 0-4 for
    v2, 0-3 for v0/v1); the records present match the record count and lie in the
    batch's offset range; v0/v1 wrappers' inner messages decompress, none nested.
    ``produced`` (offsets to be assigned, as ``LogValidator`` checks a produce
    request): also a v2 record count above zero equal to the offset range, with
    consecutive record offsets.  Data copied with its offsets (a compacted log) may
    have gaps and empty batches.

    ``rows`` are ``data``'s header rows, as lists, from a scan that verified the CRCs (what
    :class:`LogWriter` has in hand); then each v2 data batch is read once more, by the
    kernels' record walker, and nothing else.
    """
    if rows is None:
        scanned, stop, status = K.scan_batches(data, 0, len(data), -1, True)
        if status == C.CRC_MISMATCH:
            raise CorruptRecordError("CRC mismatch; nothing was written", position=stop,
                                     reason="crc")
        if status != C.OK or stop != len(data):
            raise CorruptRecordError(f"not a complete batch or message set "
                                     f"({C.STATUS_NAMES[status]} at byte {stop} of {len(data)}); "
                                     "nothing was written", position=stop, reason="truncated")
        rows = scanned.tolist()
    for row in rows:
        attrs = row[C.ATTRIBUTES]
        if row[C.MAGIC] == 2:
            pos, base = row[C.POSITION], row[C.BASE_OFFSET]
            if attrs & ~_V2_KNOWN_ATTRS or (attrs & C.COMPRESSION_MASK) > 4:
                _refuse_at(pos, base, f"invalid v2 attributes 0x{attrs:04x}", "attributes")
            count = row[C.RECORD_COUNT]
            if produced and count <= 0:
                _refuse_at(pos, base, f"invalid record count {count}", "count")
            if produced and row[C.LAST_OFFSET] - base + 1 != count:
                _refuse_at(pos, base, f"record count {count} does not match the offset range "
                           f"{base}..{row[C.LAST_OFFSET]}", "count")
            if not attrs & C.CONTROL_MASK:
                _check_v2_records(data, row, produced)
                continue
        elif attrs & ~_LEGACY_KNOWN_ATTRS[row[C.MAGIC]] or \
                (attrs & C.LEGACY_COMPRESSION_MASK) > 3:
            _refuse_at(row[C.POSITION], row[C.BASE_OFFSET],
                       f"invalid magic-{row[C.MAGIC]} attributes 0x{attrs:02x}", "attributes")
        # control batches and v0/v1 messages: through the batch objects (small or rare)
        pos = row[C.POSITION]
        for batch in iter_batches(data, start=pos, end=pos + row[C.SIZE]):
            try:
                batch.validate()
                consecutive = (not produced or batch.magic != 2 or
                               [r.offset for r in batch.records()]
                               == list(range(batch.base_offset, batch.last_offset + 1)))
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{exc.message}; nothing was written",
                                         position=batch.position, offset=batch.base_offset,
                                         reason=exc.reason) from None
            if not consecutive:
                _refuse(batch, "record offsets are not consecutive from the batch's base "
                        "offset", "offset")


class LogWriter:
    """Appends to the partition folder ``path`` (created if missing).

    An existing folder is first recovered (Kafka's ``LogSegment.recover``,
    saving any cut bytes, see :mod:`kafkawire.log.recover`) and appends
    continue after its last offset.  Use as a context manager, or call
    :meth:`close`.

    One writer per folder, used from one thread at a time (like a broker's
    partition lock): the folder's ``.lock`` is held from opening to
    :meth:`close` (see :mod:`kafkawire.log.lock`), so a second writer, a
    ``recover --apply`` or a broker running on the folder's ``log.dirs`` is
    refused at once with ``LogLockedError``.  Readers in any process may read
    concurrently.  Transactions left open in the log are picked up on
    opening: a later abort marker is recorded in ``.txnindex`` as the broker
    records it.

    Each appended batch is checked as a broker's ``LogValidator`` checks a
    produce request (CRC, sizes, record count against the records and the
    offset range, magic and attribute bits); a batch that fails is refused
    with ``CorruptRecordError`` and nothing of the append is written.

    ``segment_bytes``, ``segment_ms``, ``segment_jitter_ms``,
    ``index_interval_bytes`` and ``max_index_bytes`` mean what the broker's
    ``segment.bytes``, ``segment.ms``, ``segment.jitter.ms``,
    ``index.interval.bytes`` and ``segment.index.bytes`` mean.  A segment
    rolls before an append (Kafka's ``LogSegment.shouldRoll``) when the append
    would take it past ``segment_bytes``; when the append's largest timestamp
    is more than ``segment_ms`` minus the segment's jitter after its first
    batch's (or, if that batch has no timestamp, when the segment was created
    more than that long ago by ``clock``); when its offset or time index is
    full; or when the append's last offset is more than 2**31-1 above the
    segment's base offset.  Each segment's jitter is drawn from ``rng``
    (uniform below ``min(segment_jitter_ms, segment_ms)``), as the broker
    spreads the rolls of its partitions.

    ``flush_messages`` and ``flush_ms`` are the broker's ``flush.messages``
    and ``flush.ms``: after an append that leaves that many offsets, or that
    long, unsynced, the log and its indexes are fsynced (None, the default:
    only on roll, :meth:`flush` and :meth:`close`).  Time is checked on each
    append and by :meth:`maybe_flush`, for a caller that schedules it.

    ``recovery_point`` (a broker's ``recovery-point-offset-checkpoint`` entry):
    opening re-validates only the segment holding it and later ones; earlier
    segments were flushed and are trusted (None: every segment is re-validated).

    ``sync_new_folder=False``: the first segment of a folder without segments is
    created without fsyncing the folder; the caller fsyncs it (a broker creating many
    partitions at once does it off its request path).
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 segment_ms: int = DEFAULT_SEGMENT_MS, segment_jitter_ms: int = 0,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES, start_offset: int = 0,
                 flush_messages: Optional[int] = None, flush_ms: Optional[int] = None,
                 clock: Optional[Callable[[], int]] = None,
                 rng: Optional[random.Random] = None,
                 recovery_point: Optional[int] = None, sync_new_folder: bool = True) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self._sync_new_folder = sync_new_folder
        if segment_bytes < 64:
            raise ValueError("segment_bytes must be at least 64")
        if max_index_bytes < TIME_ENTRY_SIZE:
            raise ValueError(f"max_index_bytes must be at least {TIME_ENTRY_SIZE}")
        if flush_messages is not None and flush_messages < 1:
            raise ValueError("flush_messages must be at least 1 (or None)")
        if flush_ms is not None and flush_ms < 0:
            raise ValueError("flush_ms must be >= 0 (or None)")
        self.segment_bytes = segment_bytes
        if segment_ms < 1:
            raise ValueError("segment_ms must be at least 1")
        if segment_jitter_ms < 0:
            raise ValueError("segment_jitter_ms must be >= 0")
        self.segment_ms = segment_ms
        self.segment_jitter_ms = segment_jitter_ms
        self._rng = rng or random.Random()
        self.flush_messages = flush_messages
        self.flush_ms = flush_ms
        self.index_interval_bytes = index_interval_bytes
        self.max_index_bytes = max_index_bytes
        self._clock = clock or (lambda: int(time.time() * 1000))
        #: Where the last :meth:`append_batches` put its batches (None before the first).
        self.last_append: Optional[AppendedBatches] = None
        self._seg: _ActiveSegment = None  # type: ignore[assignment]  # set by _resume() below
        self._open_txns: Dict[int, int] = {}   # producer id -> first offset of its open transaction
        self.closed = False
        os.makedirs(self.path, exist_ok=True)
        self.recovery: Optional[RecoverReport] = None
        self._recovery_point = recovery_point
        self.next_offset: int = start_offset
        self._lock = FolderLock(self.path, "LogWriter")
        try:
            self._resume()
        except BaseException:
            self._lock.release()
            raise
        self._synced()

    # -- lifecycle ------------------------------------------------------------
    def _resume(self) -> None:
        listing = F.list_partition(self.path)
        if not listing.segments:
            self._open_segment(self.next_offset, existing=not self._sync_new_folder)
            return
        log = Log.open(self.path)
        try:
            self.recovery = log.recover(apply=True, index_interval_bytes=self.index_interval_bytes,
                                        lock=False, recovery_point=self._recovery_point)
            last = log.segments[-1]
            self.next_offset = max(log.next_offset, self.next_offset)
            base = last.base_offset
            rows = last.headers()
            # Transactions still open at the end of the log: their abort must reach .txnindex.
            self._open_txns = I.scan_aborted(log.segments, 0, None).open_transactions
        finally:
            log.close()
        seg = self._open_segment(base, existing=True)
        for r in rows.tolist():
            seg.builder.append(r[C.POSITION], r[C.SIZE], r[C.LAST_OFFSET], r[C.MAX_TIMESTAMP],
                               r[C.LAST_OFFSET])
            if seg.rolling_ts is None:
                seg.rolling_ts = r[C.MAX_TIMESTAMP]
        for i, entry in enumerate(seg.builder.offset_entries):
            _pwrite(seg.index_fd, pack_offset_entry(base, *entry), i * OFFSET_ENTRY_SIZE)
        for i, entry in enumerate(seg.builder.time_entries):
            _pwrite(seg.time_fd, pack_time_entry(base, *entry), i * TIME_ENTRY_SIZE)

    def _open_segment(self, base_offset: int, existing: bool = False) -> _ActiveSegment:
        jitter = 0
        if self.segment_jitter_ms:
            # Kafka's LogConfig.randomSegmentJitter, drawn per segment.
            jitter = self._rng.randrange(min(self.segment_jitter_ms, self.segment_ms))
        self._seg = _ActiveSegment(self.path, base_offset, self.index_interval_bytes,
                                   self.max_index_bytes, self._clock(), jitter)
        if not existing:
            F.fsync_dir(self.path)
        return self._seg

    def roll(self) -> None:
        """Close the active segment (final time entry, trimmed indexes, fsync) and start a new one."""
        self._check_open()
        if self._seg.size == 0:
            return
        self._seg.close()
        self._synced()
        self._open_segment(self.next_offset)

    def flush(self) -> None:
        """fsync the active segment's log and indexes (earlier segments were synced on roll)."""
        self._check_open()
        self._seg.flush()
        self._synced()

    def _synced(self) -> None:
        """Everything written so far is on disk: restart the flush policy's counts."""
        self._flushed_offset = self.next_offset
        self._last_flush_ms = self._clock()

    def maybe_flush(self) -> bool:
        """Flush if ``flush_messages`` or ``flush_ms`` says so; whether it flushed."""
        self._check_open()
        if self.next_offset == self._flushed_offset:
            return False
        due = ((self.flush_messages is not None
                and self.next_offset - self._flushed_offset >= self.flush_messages)
               or (self.flush_ms is not None
                   and self._clock() - self._last_flush_ms >= self.flush_ms))
        if due:
            self.flush()
        return due

    @property
    def first_unstable_offset(self) -> int:
        """First offset of the oldest transaction still open in this log (its last stable
        offset), or :attr:`next_offset` when none is open."""
        return min(self._open_txns.values(), default=self.next_offset)

    @property
    def active_segment_base(self) -> int:
        """Base offset of the segment being appended to (it changes when the log rolls)."""
        return self._seg.base_offset

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._seg.close()
        finally:
            self.closed = True
            self._lock.release()

    def __enter__(self) -> "LogWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise LogError(f"LogWriter for {self.path} is closed")

    # -- appending ------------------------------------------------------------
    def append_batch(self, batch: Bytes, *, assign_offsets: bool = True) -> Tuple[int, int]:
        """Append one encoded batch (or v0/v1 message set); ``(first_offset, last_offset)``."""
        return self.append_batches([batch], assign_offsets=assign_offsets)

    def append_batches(self, batches: Sequence[Bytes], *, assign_offsets: bool = True,
                       trusted: bool = False) -> Tuple[int, int]:
        """Append several batches as one append (one index decision, like a follower's fetch chunk).

        With ``assign_offsets`` (default) batches are re-based onto the next
        offsets; otherwise their own offsets are kept and must lie above
        everything written (gaps allowed, as in compacted logs).  ``trusted``
        is for batches this package's own encoder just built: their CRC and
        framing are still checked, but not record by record (the records'
        count and offsets, see :func:`validate_batches`), which costs more
        than building them.
        """
        self._check_open()
        pieces: List[Bytes] = []        # what goes to the .log, in order (no copy of the records)
        parts: List[Bytes] = []         # each append's data, for the transaction index
        rows_all: List[RowList] = []
        next_offset = self.next_offset
        first_offset: Optional[int] = None
        for raw in batches:
            data, head, rows, first = self._prepare(raw, next_offset, assign_offsets, trusted)
            if head is not None:
                pieces.append(head)
            pieces.append(data if head is None else memoryview(data)[len(head):])
            parts.append(data)
            rows_all.append(rows)
            if first_offset is None:
                first_offset = first
            next_offset = rows[-1][C.LAST_OFFSET] + 1
        if not parts or first_offset is None:
            raise ValueError("append_batches needs at least one batch")
        size = sum(len(p) for p in pieces)
        last_offset = next_offset - 1
        max_ts, offset_of_max = NO_TIMESTAMP, last_offset
        first_max_ts = rows_all[0][0][C.MAX_TIMESTAMP]   # the first batch's, even if none
        appended: List[Tuple[int, int, bool]] = []
        start = 0                       # each part's start, from the append's first byte
        for rows, data in zip(rows_all, parts):
            for r in rows:
                if r[C.MAX_TIMESTAMP] > max_ts:
                    max_ts, offset_of_max = r[C.MAX_TIMESTAMP], r[C.LAST_OFFSET]
                appended.append((r[C.LAST_OFFSET], start + r[C.POSITION],
                                 r[C.MAGIC] == 2 and bool(r[C.ATTRIBUTES] & _TXN_OR_CONTROL)))
            start += len(data)
        self._maybe_roll(size, first_offset, last_offset, max_ts)
        seg = self._seg
        position = seg.size
        written = _pwritev(seg.log_fd, pieces, position)
        if written != size:
            raise LogError(f"short write to {seg.log_path} ({written} of {size} bytes); "
                           "the disk may be full — run recover before appending again")
        seg.size += size
        seg.dirty = True
        if seg.rolling_ts is None:
            seg.rolling_ts = first_max_ts
        off_entry, time_entry = seg.builder.append(position, size, last_offset, max_ts,
                                                   offset_of_max)
        seg.write_entries(off_entry, time_entry)
        self._track_transactions(rows_all, payload_parts=parts)
        self.next_offset = next_offset
        self.last_append = AppendedBatches(seg.base_offset, seg.log_path, position, seg.size,
                                           [(last, position + at, txn) for last, at, txn in appended])
        if self.flush_messages is not None or self.flush_ms is not None:
            self.maybe_flush()
        return first_offset, last_offset

    def append_segments(self, folder: Union[str, "os.PathLike[str]"]) -> Tuple[int, int]:
        """Move the segments of partition folder ``folder`` to the end of this log, re-based
        onto the next offsets; ``(first_offset, last_offset)``.

        For large appends already laid out as segments (a Spark task's staged
        partition): each segment's ``.log``, ``.index`` and ``.timeindex`` are
        renamed into this folder instead of copied.  Index entries hold offsets
        relative to their segment's base, so only each batch's base offset
        changes, rewritten in place.  The active segment is closed first (or
        dropped, if empty) and a new one opened after.  ``folder`` (same
        filesystem, its writer closed) must hold v2 batches with consecutive
        offsets, no transactions; every batch's CRC is checked before anything
        moves.  Its segments are gone afterwards.
        """
        self._check_open()
        src = os.path.abspath(os.fspath(folder))
        with FolderLock(src, "LogWriter.append_segments"):
            plan = []
            offset = self.next_offset
            for files in F.list_partition(src).segments:
                if files.log is None or files.txnindex or not (files.index and files.timeindex):
                    raise LogError(f"{files.log or files.base_offset}: append_segments moves "
                                   "segments with a log, both indexes and no transactions only")
                rows = self._scan_segment(files.log)
                if not len(rows):
                    continue
                first = int(rows[0, C.BASE_OFFSET])
                if first != files.base_offset or (rows[1:, C.BASE_OFFSET]
                                                  != rows[:-1, C.LAST_OFFSET] + 1).any():
                    raise LogError(f"{files.log}: offsets are not consecutive from the segment's "
                                   "base; append its batches instead")
                plan.append((files, files.log, files.index, files.timeindex, rows, offset - first))
                offset += int(rows[-1, C.LAST_OFFSET]) - first + 1
            if not plan:
                raise ValueError(f"append_segments: {src} holds no batches")
            active = self._seg
            if active.size:
                active.close()
                self._synced()
            else:                                   # the empty active segment makes way
                for fd in (active.log_fd, active.index_fd, active.time_fd):
                    os.close(fd)
                for p in (active.log_path, active.index_path, active.time_path):
                    os.remove(p)
            first_offset = self.next_offset
            try:
                for seg_files, log_path, index_path, time_path, rows, delta in plan:
                    fd = os.open(log_path, os.O_RDWR | getattr(os, "O_BINARY", 0))
                    try:
                        for pos, base in rows[:, [C.POSITION, C.BASE_OFFSET]].tolist():
                            _pwrite(fd, (base + delta).to_bytes(8, "big", signed=True), pos)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    new_base = seg_files.base_offset + delta
                    for path, suffix in ((log_path, F.LOG_SUFFIX),
                                         (index_path, F.INDEX_SUFFIX),
                                         (time_path, F.TIME_INDEX_SUFFIX)):
                        os.replace(path, os.path.join(self.path, F.segment_file_name(new_base, suffix)))
                    self.next_offset = int(rows[-1, C.LAST_OFFSET]) + delta + 1
            finally:
                self._open_segment(self.next_offset)    # fsyncs the folder
                self._synced()
        return first_offset, self.next_offset - 1

    @staticmethod
    def _scan_segment(path: str) -> "HeaderRows":
        """Batch headers of a closed segment's ``.log``, every CRC checked."""
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                return K.scan_batches(b"", 0, 0, -1, True)[0]
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as data:
                rows, stop, status = K.scan_batches(data, 0, size, -1, True)
        if status != C.OK or stop != size:
            raise CorruptRecordError(f"{path}: {C.STATUS_NAMES[status]} at byte {stop} of "
                                     f"{size}; nothing was moved", position=stop,
                                     reason="crc" if status == C.CRC_MISMATCH else "length")
        if len(rows) and ((rows[:, C.MAGIC] != 2).any()
                          or (rows[:, C.ATTRIBUTES] & (C.TRANSACTIONAL_MASK | C.CONTROL_MASK)).any()
                          or (rows[:, C.RECORD_COUNT]
                              != rows[:, C.LAST_OFFSET] - rows[:, C.BASE_OFFSET] + 1).any()):
            raise LogError(f"{path}: append_segments moves v2 data batches with consecutive "
                           "offsets only")
        return rows

    def append_records(self, records: Iterable[Any], *, magic: int = 2, compression: str = "none",
                       **builder_kwargs: Any) -> Tuple[int, int]:
        """Build one batch from ``records`` and append it.

        Each record is a value (bytes/None), a ``(key, value)`` pair, or a
        dict with ``value``/``key``/``timestamp``/``headers``; ``builder_kwargs``
        go to :class:`kafkawire.records.BatchBuilder` (producer id,
        transactional, timestamp type, ...).
        """
        b = BatchBuilder(magic, compression, base_offset=self.next_offset, **builder_kwargs)
        for rec in records:
            if isinstance(rec, dict):
                b.append(rec.get("value"), key=rec.get("key"), timestamp=rec.get("timestamp"),
                         headers=rec.get("headers", ()))
            elif isinstance(rec, tuple):
                b.append(rec[1], key=rec[0])
            else:
                b.append(rec)
        if not len(b):
            raise ValueError("append_records needs at least one record")
        return self.append_batch(b.build())

    def append_control(self, marker: str, *, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int = 0, timestamp: Optional[int] = None) -> int:
        """Append a transaction marker (``"commit"``/``"abort"``); an abort is recorded in ``.txnindex``."""
        data = control_batch(marker, base_offset=self.next_offset, producer_id=producer_id,
                             producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                             timestamp=timestamp)
        return self.append_batch(data)[0]

    def _prepare(self, raw: Bytes, next_offset: int, assign: bool, trusted: bool = False
                 ) -> Tuple[Bytes, Optional[bytes], RowList, int]:
        """Check ``raw`` and give it its offsets: ``(data, head, rows, first offset)``.  When
        ``head`` is not None it replaces the start of ``data`` on disk (a single v2 batch's
        new base offset, outside its CRC), so the records are written without a copy."""
        # bytes and views are read in place; a bytearray is copied (its owner may resize it)
        data: Bytes = raw if isinstance(raw, bytes) else \
            _flat(raw) if isinstance(raw, memoryview) else bytes(raw)
        scanned, stop, status = K.scan_batches(data, 0, len(data), -1, True)
        if status == C.CRC_MISMATCH:
            raise CorruptRecordError("CRC mismatch: the batch's bytes changed after it was built; "
                                     "nothing was written", position=stop, reason="crc")
        if status != C.OK or stop != len(data) or len(scanned) == 0:
            raise LogError(f"not a complete batch or message set ({C.STATUS_NAMES[status]} at byte "
                           f"{stop} of {len(data)}); build batches with kafkawire.records.BatchBuilder")
        rows: RowList = scanned.tolist()
        if not trusted:
            validate_batches(data, produced=assign, rows=rows)
        head_row = rows[0]
        first = head_row[C.BASE_OFFSET]
        if head_row[C.MAGIC] < 2 and head_row[C.RECORD_COUNT] < 0:
            # A compressed wrapper carries its last inner offset; the first needs decompression.
            first = next(iter(iter_batches(data))).base_offset
        head = None
        if assign:
            if head_row[C.MAGIC] == 2 and len(rows) == 1:
                head = next_offset.to_bytes(8, "big", signed=True)
                head_row[C.LAST_OFFSET] += next_offset - first
                head_row[C.BASE_OFFSET] = next_offset
            else:
                data = set_base_offset(data, next_offset)
                rows = K.scan_batches(data, 0, len(data), -1, False)[0].tolist()
            first = next_offset
        elif first < next_offset:
            raise LogError(f"batch offsets start at {first} but the log is already at "
                           f"{next_offset}; offsets must increase (or pass assign_offsets=True)")
        return data, head, rows, first

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int, max_ts: int) -> None:
        seg = self._seg
        if seg.size == 0:
            if first_offset is not None and first_offset < seg.base_offset:
                raise LogError(f"offset {first_offset} is below segment base {seg.base_offset}")
            if last_offset - seg.base_offset > _INT32_MAX:
                self._restart_empty(first_offset)
            return
        waited = seg.time_waited_for_roll(self._clock(), max_ts)
        if (seg.size + size > self.segment_bytes or waited > self.segment_ms - seg.roll_jitter_ms
                or seg.index_full or last_offset - seg.base_offset > _INT32_MAX):
            seg.close()
            self._synced()
            self._open_segment(first_offset)

    def _restart_empty(self, base: int) -> None:
        seg = self._seg
        for fd in (seg.log_fd, seg.index_fd, seg.time_fd):
            os.close(fd)
        for p in (seg.log_path, seg.index_path, seg.time_path):
            os.remove(p)
        self._open_segment(base)

    def _track_transactions(self, rows_all: Sequence[RowList],
                            payload_parts: Sequence[Bytes]) -> None:
        for rows, data in zip(rows_all, payload_parts):
            for r in rows:
                if r[C.MAGIC] != 2 or not r[C.ATTRIBUTES] & C.TRANSACTIONAL_MASK:
                    continue
                pid = r[C.PRODUCER_ID]
                if r[C.ATTRIBUTES] & C.CONTROL_MASK:
                    first = self._open_txns.pop(pid, None)
                    pos = r[C.POSITION]
                    marker = RecordBatch.from_buffer(data, pos).control_type
                    if marker == "abort" and first is not None:
                        lso = min(self._open_txns.values(), default=r[C.LAST_OFFSET] + 1)
                        self._seg.add_aborted(AbortedTxn(pid, first, r[C.LAST_OFFSET], lso))
                else:
                    self._open_txns.setdefault(pid, r[C.BASE_OFFSET])
