"""``recover``: Kafka's ``LogSegment.recover`` — keep the longest valid prefix, rebuild indexes.

For each segment, batches are read from the start while they are valid
(Kafka's ``ensureValid``: complete, sane length, known magic, CRC matching;
plus ``ensureOffsetInRange``: the last offset fits the segment's int32
relative offsets).  The first invalid batch and everything after it are cut;
as the broker does after a truncation, later segments are taken out of the
log too.  Indexes are rebuilt by the broker's ``index.interval.bytes`` rule,
a damaged ``.txnindex`` from the log's transaction markers, and indexes left
preallocated by a broker that crashed are trimmed to their entries, as a
clean shutdown leaves them.

The whole recovery is planned before anything changes, and the plan says
exactly what is removed: per partition, the segments, bytes, offset ranges
and record counts (:attr:`RecoverReport.removed`).  A dry run (the default)
only reports.  With ``apply=True`` the partition folder's lock is taken
(see :mod:`kafkawire.log.lock`), the plan is made again under it, and it is
refused (:class:`~kafkawire.errors.LogInUseError`) while a reader of the same
``Log`` still holds batches or records mapped from it (truncating under a
live map kills the reader).  Then the cut bytes are first saved beside the
segment as ``<base>.log.cut-<time>-<pid>`` (later segments' files are moved
the same way), each saved file created new, never replacing one; then the
``.log`` is replaced by a copy of its valid prefix (never truncated in place,
so a reader in another process keeps the file it mapped) and fresh indexes
are written (through a temporary file and an atomic rename).  Files named
``*.cut-*`` are ignored by every reader.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from kafkawire import _scan_common as C
from kafkawire.errors import IndexCorruptError, LogInUseError
from kafkawire.log.files import (INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
                                  write_atomic)
from kafkawire.log.index import (DEFAULT_INDEX_INTERVAL_BYTES, OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE,
                                 IndexBuilder, load_offset_index, load_time_index)
from kafkawire.log.lock import FolderLock
from kafkawire.log.swap import complete_interrupted_swaps
from kafkawire.log.txnindex import AbortedTxn, pack_txn_entry, read_txn_index
from kafkawire.log.verify import STATUS_TEXT, VerifyReport, check_segment_indexes

_log = logging.getLogger("kafkawire.log.recover")

if TYPE_CHECKING:
    from kafkawire.log.log import Log
    from kafkawire.log.segment import HeaderRows, Segment

_INT32_MAX = 0x7FFFFFFF


@dataclass
class RemovedRange:
    """Data a recovery takes out of the log: a segment's cut tail, or a whole later segment.

    Offsets and counts are read from the batch headers found in the removed
    bytes (a damaged region may hide more): ``records`` counts the records of
    those batches (a compressed v0/v1 wrapper counts as its offsets),
    ``unreadable_bytes`` the bytes no header could be read from.
    """

    path: str
    position: int
    bytes: int
    reason: str
    first_offset: Optional[int] = None
    last_offset: Optional[int] = None
    batches: int = 0
    records: int = 0
    unreadable_bytes: int = 0
    saved_to: Optional[str] = None

    def describe(self) -> str:
        offsets = ("no readable batch" if self.first_offset is None
                   else f"offsets {self.first_offset}..{self.last_offset}, {self.records} records "
                        f"in {self.batches} batches")
        extra = f", {self.unreadable_bytes} bytes unreadable" if self.unreadable_bytes else ""
        return f"{self.bytes} bytes from position {self.position} ({offsets}{extra}): {self.reason}"


@dataclass
class SegmentRecovery:
    """What recovery found (and did) for one segment."""

    path: str
    size: int
    valid_bytes: int
    batches: int
    problem: Optional[str] = None          # why the valid prefix ends early
    problem_position: Optional[int] = None
    index_rebuilt: bool = False            # the on-disk indexes differ from the rebuilt ones
    saved_to: Optional[str] = None         # where the cut bytes were saved (apply only)
    next_offset: int = -1                  # one past the last offset kept
    records: int = 0                       # records in the batches kept
    txnindex_rebuilt: bool = False         # the .txnindex was damaged and is rebuilt from the log
    txnindex_problem: Optional[str] = None
    #: Preallocated indexes trimmed to their entries: ``(path, size, trimmed size)``.
    indexes_trimmed: List[Tuple[str, int, int]] = field(default_factory=list)

    @property
    def truncated_bytes(self) -> int:
        return self.size - self.valid_bytes


@dataclass
class RecoverReport:
    """Per-segment results and what is removed; ``clean`` when nothing had to be cut or rebuilt.

    ``removed`` lists every part of the log taken out (the cut segment's
    tail, then each later segment), with its bytes, offsets and records;
    ``kept_records``/``removed_records`` total them for the partition.
    """

    applied: bool
    segments: List[SegmentRecovery] = field(default_factory=list)
    removed_segments: List[str] = field(default_factory=list)   # later segments taken out
    saved_files: List[str] = field(default_factory=list)
    removed: List[RemovedRange] = field(default_factory=list)
    path: Optional[str] = None
    #: Steps finishing (or rolling back) a segment swap a crash interrupted (see kafkawire.log.swap).
    swaps: List[str] = field(default_factory=list)
    #: The recovery point recovery started from (None: every segment was re-validated).
    recovery_point: Optional[int] = None
    #: Segments wholly below the recovery point: trusted, not re-validated (Kafka's rule).
    trusted_segments: int = 0

    @property
    def truncated_bytes(self) -> int:
        """Bytes cut from the segment where the damage is (later segments not included)."""
        return sum(s.truncated_bytes for s in self.segments)

    @property
    def removed_bytes(self) -> int:
        """Every byte taken out of the log: the cut tail plus later segments."""
        return sum(r.bytes for r in self.removed)

    @property
    def removed_records(self) -> int:
        return sum(r.records for r in self.removed)

    @property
    def kept_records(self) -> int:
        return sum(s.records for s in self.segments)

    @property
    def removed_offsets(self) -> List[Tuple[int, int]]:
        """The offset ranges of the removed batches (merged where they touch)."""
        out: List[Tuple[int, int]] = []
        for r in self.removed:
            if r.first_offset is None or r.last_offset is None:
                continue
            if out and r.first_offset <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], r.last_offset))
            else:
                out.append((r.first_offset, r.last_offset))
        return out

    @property
    def clean(self) -> bool:
        return not self.removed and not self.removed_segments and not self.swaps and all(
            s.truncated_bytes == 0 and not s.index_rebuilt and not s.txnindex_rebuilt
            for s in self.segments)

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d.update(truncated_bytes=self.truncated_bytes, removed_bytes=self.removed_bytes,
                 removed_records=self.removed_records, kept_records=self.kept_records,
                 removed_offsets=[list(r) for r in self.removed_offsets], clean=self.clean)
        return d

    def summary(self) -> str:
        """One line: what is (or would be) removed, and what that costs."""
        if not self.removed:
            return "nothing to remove"
        total = self.kept_records + self.removed_records
        share = f", {100.0 * self.removed_records / total:.1f}% of its {total} records" if total else ""
        ranges = ", ".join(f"{a}..{b}" for a, b in self.removed_offsets) or "none readable"
        verb = "removed" if self.applied else "to remove"
        files = len(self.removed_segments)
        return (f"{verb}: {self.removed_bytes} bytes, {self.removed_records} records, offsets "
                f"{ranges}{share}; {self.kept_records} records kept"
                + (f"; {files} later segment(s) taken out" if files else ""))

    def __str__(self) -> str:
        mode = "applied" if self.applied else "dry run"
        lines = [f"recover ({mode}): {len(self.segments) + len(self.removed_segments)} segments, "
                 f"{self.truncated_bytes} bytes to cut; {self.summary()}"]
        for s in self.segments:
            what = []
            if s.truncated_bytes:
                what.append(f"keep {s.valid_bytes} of {s.size} bytes ({s.problem} at position "
                            f"{s.problem_position})")
            if s.index_rebuilt:
                what.append("rebuild indexes")
            if s.txnindex_rebuilt:
                what.append(f"rebuild .txnindex from the log ({s.txnindex_problem})")
            for path, size, new in s.indexes_trimmed:
                what.append(f"trim preallocated {os.path.basename(path)} from {size} to {new} bytes")
            if s.saved_to:
                what.append(f"cut bytes saved to {s.saved_to}")
            if what:
                lines.append(f"  {s.path}: " + "; ".join(what))
        for step in self.swaps:
            lines.append(f"  interrupted compaction: {step}")
        for r in self.removed:
            line = f"  {r.path}: remove {r.describe()}"
            if r.saved_to:
                line += f"; saved to {r.saved_to}"
            lines.append(line)
        return "\n".join(lines)


def _count(rows: HeaderRows) -> Tuple[int, Optional[int], Optional[int]]:
    """``(records, first offset, last offset)`` of header rows."""
    if len(rows) == 0:
        return 0, None, None
    records = 0
    first = None
    for r in rows.tolist():
        if r[C.RECORD_COUNT] >= 0:
            records += r[C.RECORD_COUNT]
            start = r[C.BASE_OFFSET]
        else:   # compressed v0/v1 wrapper: its header names only its last inner offset
            records += 1
            start = r[C.LAST_OFFSET]
        first = start if first is None else min(first, start)
    return records, first, int(rows[:, C.LAST_OFFSET].max())


def _removed_part(seg: Segment, start: int, reason: str) -> RemovedRange:
    """What the bytes of ``seg`` from ``start`` hold, by their readable batch headers (CRC
    not checked: a batch whose bytes changed still tells its offsets and record count)."""
    rows = seg.scan(start, -1, -1, False)[0]
    readable = int(rows[:, C.SIZE].sum()) if len(rows) else 0
    records, first, last = _count(rows)
    return RemovedRange(seg.path, start, seg.size - start, reason, first, last, len(rows),
                        records, max(seg.size - start - readable, 0))


def _recover_segment(seg: Segment, interval: int) -> Tuple[SegmentRecovery, IndexBuilder, HeaderRows]:
    """``(SegmentRecovery, IndexBuilder, kept rows)`` for one segment, without touching files."""
    b = IndexBuilder(seg.base_offset, interval)
    rows, stop, status = seg.scan(0, -1, -1, True)
    valid = 0
    n = 0
    next_offset = seg.base_offset
    problem = None
    for r in rows.tolist():
        if r[C.LAST_OFFSET] - seg.base_offset > _INT32_MAX or r[C.LAST_OFFSET] < seg.base_offset:
            problem = (f"offset {r[C.LAST_OFFSET]} does not fit segment {seg.base_offset}'s "
                       "relative offsets")
            break
        b.append(r[C.POSITION], r[C.SIZE], r[C.LAST_OFFSET], r[C.MAX_TIMESTAMP], r[C.LAST_OFFSET])
        valid = r[C.POSITION] + r[C.SIZE]
        next_offset = r[C.LAST_OFFSET] + 1
        n += 1
    else:
        if status != C.OK:
            problem = STATUS_TEXT.get(status, ("corrupt", "unreadable batch"))[1]
    b.finish()
    kept = rows[:n]
    rec = SegmentRecovery(seg.path, seg.size, valid, n, problem, valid if problem else None,
                          next_offset=next_offset, records=_count(kept)[0])
    # Indexes are rewritten when they fail the checks verify() makes against the log
    # (an index built from other appends, e.g. follower chunks, is kept when it is right).
    check = VerifyReport()
    check_segment_indexes(seg, check, kept[:, C.POSITION].tolist(), _first_offsets(kept),
                          kept[:, C.LAST_OFFSET].tolist(), kept[:, C.MAX_TIMESTAMP].tolist())
    absent = seg.files.index is None or seg.files.timeindex is None
    rec.index_rebuilt = bool(check.problems) or (absent and n > 0) or rec.truncated_bytes > 0
    if not rec.index_rebuilt:
        # A crashed broker leaves its active segment's indexes preallocated: trim them to
        # their entries, as a clean shutdown does.
        off = load_offset_index(seg.files.index, seg.base_offset, seg.size, storage=seg.storage)
        tim = load_time_index(seg.files.timeindex, seg.base_offset, seg.size, storage=seg.storage)
        for idx, width in ((off, OFFSET_ENTRY_SIZE), (tim, TIME_ENTRY_SIZE)):
            if idx.path is None:
                continue
            size = seg.storage.size(idx.path)
            if size > idx.entries * width:
                rec.indexes_trimmed.append((idx.path, size, idx.entries * width))
    return rec, b, kept


def _first_offsets(rows: HeaderRows) -> List[int]:
    return [r[C.BASE_OFFSET] if r[C.MAGIC] == 2 else (-1 if r[C.RECORD_COUNT] < 0 else r[C.LAST_OFFSET])
            for r in rows.tolist()]


def _aborted_from_log(plans: Sequence[Any]) -> Dict[int, List[AbortedTxn]]:
    """Per kept segment (by index in ``plans``), the aborted transactions whose marker it holds,
    rebuilt from the kept batches as a broker's recovery rebuilds ``.txnindex``."""
    out: Dict[int, List[AbortedTxn]] = {}
    open_txns: Dict[int, int] = {}
    for i, (seg, _rec, _b, kept) in enumerate(plans):
        txn = (kept[:, C.MAGIC] == 2) & ((kept[:, C.ATTRIBUTES] & C.TRANSACTIONAL_MASK) != 0)
        for r in kept[txn].tolist():
            pid = r[C.PRODUCER_ID]
            if not r[C.ATTRIBUTES] & C.CONTROL_MASK:
                open_txns.setdefault(pid, r[C.BASE_OFFSET])
                continue
            first = open_txns.pop(pid, None)
            if first is None:
                continue
            if seg.batch_at(r[C.POSITION]).control_type == "abort":
                lso = min(open_txns.values(), default=r[C.LAST_OFFSET] + 1)
                out.setdefault(i, []).append(AbortedTxn(pid, first, r[C.LAST_OFFSET], lso))
    return out


