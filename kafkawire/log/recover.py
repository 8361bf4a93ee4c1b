"""``recover``: Kafka's ``LogSegment.recover`` — keep the longest valid prefix, rebuild indexes.

For each segment, batches are read from the start while they are valid
(Kafka's ``ensureValid``: complete, sane length, known magic, CRC matching;
plus ``ensureOffsetInRange``: the last offset fits the segment's int32
relative offsets).  The first invalid batch and everything after it are cut;
as the broker does after a truncation, later segments are taken out of the
log too.  Indexes are rebuilt by the broker's ``index.interval.bytes`` rule.

Nothing is destroyed: a dry run (the default) only reports.  With
``apply=True`` the cut bytes are first saved beside the segment as
``<base>.log.cut-<time>`` (later segments' files are renamed the same way),
then the ``.log`` is truncated and fresh ``.index``/``.timeindex`` are
written (through a temporary file and an atomic rename).  Files named
``*.cut-*`` are ignored by every reader.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from kafkawire import _scan_common as C
from kafkawire.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from kafkawire.log.index import DEFAULT_INDEX_INTERVAL_BYTES, IndexBuilder
from kafkawire.log.txnindex import pack_txn_entry, read_txn_index
from kafkawire.log.verify import STATUS_TEXT, VerifyReport, check_segment_indexes

_log = logging.getLogger("kafkawire.log.recover")

if TYPE_CHECKING:
    from kafkawire.log.log import Log
    from kafkawire.log.segment import HeaderRows, Segment

_INT32_MAX = 0x7FFFFFFF


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

    @property
    def truncated_bytes(self) -> int:
        return self.size - self.valid_bytes


@dataclass
class RecoverReport:
    """Per-segment results; ``clean`` when nothing had to be cut or rebuilt."""

    applied: bool
    segments: List[SegmentRecovery] = field(default_factory=list)
    removed_segments: List[str] = field(default_factory=list)   # later segments taken out
    saved_files: List[str] = field(default_factory=list)

    @property
    def truncated_bytes(self) -> int:
        return sum(s.truncated_bytes for s in self.segments)

    @property
    def clean(self) -> bool:
        return not self.removed_segments and all(
            s.truncated_bytes == 0 and not s.index_rebuilt for s in self.segments)

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["truncated_bytes"] = self.truncated_bytes
        d["clean"] = self.clean
        return d

    def __str__(self) -> str:
        mode = "applied" if self.applied else "dry run"
        lines = [f"recover ({mode}): {len(self.segments)} segments, {self.truncated_bytes} bytes to cut"]
        for s in self.segments:
            if s.truncated_bytes or s.index_rebuilt:
                what = []
                if s.truncated_bytes:
                    what.append(f"keep {s.valid_bytes} of {s.size} bytes ({s.problem} at position "
                                f"{s.problem_position})")
                if s.index_rebuilt:
                    what.append("rebuild indexes")
                if s.saved_to:
                    what.append(f"cut bytes saved to {s.saved_to}")
                lines.append(f"  {s.path}: " + "; ".join(what))
        for p in self.removed_segments:
            lines.append(f"  {p}: after the truncation point, taken out of the log")
        return "\n".join(lines)


def _recover_segment(seg: Segment, interval: int) -> Tuple[SegmentRecovery, IndexBuilder]:
    """``(SegmentRecovery, IndexBuilder)`` for one segment, without touching files."""
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
    rec = SegmentRecovery(seg.path, seg.size, valid, n, problem, valid if problem else None,
                          next_offset=next_offset)
    # Indexes are rewritten when they fail the checks verify() makes against the log
    # (an index built from other appends, e.g. follower chunks, is kept when it is right).
    kept = rows[:n]
    check = VerifyReport()
    check_segment_indexes(seg, check, kept[:, C.POSITION].tolist(), _first_offsets(kept),
                   kept[:, C.LAST_OFFSET].tolist(), kept[:, C.MAX_TIMESTAMP].tolist())
    absent = seg.files.index is None or seg.files.timeindex is None
    rec.index_rebuilt = bool(check.problems) or (absent and n > 0)
    return rec, b


def _first_offsets(rows: HeaderRows) -> List[int]:
    return [r[C.BASE_OFFSET] if r[C.MAGIC] == 2 else (-1 if r[C.RECORD_COUNT] < 0 else r[C.LAST_OFFSET])
            for r in rows.tolist()]


def _write_atomic(path: str, data: bytes) -> None:
    tmp = path + ".kafkawire-tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _stem(seg: Segment) -> str:
    stem: str = seg.path[:-len(LOG_SUFFIX)]
    return stem


def recover_log(log: Log, apply: bool = False, *,
                index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES) -> RecoverReport:
    """Recover every segment of ``log``; see the module docstring."""
    report = RecoverReport(applied=apply)
    plans = []
    cut_at = None
    for i, seg in enumerate(log.segments):
        rec, builder = _recover_segment(seg, index_interval_bytes)
        report.segments.append(rec)
        plans.append((seg, rec, builder))
        if rec.truncated_bytes:
            cut_at = i
            break
    later = log.segments[cut_at + 1:] if cut_at is not None else []
    for seg in later:
        report.removed_segments.append(seg.path)
    if not apply:
        return report

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}"
    log.close()  # no mmap may outlive a truncation (touching cut pages would crash the reader)
    for seg, rec, builder in plans:
        stem = _stem(seg)
        if rec.truncated_bytes:
            saved = f"{seg.path}.cut-{stamp}"
            with open(seg.path, "rb") as src, open(saved, "wb") as dst:
                src.seek(rec.valid_bytes)
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
            rec.saved_to = saved
            report.saved_files.append(saved)
            _log.info("%s: truncated to %d of %d bytes (%s at position %s); cut bytes saved to %s",
                      seg.path, rec.valid_bytes, rec.size, rec.problem, rec.problem_position, saved)
            with open(seg.path, "r+b") as f:
                f.truncate(rec.valid_bytes)
                f.flush()
                os.fsync(f.fileno())
            txns = [t for t in read_txn_index(seg.files.txnindex) if t.last_offset < rec.next_offset]
            if seg.files.txnindex:
                _write_atomic(seg.files.txnindex, b"".join(pack_txn_entry(t) for t in txns))
        if rec.index_rebuilt or rec.truncated_bytes:
            _write_atomic(stem + INDEX_SUFFIX, builder.offset_index_bytes())
            _write_atomic(stem + TIME_INDEX_SUFFIX, builder.time_index_bytes())
            _log.info("%s: indexes rewritten from the log", stem)
    for seg in later:
        for p in (seg.files.log, seg.files.index, seg.files.timeindex, seg.files.txnindex):
            if p and os.path.exists(p):
                saved = f"{p}.cut-{stamp}"
                os.replace(p, saved)
                report.saved_files.append(saved)
                _log.info("%s: after the truncation point; moved to %s", p, saved)
    log.segments = ()
    log.refresh()
    return report

