"""A partition: the segments of one ``<topic>-<partition>`` folder, read as one log.

``Log.segments`` is a snapshot: a tuple that :meth:`Log.refresh` replaces
rather than edits, with a new ``Segment`` for a file that grew, so a reader
that took it (every iterator here does, when it starts) keeps reading the
segments and bytes it started with.
"""
from __future__ import annotations

import bisect
import gc
import itertools
import os
import weakref
from typing import TYPE_CHECKING, Any, Iterable, Iterator, List, Optional, Tuple, Union, cast

from kafkawire.errors import LogError, OffsetOutOfRangeError, PathError
from kafkawire.log import files as F
from kafkawire.log import isolation as I
from kafkawire.log.recover import RecoverReport, recover_log
from kafkawire.log.segment import Segment
from kafkawire.log.storage import Storage, absolute, storage_for
from kafkawire.log.verify import VerifyReport, verify_log
from kafkawire.records.columnar import ColumnChunk
from kafkawire.records.iterate import Batch

if TYPE_CHECKING:
    from kafkawire.records._types import Record

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
_INF = float("inf")


class Log:
    """One partition folder.  Open with :meth:`Log.open`.

    ``segments`` are ordered by base offset; offsets and timestamps are found
    through each segment's (untrusted) indexes, falling back to scanning.
    """

    def __init__(self, path: str, *, storage: Optional[Storage] = None) -> None:
        self.path = absolute(path)
        self.storage = storage or storage_for(self.path)
        parsed = F.parse_partition_dir_name(os.path.basename(self.path.rstrip(os.sep)))
        self.topic: Optional[str] = parsed[0] if parsed else None
        self.partition: Optional[int] = parsed[1] if parsed else None
        self._snapshot: Tuple[Tuple[Segment, ...], List[int]] = ((), [])
        # Every Segment this Log opened that is still alive (readers may hold old snapshots).
        self._opened: "weakref.WeakSet[Segment]" = weakref.WeakSet()
        self.refresh()

    @classmethod
    def open(cls, partition_dir: Union[str, "os.PathLike[str]"], *,
             storage: Optional[Storage] = None) -> "Log":
        """Open a ``<topic>-<partition>`` folder (any folder of segment files works)."""
        path = os.fspath(partition_dir)
        storage = storage or storage_for(path)
        if not storage.isdir(path):
            raise LogError(f"{path} is not a directory; give a partition folder like "
                           "/var/lib/kafka/data/orders-0")
        if not F.has_segments(path, storage):
            inside = [p for p, key in F.find_partitions(path, storage)
                      if key is not None and p != path]
            if inside:
                names = ", ".join(os.path.basename(p) for p in inside[:3])
                more = ", ..." if len(inside) > 3 else ""
                raise PathError(f"{path} is a log.dirs folder holding {len(inside)} partition "
                                f"folder(s) ({names}{more}), not a partition: open one of them "
                                f"with Log.open, or them all with LogDir.open({path!r})")
        return cls(path, storage=storage)

    def refresh(self) -> None:
        """Pick up appended bytes and new segments (a writer may be active).

        Builds a new :attr:`segments` snapshot: segments whose files and size
        are unchanged are kept, others are opened afresh.  Segments left out
        are not closed here (a reader may still hold them); they close when
        nothing refers to them, or with :meth:`close` while still listed.
        """
        self.files: F.PartitionFiles = F.list_partition(self.path, self.storage)
        old = {s.base_offset: s for s in self.segments}
        segs = []
        for sf in self.files.segments:
            seg = old.get(sf.base_offset)
            # (a kept segment has the same files, so its .log exists)
            if seg is None or seg.files != sf or seg.size != self.storage.size(cast(str, sf.log)):
                seg = Segment(sf, storage=self.storage)
                self._opened.add(seg)
            segs.append(seg)
        self.segments = tuple(segs)

    @property
    def segments(self) -> Tuple[Segment, ...]:
        """The segments, by base offset: a snapshot (see the module docstring)."""
        return self._snapshot[0]

    @segments.setter
    def segments(self, segments: Iterable[Segment]) -> None:
        segments = tuple(segments)
        self._snapshot = (segments, [s.base_offset for s in segments])

    def close(self) -> None:
        for seg in self.segments:
            seg.close()

    def release_maps(self) -> List[str]:
        """Unmap every segment this Log opened (in any snapshot), unless a reader is still
        reading one; the paths still in use (an unfinished record iterator, a batch
        kept): empty when every map is gone.  Nothing is unmapped while an iterator runs."""
        opened = list(self._opened)
        if any(seg.readers for seg in opened):
            # An iterator may be kept only by a reference cycle (an error's traceback).
            gc.collect()
            busy = {seg.path for seg in opened if seg.readers}
            if busy:
                return sorted(busy)
        return sorted({seg.path for seg in opened if not seg.close()})

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Log({self.path!r}, segments={len(self.segments)})"

    # -- extent -------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        """Base offset of the first segment (0 for an empty folder)."""
        segs = self.segments
        return segs[0].base_offset if segs else 0

    @property
    def next_offset(self) -> int:
        """One past the last offset written (the log end offset)."""
        segs = self.segments
        last_base = segs[-1].base_offset if segs else 0
        for seg in reversed(segs):
            if seg.size:
                # a freshly rolled, still empty segment is named by the next offset
                return max(seg.next_offset, last_base)
        return last_base

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    # -- lookups ------------------------------------------------------------
    def _locate(self, offset: int) -> Optional[Tuple[Tuple[Segment, ...], int, int]]:
        """``(segments, index, position)``: the first batch whose last offset is >= ``offset``,
        in the snapshot taken now."""
        segs, bases = self._snapshot
        for i in range(max(bisect.bisect_right(bases, offset) - 1, 0), len(segs)):
            found = segs[i].locate(offset)
            if found is not None:
                return segs, i, found[0]
        return None

    def locate(self, offset: int) -> Tuple[Segment, int]:
        """``(segment, position)`` of the first batch whose last offset is >= ``offset``.

        Raises :class:`~kafkawire.errors.OffsetOutOfRangeError`, stating the log's
        range, when no batch reaches ``offset`` (at or past the log end offset), and
        for an offset below the log start offset (deleted by retention, or never here).
        """
        segs, bases = self._snapshot
        if segs and offset >= segs[0].base_offset:
            for i in range(max(bisect.bisect_right(bases, offset) - 1, 0), len(segs)):
                found = segs[i].locate(offset)
                if found is not None:
                    return segs[i], found[0]
        raise OffsetOutOfRangeError(self._not_here(offset))

    def _not_here(self, offset: int) -> str:
        start, end = self.start_offset, self.next_offset
        if end <= start:
            return f"offset {offset} is not in {self.path}: it holds no batches"
        held = f"it holds offsets {start}..{end - 1}"
        if offset < start:
            return (f"offset {offset} is not in {self.path}: it is below the log start offset "
                    f"({held}; earlier offsets were deleted by retention or never written here)")
        if offset >= end:
            return f"offset {offset} is not in {self.path}: it is past the end ({held})"
        return (f"no readable batch holds offset {offset} in {self.path} ({held}); a segment "
                "may be damaged: run verify")

    def find_timestamp(self, timestamp: int) -> Optional[Tuple[int, int]]:
        """``(offset, timestamp)`` of the first record whose timestamp is >= ``timestamp``.

        As Kafka's ``ListOffsets``: the first segment whose largest timestamp
        reaches the target is searched through its time index; unlike the
        broker, a miss there (possible with out-of-order timestamps) moves on
        to the next segment instead of answering "none".
        """
        segs = self.segments
        start = segs[0].base_offset if segs else 0
        for seg in segs:
            if seg.size and seg.max_timestamp >= timestamp:
                found = seg.find_timestamp(timestamp, start)
                if found is not None:
                    return found
        return None

    def offset_for_timestamp(self, timestamp: int) -> Optional[int]:
        """The first offset whose record timestamp is >= ``timestamp``, or None."""
        found = self.find_timestamp(timestamp)
        return None if found is None else found[0]

    # -- reading ------------------------------------------------------------
    def _resolve(self, start_offset: Optional[int], end_offset: Optional[int],
                 start_timestamp: Optional[int],
                 end_timestamp: Optional[int]) -> Optional[Tuple[int, float]]:
        s = self.start_offset if start_offset is None else start_offset
        e: float = _INF if end_offset is None else end_offset
        if start_timestamp is not None:
            ts_start = self.offset_for_timestamp(start_timestamp)
            if ts_start is None:
                return None
            s = max(s, ts_start)
        if end_timestamp is not None:
            ts_end = self.offset_for_timestamp(end_timestamp)
            if ts_end is not None:
                e = min(e, ts_end)
        return (s, e) if s < e else None

    def _raw_batches(self, s: int, e: float, verify_crc: bool) -> Iterator[Batch]:
        found = self._locate(s)
        if found is None:
            return
        segs, first, pos = found
        for k in range(first, len(segs)):
            for batch in segs[k].batches(pos if k == first else 0, verify_crc=verify_crc):
                if batch.base_offset >= e and batch.last_offset >= e:
                    return
                yield batch

    def aborted_transactions(self, start_offset: Optional[int] = None,
                             end_offset: Optional[int] = None) -> I.AbortedRanges:
        """Aborted transactions touching ``[start_offset, end_offset)``, from control
        markers (scanning on until every transaction open at the end resolves) and
        ``.txnindex`` files; ``last_stable_offset`` is set when a transaction is still open."""
        s = self.start_offset if start_offset is None else start_offset
        found = self._locate(s)
        if found is None:
            return I.AbortedRanges()
        segs, first, pos = found
        return I.scan_aborted(segs[first:], pos, end_offset)

    def batches(self, start_offset: Optional[int] = None, end_offset: Optional[int] = None,
                start_timestamp: Optional[int] = None, end_timestamp: Optional[int] = None, *,
                isolation: str = "read_uncommitted", verify_crc: bool = False) -> Iterator[Batch]:
        """Batch objects overlapping the range (see :meth:`records` for the range rules).

        With ``read_committed``, aborted transactional batches and control
        batches are left out and iteration stops at the last stable offset.
        """
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}")
        rng = self._resolve(start_offset, end_offset, start_timestamp, end_timestamp)
        if rng is None:
            return
        s, e = rng
        if isolation == "read_uncommitted":
            yield from self._raw_batches(s, e, verify_crc)
            return
        aborted = self.aborted_transactions(s, None if e == _INF else int(e))
        if aborted.last_stable_offset is not None:
            e = min(e, aborted.last_stable_offset)
        for batch in self._raw_batches(s, e, verify_crc):
            if batch.is_control:
                continue
            if batch.is_transactional and aborted.is_aborted(batch.producer_id, batch.base_offset):
                continue
            yield batch

    def records(self, start_offset: Optional[int] = None, end_offset: Optional[int] = None,
                start_timestamp: Optional[int] = None, end_timestamp: Optional[int] = None, *,
                isolation: str = "read_uncommitted", include_control: bool = False,
                verify_crc: bool = False) -> Iterator[Record]:
        """Records with ``start_offset <= offset < end_offset``.

        ``start_timestamp``/``end_timestamp`` translate to offsets as Kafka's
        ``offsetsForTimes`` does: reading starts at the first record whose
        timestamp is >= ``start_timestamp`` and stops before the first whose
        timestamp is >= ``end_timestamp`` (records in between are returned in
        offset order whatever their own timestamps).  Control records (commit/
        abort markers) are skipped unless ``include_control`` (never under
        ``read_committed``).  ``verify_crc`` checks each batch's CRC before decoding it
        (a mismatch raises ``CorruptRecordError``).
        """
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}")
        rng = self._resolve(start_offset, end_offset, start_timestamp, end_timestamp)
        if rng is None:
            return iter(())
        # A C-level chain flattens the batches (each decodes lazily as it is iterated):
        # no Python frame per record.
        return itertools.chain.from_iterable(self._record_iterables(rng[0], rng[1], isolation,
                                                                    include_control, verify_crc))

    def _record_iterables(self, s: int, e: float, isolation: str, include_control: bool,
                          verify_crc: bool) -> Iterator[Iterable[Record]]:
        for batch in self.batches(s, None if e == _INF else int(e), isolation=isolation,
                                  verify_crc=verify_crc):
            if batch.is_control and not include_control:
                continue
            if batch.base_offset < s or batch.last_offset >= e:
                yield [r for r in batch if s <= r.offset < e]
            else:
                yield batch

    def column_chunks(self, start_offset: Optional[int] = None, end_offset: Optional[int] = None,
                      start_timestamp: Optional[int] = None, end_timestamp: Optional[int] = None,
                      *, include_headers: bool = False,
                      max_records: int = 65536) -> Iterator[ColumnChunk]:
        """The records of the range decoded into columns (``kafkawire.records.columnar``
        ``ColumnChunk`` objects: numpy arrays of offsets, timestamps, keys, values, headers), one
        segment at a time: deep decoding with no Python object per record.  Control
        records are never included; isolation is read_uncommitted."""
        rng = self._resolve(start_offset, end_offset, start_timestamp, end_timestamp)
        if rng is None:
            return
        s, e = rng
        found = self._locate(s)
        if found is None:
            return
        segs, first, pos = found
        for k in range(first, len(segs)):
            seg = segs[k]
            if seg.base_offset >= e:
                return
            seg.readers += 1
            try:
                yield from seg.column_chunks(pos if k == first else 0, start_offset=s,
                                             end_offset=None if e == _INF else int(e),
                                             include_headers=include_headers,
                                             max_records=max_records)
            finally:
                seg.readers -= 1

    # -- checking -----------------------------------------------------------
    def verify(self, *, check_indexes: bool = True, deep: bool = False) -> VerifyReport:
        """Check every batch and index entry; a :class:`~kafkawire.log.verify.VerifyReport`."""
        return verify_log(self, check_indexes=check_indexes, deep=deep)

    def recover(self, apply: bool = False, **kwargs: Any) -> RecoverReport:
        """Kafka's ``LogSegment.recover`` over every segment (dry run unless ``apply``).

        The report says what is (or would be) removed: bytes, offset ranges and
        records (see :class:`~kafkawire.log.recover.RecoverReport`).  Applying takes
        the folder's lock (``LogLockedError`` while a ``LogWriter`` or another
        recovery holds it) and is refused with ``LogInUseError`` while an iterator or
        batch of this ``Log`` still views a segment: finish or drop readers first.
        """
        return recover_log(self, apply=apply, **kwargs)
