"""``verify``: walk every batch and index entry of a log and report each problem found.

Batches are checked from their headers in one pass (``K.scan_batches`` with
CRC on): CRC, lengths, magic, attribute bits, offsets increasing and inside
the segment's range; ``deep=True`` also decodes every batch (compressed
payloads and record structure; a batch whose codec library is missing is
counted in ``not_decoded``, not reported as a problem).  Index entries are checked against the
batches found: offset entries must point at a batch boundary, after every
batch holding smaller offsets and at a batch that does not start past the
entry's offset; time entries must name a batch whose max timestamp they
carry.  Problems are collected, not raised: a report tells what, where
(segment, byte position) and which offset.
"""
from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import CodecNotInstalledError, IndexCorruptError, KafkaWireError
from kafkawire.log.index import load_offset_index, load_time_index
from kafkawire.log.swap import SWAP_SUFFIX

if TYPE_CHECKING:
    from kafkawire.log.log import Log
    from kafkawire.log.segment import Segment

_INT32_MAX = 0x7FFFFFFF
_V2_KNOWN_ATTRS = 0x7F
_LEGACY_KNOWN_ATTRS = {0: 0x07, 1: 0x0F}
#: Per scan status: (problem kind, what it means).
STATUS_TEXT = {
    C.PARTIAL: ("truncated", "incomplete batch at the end of the segment (a write cut short)"),
    C.CORRUPT_LENGTH: ("length", "batch length field is invalid (a length of 0 means a zero-filled tail)"),
    C.BAD_MAGIC: ("magic", "unknown magic byte"),
    C.CRC_MISMATCH: ("crc", "CRC mismatch: the batch bytes were changed after it was written"),
}


@dataclass
class Problem:
    """One thing wrong: where (segment path, byte position, offset) and what."""

    segment: str
    position: Optional[int]
    offset: Optional[int]
    kind: str
    message: str

    def __str__(self) -> str:
        where = [self.segment]
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{', '.join(where)}: {self.kind}: {self.message}"