def _first_to_validate(segs: Sequence[Segment], recovery_point: Optional[int]) -> int:
    """Index of the first segment to re-validate: the one holding ``recovery_point`` (every
    offset below it was flushed before the checkpoint was written), so the segments wholly
    below it are trusted, as Kafka's ``LogLoader`` trusts them; the last segment is always
    re-validated."""
    if recovery_point is None or not segs:
        return 0
    first = 0
    for i in range(1, len(segs)):
        if segs[i].base_offset <= recovery_point:
            first = i
    return first


def plan_recovery(log: Log, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                  applied: bool = False, recovery_point: Optional[int] = None,
                  ) -> Tuple[RecoverReport, List[Any], Sequence[Segment]]:
    """``(report, plans)``: the whole recovery of ``log`` worked out, nothing changed.

    With ``recovery_point`` (the ``recovery-point-offset-checkpoint`` entry) only the
    segment holding it and later ones are re-validated; earlier ones are trusted."""
    report = RecoverReport(applied=applied, path=log.path, recovery_point=recovery_point)
    plans = []
    trusted = _first_to_validate(log.segments, recovery_point)
    report.trusted_segments = trusted
    segs = log.segments[trusted:]
    cut_at = None
    for i, seg in enumerate(segs):
        rec, builder, kept = _recover_segment(seg, index_interval_bytes)
        report.segments.append(rec)
        plans.append((seg, rec, builder, kept))
        if rec.truncated_bytes:
            report.removed.append(_removed_part(seg, rec.valid_bytes,
                                                f"{rec.problem} at position {rec.valid_bytes}"))
            cut_at = i
            break
    later = segs[cut_at + 1:] if cut_at is not None else ()
    for seg in later:
        report.removed_segments.append(seg.path)
        report.removed.append(_removed_part(seg, 0, "after the truncation point, taken out of the log"))
    txns: Dict[int, List[AbortedTxn]] = {}
    for i, (seg, rec, _b, _kept) in enumerate(plans):
        try:
            on_disk = read_txn_index(seg.files.txnindex, storage=seg.storage, log_size=seg.size)
        except IndexCorruptError as exc:
            rec.txnindex_rebuilt = True
            rec.txnindex_problem = str(exc)
            continue
        txns[i] = [t for t in on_disk if t.last_offset < rec.next_offset]
    if any(rec.txnindex_rebuilt for _s, rec, _b, _k in plans):
        rebuilt = _aborted_from_log(plans)
        for i, (_s, rec, _b, _k) in enumerate(plans):
            if rec.txnindex_rebuilt:
                txns[i] = rebuilt.get(i, [])
    return report, [(seg, rec, b, txns.get(i)) for i, (seg, rec, b, _k) in enumerate(plans)], later


