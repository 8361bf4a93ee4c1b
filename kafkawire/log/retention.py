"""Retention: delete a partition's oldest segments by age, by size or below a log start offset.

The rules are Kafka's (``UnifiedLog.deleteOldSegments``), applied in its order,
each to what the previous one left:

- ``retention_ms``: the longest prefix of segments whose largest timestamp
  (the file's modification time when no batch has one) is more than
  ``retention_ms`` before now;
- ``retention_bytes``: the oldest segments, as long as what remains of the
  partition stays at or above ``retention_bytes``;
- ``log_start_offset``: segments that lie wholly below it (the next segment
  starts at or below it), as after a DeleteRecords request.

The active (last) segment is never deleted.  :func:`plan_retention` only
looks; :meth:`RetentionPlan.apply` renames each doomed segment's files
(``.log``, indexes, producer snapshot) to ``<name>.deleted``, as a broker does,
and removes them at once or after ``file_delete_delay_ms``.

Readers are not disturbed: a :class:`~kafkawire.log.Log`'s ``segments`` is a
snapshot that :meth:`~kafkawire.log.Log.refresh` replaces, and before renaming
anything the plan maps the doomed segments of the log it was made from, so an
iterator that took the old snapshot reads on from the mapped (renamed, then
unlinked) files.  Readers in other processes are what ``file_delete_delay_ms``
is for.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from kafkawire import _scan_common as C
from kafkawire.errors import LogError
from kafkawire.log import files as F
from kafkawire.log.lock import FolderLock
from kafkawire.log.log import Log
from kafkawire.log.segment import Segment

log = logging.getLogger("kafkawire.log.retention")

#: Suffix a deleted segment's files get before they are removed (Kafka's ``.deleted``).
DELETED_SUFFIX = ".deleted"

#: The reasons a segment is deleted, in the order Kafka checks them.
REASONS = ("retention_ms", "retention_bytes", "log_start_offset")


@dataclass
class SegmentDeletion:
    """One segment a plan deletes: its offsets ``[base_offset, next_offset)``, bytes, records, why."""

    base_offset: int
    next_offset: int
    size: int
    records: int
    max_timestamp: int
    reason: str
    files: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return dict(base_offset=self.base_offset, next_offset=self.next_offset, bytes=self.size,
                    records=self.records, max_timestamp=self.max_timestamp, reason=self.reason,
                    files=list(self.files))


@dataclass
class RetentionPlan:
    """The segments retention deletes from one partition folder, oldest first."""

    path: str
    deletions: List[SegmentDeletion]
    segments_before: int
    bytes_before: int
    log_start_offset: int          # the partition's first offset once the plan is applied
    applied: bool = False
    _log: Optional[Log] = field(default=None, repr=False, compare=False)

    @property
    def bytes(self) -> int:
        return sum(d.size for d in self.deletions)

    @property
    def records(self) -> int:
        return sum(d.records for d in self.deletions)

    @property
    def empty(self) -> bool:
        return not self.deletions

    def to_dict(self) -> Dict[str, Any]:
        return dict(path=self.path, applied=self.applied, segments=len(self.deletions),
                    bytes=self.bytes, records=self.records, segments_before=self.segments_before,
                    bytes_before=self.bytes_before, log_start_offset=self.log_start_offset,
                    deletions=[d.to_dict() for d in self.deletions])

    def __str__(self) -> str:
        if not self.deletions:
            return f"nothing to delete ({self.segments_before} segments, {self.bytes_before} bytes)"
        verb = "deleted" if self.applied else "would delete"
        lines = [f"{verb} {len(self.deletions)} of {self.segments_before} segments, "
                 f"{self.bytes} of {self.bytes_before} bytes, {self.records} records; "
                 f"log start offset {self.log_start_offset}"]
        for d in self.deletions:
            lines.append(f"  segment {d.base_offset}: offsets {d.base_offset}..{d.next_offset - 1}, "
                         f"{d.size} bytes, {d.records} records, max timestamp {d.max_timestamp} "
                         f"({d.reason})")
        return "\n".join(lines)

    def apply(self, *, file_delete_delay_ms: int = 0, locked: bool = False) -> "RetentionPlan":
        """Rename the planned segments' files to ``.deleted``; remove them now (delay 0) or
        after ``file_delete_delay_ms`` (a daemon timer; a later :func:`purge_deleted`, or a
        broker starting on the folder, removes what a process that ended left).

        ``locked``: the caller already holds the folder's ``.lock`` (a broker with its live
        :class:`~kafkawire.log.LogWriter`, which never reads the segments retention deletes)."""
        if self.applied:
            raise LogError(f"{self.path}: this retention plan was already applied")
        if file_delete_delay_ms < 0:
            raise ValueError("file_delete_delay_ms must be >= 0")
        renamed: List[str] = []
        with contextlib.nullcontext() if locked else FolderLock(self.path, "retention --apply"):
            self._keep_readers_whole()
            for d in self.deletions:
                for path in d.files:
                    target = path + DELETED_SUFFIX
                    os.replace(path, target)
                    renamed.append(target)
            F.fsync_dir(self.path)
        self.applied = True
        log.info("%s: %s", self.path, self)
        if self._log is not None:
            self._log.refresh()
        if file_delete_delay_ms == 0:
            _remove(renamed)
        else:
            timer = threading.Timer(file_delete_delay_ms / 1000.0, _remove, args=(renamed,))
            timer.daemon = True
            timer.start()
        return self

    def _keep_readers_whole(self) -> None:
        """Map the doomed segments of the log this plan came from, so iterators holding its
        snapshot keep reading them after the files are renamed and removed."""
        if self._log is None:
            return
        doomed = {d.base_offset for d in self.deletions}
        for seg in self._log.segments:
            if seg.base_offset in doomed:
                try:
                    seg.buffer
                    seg.offset_index
                    seg.time_index
                except LogError as exc:   # a reader of this segment would have met the same
                    log.warning("%s: %s", seg.path, exc)


def _remove(paths: Sequence[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove %s: %s", p, exc)


def _segment_facts(seg: Segment) -> Tuple[int, int, int]:
    """``(next_offset, records, max_timestamp)`` of a segment from its batch headers."""
    rows = seg.headers()
    records = 0
    for r in rows.tolist():
        count = r[C.RECORD_COUNT]
        if count < 0:   # a v0/v1 compressed wrapper: its inner messages
            count = sum(1 for _ in seg.batch_at(r[C.POSITION]))
        records += count
    next_offset = int(rows[-1, C.LAST_OFFSET]) + 1 if len(rows) else seg.base_offset
    return next_offset, records, seg.max_timestamp


def _largest_timestamp(seg: Segment) -> int:
    """Kafka's ``LogSegment.largestTimestamp``: the largest batch timestamp, else the file's mtime."""
    ts = seg.max_timestamp
    if ts >= 0:
        return ts
    return int(os.stat(seg.path).st_mtime * 1000)


def plan_retention(log_or_path: Union[Log, str, "os.PathLike[str]"], *, retention_ms: Optional[int] = None,
                   retention_bytes: Optional[int] = None, log_start_offset: Optional[int] = None,
                   now_ms: Optional[int] = None) -> RetentionPlan:
    """What Kafka's retention would delete from a partition folder (nothing is changed).

    ``log_or_path`` is a :class:`~kafkawire.log.Log` or a partition folder.
    A limit left None (or negative, Kafka's "unlimited") does not apply;
    ``now_ms`` defaults to the clock.
    """
    lg = log_or_path if isinstance(log_or_path, Log) else Log.open(log_or_path)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    segs = lg.segments
    candidates = list(segs[:-1])     # never the active segment
    reasons: List[str] = []

    def take(pred: Callable[[int, Segment], bool], reason: str) -> None:
        while len(reasons) < len(candidates) and pred(len(reasons), candidates[len(reasons)]):
            reasons.append(reason)

    if retention_ms is not None and retention_ms >= 0:
        take(lambda i, s: now - _largest_timestamp(s) > retention_ms, "retention_ms")
    if retention_bytes is not None and retention_bytes >= 0:
        excess = [sum(s.size for s in segs) - retention_bytes
                  - sum(s.size for s in candidates[:len(reasons)])]

        def over(i: int, s: Segment) -> bool:
            if excess[0] - s.size >= 0:
                excess[0] -= s.size
                return True
            return False
        take(over, "retention_bytes")
    if log_start_offset is not None:
        take(lambda i, s: segs[i + 1].base_offset <= log_start_offset, "log_start_offset")

    deletions = []
    for seg, reason in zip(candidates, reasons):
        next_offset, records, max_ts = _segment_facts(seg)
        sf = seg.files
        files = [p for p in (sf.log, sf.index, sf.timeindex, sf.txnindex, sf.snapshot) if p]
        deletions.append(SegmentDeletion(seg.base_offset, next_offset, seg.size, records, max_ts,
                                         reason, files))
    start = segs[len(deletions)].base_offset if segs else 0
    if log_start_offset is not None:
        start = max(start, min(log_start_offset, lg.next_offset))
    return RetentionPlan(lg.path, deletions, len(segs), sum(s.size for s in segs), start,
                         _log=lg)


def purge_deleted(path: Union[str, "os.PathLike[str]"], *, older_than_ms: int = 0, now_ms: Optional[int] = None) -> List[str]:
    """Remove the ``.deleted`` files of partition folder ``path`` renamed more than
    ``older_than_ms`` ago (by the file's change time); the paths removed."""
    folder = os.fspath(path)
    now = time.time() * 1000 if now_ms is None else now_ms
    gone = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(DELETED_SUFFIX):
            continue
        full = os.path.join(folder, name)
        try:
            if now - os.stat(full).st_ctime * 1000 >= older_than_ms:
                os.remove(full)
                gone.append(full)
        except FileNotFoundError:
            pass
    return gone