@dataclass
class VerifyReport:
    """Everything :func:`verify_log` found; ``ok`` when ``problems`` is empty."""

    problems: List[Problem] = field(default_factory=list)
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    index_entries: int = 0
    #: codec -> [batches not decoded, why]: the codec's library is missing.  Not a
    #: problem (the data may be fine), but those batches' records were not checked.
    not_decoded: Dict[str, List[Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def complete(self) -> bool:
        """True when every batch asked for was checked (no codec library was missing)."""
        return not self.not_decoded

    def __bool__(self) -> bool:
        return self.ok

    def add(self, segment: str, position: Optional[int], offset: Optional[int], kind: str,
            message: str) -> None:
        self.problems.append(Problem(segment, position, offset, kind, message))

    def merge(self, other: "VerifyReport") -> None:
        self.problems.extend(other.problems)
        self.segments += other.segments
        self.batches += other.batches
        self.bytes += other.bytes
        self.index_entries += other.index_entries
        for codec, (n, why) in other.not_decoded.items():
            self.not_decoded.setdefault(codec, [0, why])[0] += n

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d

    def __str__(self) -> str:
        head = (f"{self.segments} segments, {self.batches} batches, {self.bytes} bytes, "
                f"{self.index_entries} index entries: ")
        if self.ok:
            return head + "no problems"
        return head + f"{len(self.problems)} problem(s)\n" + "\n".join(f"  {p}" for p in self.problems)


#: Bytes checked per scan call (progress is reported after each call).
_VERIFY_WINDOW = 4 << 20


def verify_segment(seg: Segment, report: VerifyReport, *, check_indexes: bool = True,
                   deep: bool = False, prev_last: int = -1,
                   progress: Optional[Callable[[int], None]] = None) -> int:
    """Check one segment into ``report``; return its last offset (for the next segment).

    ``progress(n)`` is called as the check moves on by ``n`` bytes (the whole segment's
    size in total), so a caller can show progress within a large segment.
    """
    done = 0

    def moved(to: int) -> None:
        nonlocal done
        if progress is not None and to > done:
            progress(to - done)
            done = to

    path = seg.path
    report.segments += 1
    report.bytes += seg.size
    starts: List[int] = []
    lasts: List[int] = []
    # First offsets; -1 for a compressed v0/v1 wrapper, whose header names only its last
    # inner offset (brokers before 0.11 indexed an append's first offset, inside the wrapper).
    bases: List[int] = []
    max_ts: List[int] = []
    pos = 0
    while pos < seg.size:
        end = min(pos + _VERIFY_WINDOW, seg.size)
        rows, stop, status = seg.scan(pos, end, -1, True)
        if status == C.PARTIAL and end < seg.size:
            if len(rows):
                status = C.OK      # the window cut a batch: the next window starts with it
            else:                  # one batch larger than the window
                rows, stop, status = seg.scan(pos, -1, 1, True)
        for r in rows.tolist():
            p, magic, base, last, attrs = r[C.POSITION], r[C.MAGIC], r[C.BASE_OFFSET], r[C.LAST_OFFSET], r[C.ATTRIBUTES]
            report.batches += 1
            if magic == 2:
                if attrs & ~_V2_KNOWN_ATTRS or (attrs & C.COMPRESSION_MASK) > 4:
                    report.add(path, p, base, "attributes", f"invalid v2 attributes 0x{attrs:04x}")
                if last < base:
                    report.add(path, p, base, "offset", f"last offset {last} below base offset {base}")
                if r[C.RECORD_COUNT] < 0:
                    report.add(path, p, base, "length", f"negative record count {r[C.RECORD_COUNT]}")
            else:
                if attrs & ~_LEGACY_KNOWN_ATTRS[magic] or (attrs & 0x07) > 3:
                    report.add(path, p, last, "attributes", f"invalid magic-{magic} attributes 0x{attrs:02x}")
            first = base if magic == 2 else last
            compressed_legacy = magic < 2 and r[C.RECORD_COUNT] < 0
            if first <= prev_last:
                report.add(path, p, first, "offset",
                           f"offsets not increasing: batch starts at {first} after offset {prev_last}")
            if first < seg.base_offset or last - seg.base_offset > _INT32_MAX:
                report.add(path, p, first, "offset",
                           f"offsets {first}..{last} outside the segment's range (base {seg.base_offset})")
            if deep:
                _deep_check(seg, p, first, path, report)
            prev_last = max(prev_last, last)
            starts.append(p)
            lasts.append(last)
            bases.append(-1 if compressed_legacy else first)
            max_ts.append(r[C.MAX_TIMESTAMP])
        if status == C.OK:
            if stop <= pos or stop >= seg.size:
                break
            pos = stop
            moved(pos)
            continue
        kind, text = STATUS_TEXT.get(status, ("corrupt", "unreadable batch"))
        offset = _offset_at(seg, stop)
        if status in (C.CORRUPT_LENGTH, C.PARTIAL):
            zero, tail = describe_tail(None, stop, seg.size, prev_last,
                                       zero=seg.is_zero(stop, seg.size))
            if zero:
                offset, text = None, tail   # zeros hold no offset: the text says where the log ends
        report.add(path, stop, offset, kind, text)
        if status == C.CRC_MISMATCH:
            nxt = stop + 12 + int.from_bytes(seg.read_at(stop + 8, 4), "big")
            if nxt <= stop or nxt > seg.size:
                break
            pos = nxt
            continue
        break
    if check_indexes:
        check_segment_indexes(seg, report, starts, bases, lasts, max_ts)
        _check_txn_index(seg, report)
    moved(seg.size)
    return prev_last


def _check_txn_index(seg: Segment, report: VerifyReport) -> None:
    """Report a ``.txnindex`` that cannot be read (recover rebuilds it from the log)."""
    path = seg.files.txnindex
    if path is None:
        return
    try:
        seg.aborted_transactions()
    except IndexCorruptError as exc:
        msg = str(exc)
        if msg.startswith(path + ": "):
            msg = msg[len(path) + 2:]
        report.add(path, None, None, "txnindex", msg)


def describe_tail(buf: Any, position: int, end: int, last_offset: Optional[int], *,
                  zero: Optional[bool] = None) -> Tuple[bool, str]:
    """``(zero_filled, text)`` for the invalid bytes ``buf[position:end]`` at the end of a
    segment whose last readable batch ends at ``last_offset`` (-1 or None: no batch);
    ``zero``, when known (a segment on object storage checks its tail as it streams it),
    stands for the check of ``buf``, which may then be None."""
    n = end - position
    after = (f"after offset {last_offset}" if last_offset is not None and last_offset >= 0
             else "before any batch")
    if zero is None:
        zero = n > 0 and bool(K.buffer_is_zero(buf, position, end))
    if n > 0 and zero:
        return True, (f"zero-filled tail: {n} bytes of zeros {after} (space preallocated, or "
                      "data lost in a crash before it reached the disk; recover cuts it)")
    return False, (f"{n} invalid bytes at the end of the segment {after}: an incomplete "
                   "batch (a write cut short) or a damaged length field; recover cuts them")


def _offset_at(seg: Segment, pos: int) -> Optional[int]:
    if pos + 8 <= seg.size:
        return int.from_bytes(seg.read_at(pos, 8), "big", signed=True)
    return None


def _deep_check(seg: Segment, pos: int, offset: int, path: str, report: VerifyReport) -> None:
    try:
        batch = seg.batch_at(pos)
        batch.validate()
        for _ in batch:
            pass
    except CodecNotInstalledError as exc:
        report.not_decoded.setdefault(exc.codec, [0, str(exc)])[0] += 1
    except KafkaWireError as exc:
        report.add(path, pos, offset, getattr(exc, "reason", "corrupt"), str(exc))


def check_segment_indexes(seg: Segment, report: VerifyReport, starts: Sequence[int],
                          bases: Sequence[int], lasts: Sequence[int],
                          max_ts: Sequence[int]) -> None:
    """Check ``seg``'s index files against its batches into ``report``.

    ``starts``/``bases``/``lasts``/``max_ts``: per readable batch, its
    position, first offset (-1 for a compressed v0/v1 wrapper), last offset
    and max timestamp.  The files are loaded by the trust rules of
    :mod:`kafkawire.log.index` against the segment's size, then every entry
    is checked against the batches.
    """
    log_last = lasts[-1] if lasts else seg.base_offset - 1
    if seg.files.index is not None:
        idx = load_offset_index(seg.files.index, seg.base_offset, seg.size, storage=seg.storage)
        if idx.status != "ok":
            report.add(seg.files.index, None, None, "index", idx.problem or idx.status)
        for off, pos in idx:
            report.index_entries += 1
            i = bisect.bisect_left(starts, pos)
            if i >= len(starts) or starts[i] != pos:
                report.add(seg.files.index, pos, off, "index",
                           f"offset index entry ({off}, {pos}) does not point at a batch")
            elif bases[i] > off:
                report.add(seg.files.index, pos, off, "index",
                           f"offset index entry ({off}, {pos}) points at a batch starting at {bases[i]}")
            elif i > 0 and lasts[i - 1] >= off:
                report.add(seg.files.index, pos, off, "index",
                           f"offset index entry ({off}, {pos}) comes after the batch holding offset "
                           f"{off} (at position {starts[i - 1]})")
            elif off > log_last:
                report.add(seg.files.index, pos, off, "index",
                           f"offset index entry ({off}, {pos}) is past the log's last offset {log_last}")
    if seg.files.timeindex is not None:
        tim = load_time_index(seg.files.timeindex, seg.base_offset, seg.size,
                              storage=seg.storage)
        if tim.status != "ok":
            report.add(seg.files.timeindex, None, None, "timeindex", tim.problem or tim.status)
        for ts, off in tim:
            report.index_entries += 1
            i = bisect.bisect_left(lasts, off)
            if i >= len(lasts):
                report.add(seg.files.timeindex, None, off, "timeindex",
                           f"time index entry ({ts}, {off}) is past the log's last offset {log_last}")
            elif max_ts[i] != ts:
                report.add(seg.files.timeindex, starts[i], off, "timeindex",
                           f"time index entry ({ts}, {off}) but the batch holding offset {off} has "
                           f"max timestamp {max_ts[i]}")


def verify_log(log: Log, *, check_indexes: bool = True, deep: bool = False) -> VerifyReport:
    """Check every segment of ``log`` (a :class:`~kafkawire.log.Log`)."""
    report = VerifyReport()
    for path in log.files.leftovers:
        if path.endswith(SWAP_SUFFIX):
            report.add(path, None, None, "interrupted swap",
                       "a segment replacement (compaction or recovery) stopped half-way, so the "
                       "log may read with a gap: run `kafkawire recover --apply` to finish it")
    prev_last = -1
    for seg in log.segments:
        prev_last = verify_segment(seg, report, check_indexes=check_indexes, deep=deep,
                                   prev_last=prev_last)
    return report