_TMP = ".kafkawire-tmp"  # what recovery's temporary files end in (never a name Kafka reads)


def _keep_prefix(path: str, length: int) -> None:
    """Replace ``path`` by a copy of its first ``length`` bytes (atomic rename).

    Never truncated in place: a reader in any process that has the file mapped
    keeps the old file and its bytes (touching a mapped page past a truncated
    end kills it with SIGBUS).
    """
    tmp = path + _TMP
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        left = length
        while left > 0:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                break
            dst.write(chunk)
            left -= len(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    shutil.copymode(path, tmp)
    os.replace(tmp, path)


def _stem(seg: Segment) -> str:
    stem: str = seg.path[:-len(LOG_SUFFIX)]
    return stem


def _new_cut_name(path: str, stamp: str) -> str:
    """A ``<path>.cut-<stamp>`` name (with ``-N`` added until unused)."""
    name = f"{path}.cut-{stamp}"
    n = 1
    while os.path.lexists(name):
        name = f"{path}.cut-{stamp}-{n}"
        n += 1
    return name


def _save_tail(path: str, start: int, stamp: str) -> str:
    """Copy ``path`` from ``start`` into a new ``.cut-`` file (created exclusively)."""
    while True:
        saved = _new_cut_name(path, stamp)
        try:
            dst = open(saved, "xb")
        except FileExistsError:
            continue
        with open(path, "rb") as src, dst:
            src.seek(start)
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
        return saved


def _move_aside(path: str, stamp: str) -> str:
    """Rename ``path`` to a new ``.cut-`` name, never replacing an existing file."""
    while True:
        saved = _new_cut_name(path, stamp)
        try:
            os.link(path, saved)
        except FileExistsError:
            continue
        except OSError:
            # no hard links here: a rename to a name checked unused just now
            if os.path.lexists(saved):
                continue
            os.rename(path, saved)
            return saved
        os.unlink(path)
        return saved


def recover_log(log: Log, apply: bool = False, *,
                index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                lock: bool = True, recovery_point: Optional[int] = None) -> RecoverReport:
    """Recover every segment of ``log``; see the module docstring.

    ``lock=False`` when the caller already holds the folder's lock (a
    ``LogWriter`` recovering the folder it opened).  ``recovery_point``: re-validate
    only the segment holding this offset and later ones (a broker's start-up).
    """
    local = os.path.isdir(log.path)
    if not apply:
        report = plan_recovery(log, index_interval_bytes, recovery_point=recovery_point)[0]
        report.swaps = complete_interrupted_swaps(log.path, apply=False) if local else []
        return report
    held = FolderLock(log.path, "recover --apply") if lock else None
    try:
        # A compaction's segment swap cut short: completed or rolled back as a broker does.
        swaps = complete_interrupted_swaps(log.path) if local else []
        log.refresh()
        report, plans, later = plan_recovery(log, index_interval_bytes, applied=True,
                                             recovery_point=recovery_point)
        report.swaps = swaps
        busy = log.release_maps()
        if busy:
            raise LogInUseError(
                f"cannot recover {log.path} while a reader of this Log still holds batches or "
                f"records of {busy[0]} (a record iterator not run to its end, a batch kept): "
                "truncating under it would crash the process; finish or drop the readers "
                "first (nothing was changed)")
        _apply(report, plans, later)
    finally:
        if held is not None:
            held.release()
    log.segments = ()
    log.refresh()
    return report


def _apply(report: RecoverReport, plans: List[Any], later: Sequence[Segment]) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}"
    removed = iter(report.removed)
    for seg, rec, builder, txns in plans:
        stem = _stem(seg)
        if rec.truncated_bytes:
            saved = _save_tail(seg.path, rec.valid_bytes, stamp)
            rec.saved_to = saved
            next(removed).saved_to = saved
            report.saved_files.append(saved)
            _log.info("%s: cut to %d of %d bytes (%s at position %s); cut bytes saved to %s",
                      seg.path, rec.valid_bytes, rec.size, rec.problem, rec.problem_position, saved)
            _keep_prefix(seg.path, rec.valid_bytes)
        if rec.index_rebuilt:
            write_atomic(stem + INDEX_SUFFIX, builder.offset_index_bytes(), tmp_suffix=_TMP)
            write_atomic(stem + TIME_INDEX_SUFFIX, builder.time_index_bytes(), tmp_suffix=_TMP)
            _log.info("%s: indexes rewritten from the log", stem)
        for path, _size, new in rec.indexes_trimmed:
            with open(path, "r+b") as f:
                f.truncate(new)
                f.flush()
                os.fsync(f.fileno())
        if txns is not None and (rec.txnindex_rebuilt or (
                seg.files.txnindex and rec.truncated_bytes)):
            if txns or seg.files.txnindex:
                write_atomic(stem + TXN_INDEX_SUFFIX, b"".join(pack_txn_entry(t) for t in txns),
                             tmp_suffix=_TMP)
    for seg in later:
        part = next(removed)
        for p in (seg.files.log, seg.files.index, seg.files.timeindex, seg.files.txnindex):
            if p and os.path.exists(p):
                saved = _move_aside(p, stamp)
                report.saved_files.append(saved)
                _log.info("%s: after the truncation point; moved to %s", p, saved)
                if p == seg.files.log:
                    part.saved_to = saved


__all__ = ["RecoverReport", "SegmentRecovery", "RemovedRange", "plan_recovery", "recover_log"]
