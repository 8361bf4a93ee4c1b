"""Driver-side planning: option bounds -> offset ranges -> byte slices -> tasks.

Only file sizes, index entries and a few batch headers are read here.  Each
topic-partition gets an offset range ``[start, end)``; each segment that may
hold part of it contributes a byte range found by index lookups; ranges larger
than ``maxBytesPerTask`` are split at index entries (which point at batch
headers), and small ranges are packed together, so every task reads about
``maxBytesPerTask`` bytes (a Spark task costs ~50 ms whatever it reads).

A slice's rows are the records of batches *starting* in ``[start_pos,
end_pos)`` whose offsets are in ``[start_offset, end_offset)``: splits by
position share offset bounds, splits by offset (maxRecordsPerPartition) share
none, so no record is read twice either way.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from kafkawire.spark.layout import PartitionInfo, SegmentInfo
from kafkawire.spark.options import EARLIEST, LATEST, OptionError, ReadOptions

log = logging.getLogger("kafkawire.spark.planning")

try:
    from pyspark.sql.datasource import InputPartition
except ImportError:  # planning is usable (and tested) without pyspark
    class InputPartition:  # type: ignore[no-redef]
        def __init__(self, value: Any = None) -> None:
            self.value = value


@dataclass(frozen=True)
class Slice:
    """Batches starting in ``[start_pos, end_pos)`` of one ``.log`` file, offsets ``[start_offset, end_offset)``."""

    topic: str
    partition: int
    path: str
    start_pos: int
    end_pos: int
    start_offset: int
    end_offset: int

    @property
    def nbytes(self) -> int:
        return self.end_pos - self.start_pos


class Task(InputPartition):
    """One Spark task: a few slices read one after the other."""

    def __init__(self, slices: Sequence[Slice]) -> None:
        super().__init__(None)
        self.slices = tuple(slices)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.slices)

    def __repr__(self) -> str:
        return f"Task({len(self.slices)} slices, {self.nbytes} bytes)"


@dataclass
class Range:
    """The offsets of one topic-partition a query reads, plus a timestamp floor for pruning."""

    part: PartitionInfo
    start: int
    end: int
    min_timestamp: Optional[int] = None   # segments whose records are all older are skipped


# -- choosing partitions ---------------------------------------------------------

def select_partitions(parts: List[PartitionInfo], ro: ReadOptions) -> List[PartitionInfo]:
    """Apply subscribe / subscribePattern / assign; naming what is missing is an error."""
    by_tp = {p.tp: p for p in parts}
    topics = sorted({p.topic for p in parts})
    if ro.subscribe is not None:
        missing = [t for t in ro.subscribe if t not in topics]
        if missing:
            raise OptionError(f"subscribe: topic(s) {', '.join(missing)} not found under the path; "
                              f"topics found: {', '.join(topics)}")
        wanted = set(ro.subscribe)
        return [p for p in parts if p.topic in wanted]
    # like a Kafka consumer (exclude.internal.topics), patterns and "everything" leave out
    # __consumer_offsets, __transaction_state, ...; name them with subscribe or assign
    external = [p for p in parts if not p.topic.startswith("__")]
    if ro.subscribe_pattern is not None:
        rx = re.compile(ro.subscribe_pattern)
        out = [p for p in external if rx.fullmatch(p.topic)]
        if not out:
            raise OptionError(f"subscribePattern {ro.subscribe_pattern!r} matches no topic; "
                              f"topics found: {', '.join(topics)}")
        return out
    if ro.assign is not None:
        missing = [f"{t}-{p}" for t, p in ro.assign if (t, p) not in by_tp]
        if missing:
            raise OptionError(f"assign: {', '.join(missing)} not found under the path; "
                              f"partitions found: {', '.join(f'{t}-{p}' for t, p in sorted(by_tp))}")
        return [by_tp[tp] for tp in sorted(set(ro.assign))]
    if not external:
        raise OptionError(f"only internal topics ({', '.join(topics)}) under the path; "
                          "name them with subscribe or assign to read them")
    return external


# -- offsets ----------------------------------------------------------------------

def offset_for_timestamp(part: PartitionInfo, ts: int) -> Optional[int]:
    """First offset whose record timestamp is >= ``ts`` (the log's lookup by time)."""
    return part.log.offset_for_timestamp(ts)


def _explicit(name: str, spec: Dict[Tuple[str, int], int], parts: List[PartitionInfo]) -> None:
    have = {p.tp for p in parts}
    extra = sorted(set(spec) - have)
    missing = sorted(have - set(spec))
    if extra:
        raise OptionError(f"{name} names {', '.join(f'{t}-{p}' for t, p in extra)}, which the "
                          "selected topic-partitions do not include")
    if missing:
        raise OptionError(f"{name} must give every selected topic-partition (as Spark's Kafka source "
                          f"requires); missing: {', '.join(f'{t}-{p}' for t, p in missing)}")


def resolve_ranges(parts: List[PartitionInfo], ro: ReadOptions) -> List[Range]:
    """Turn starting/ending options into one offset range per topic-partition."""
    for name, spec in (("startingOffsets", ro.starting), ("endingOffsets", ro.ending),
                       ("startingOffsetsByTimestamp", ro.starting_ts),
                       ("endingOffsetsByTimestamp", ro.ending_ts)):
        if isinstance(spec, dict):
            _explicit(name, spec, parts)
    out = []
    for part in parts:
        lo, hi = part.start_offset, part.end_offset
        tp = part.tp
        # starting: timestamp options win over startingOffsets, as in Spark's Kafka source
        sts = ro.starting_ts if isinstance(ro.starting_ts, int) or ro.starting_ts is None else ro.starting_ts[tp]
        if sts is not None:
            start = offset_for_timestamp(part, sts)
            if start is None:
                if ro.starting_ts_strategy == "error":
                    raise OptionError(
                        f"no record at or after timestamp {sts} in {tp[0]}-{tp[1]} (its data ends at offset "
                        f"{hi}); set startingOffsetsByTimestampStrategy=latest to read nothing there")
                start = hi
        else:
            spec = ro.starting
            v = spec if isinstance(spec, str) else spec[tp]
            start = lo if v in ("earliest", EARLIEST) else hi if v in ("latest", LATEST) else int(v)
        ets = ro.ending_ts if isinstance(ro.ending_ts, int) or ro.ending_ts is None else ro.ending_ts[tp]
        if ets is not None:
            end = offset_for_timestamp(part, ets)
            end = hi if end is None else end
        else:
            spec = ro.ending
            v = spec if isinstance(spec, str) else spec[tp]
            end = hi if v in ("latest", LATEST) else int(v)
        name = f"{tp[0]}-{tp[1]}"
        if start < lo:
            _data_loss(ro, f"starting offset {start} of {name} is before its first segment ({lo}); "
                       f"use earliest, or failOnDataLoss=false to start at {lo}",
                       f"{name}: offsets {start}..{lo - 1} are gone (the log starts at {lo}); skipped")
            start = lo
        if start > hi:
            _data_loss(ro, f"starting offset {start} of {name} is past its log end ({hi}); give an "
                       "offset within the log, or failOnDataLoss=false to read nothing there",
                       f"{name}: starting offset {start} is past the log end {hi}; nothing read")
            start = hi
        if end > hi:
            _data_loss(ro, f"ending offset {end} of {name} is past its log end ({hi}); "
                       "use latest or -1 to read to the end",
                       f"{name}: ending offset {end} is past the log end {hi}; reading to the end")
            end = hi
        if start > end:
            raise OptionError(f"starting offset {start} is after ending offset {end} for {tp[0]}-{tp[1]}: "
                              "the range is empty; fix startingOffsets/endingOffsets (or the timestamps)")
        if ro.isolation == "read_committed" and end > start:
            end = max(start, min(end, last_stable_offset(part, start)))
        out.append(Range(part, start, end))
    return out


def _data_loss(ro: ReadOptions, error: str, warning: str) -> None:
    """Offsets that are gone or out of range: fail (failOnDataLoss, the default) or warn and go on."""
    if ro.fail_on_data_loss:
        raise OptionError(error)
    log.warning("%s (failOnDataLoss=false)", warning)


def last_stable_offset(part: PartitionInfo, start: int) -> int:
    """read_committed stops before the first transaction still open (Kafka's last stable offset),
    as the log computes it from ``start``."""
    lso = part.log.aborted_transactions(start, None).last_stable_offset
    return part.end_offset if lso is None else int(lso)


# -- bytes ------------------------------------------------------------------------

def segment_max_timestamp(seg: SegmentInfo) -> int:
    """Largest batch max-timestamp in a segment (the log's answer: index, then the headers after it)."""
    return seg.segment.max_timestamp


def _segment_slices(r: Range, start: int, end: int, max_bytes: int) -> List[Slice]:
    part = r.part
    out: List[Slice] = []
    last = part.segments[-1] if part.segments else None
    for seg, nxt in part.segments_for(start, end):
        if r.min_timestamp is not None and segment_max_timestamp(seg) < r.min_timestamp:
            continue
        limit = part.end_position if seg is last else seg.size
        sp = seg.position_at_or_before(start)
        ep = limit if (nxt is not None and nxt <= end) or seg is last and end >= part.end_offset \
            else min(seg.position_after(end - 1), limit)
        cuts = seg.cut_positions(sp, ep)
        check = [p for p in (sp, ep, *_choose_cuts(sp, ep, cuts, max_bytes)) if p not in (0, limit)]
        if not seg.trust(check):
            sp, ep, cuts = 0, limit, np.zeros(0, np.int64)
        bounds = [sp, *_choose_cuts(sp, ep, cuts, max_bytes), ep]
        for a, b in zip(bounds, bounds[1:]):
            if b > a:
                out.append(Slice(part.topic, part.partition, seg.path, int(a), int(b), start, end))
    return out


def _choose_cuts(sp: int, ep: int, cuts: np.ndarray, max_bytes: int) -> List[int]:
    """Greedy: cut at the last index position that keeps each piece within ``max_bytes``."""
    cuts = np.asarray(cuts, dtype=np.int64)
    chosen: List[int] = []
    here = sp
    while ep - here > max_bytes:
        j = int(np.searchsorted(cuts, here + max_bytes, side="right"))
        k = int(np.searchsorted(cuts, here, side="right"))
        if k >= len(cuts):
            break
        pick = int(cuts[j - 1]) if j > k else int(cuts[k])   # a batch bigger than max_bytes sits alone
        chosen.append(pick)
        here = pick
    return chosen


def plan_slices(ranges: List[Range], max_bytes: int,
                max_records: Optional[int] = None) -> List[Slice]:
    """Byte slices of every range, none larger than ``max_bytes`` where index entries allow.

    ``max_records`` first divides each range into equal offset sub-ranges of at
    most that many offsets (as Spark's Kafka source divides ``untilOffset -
    fromOffset``: offsets, not records, so compaction gaps make a piece hold fewer).
    """
    slices: List[Slice] = []
    for r in ranges:
        if r.end <= r.start:
            continue
        size = r.end - r.start
        step = size if not max_records else math.ceil(size / math.ceil(size / max_records))
        for a in range(r.start, r.end, step):
            slices.extend(_segment_slices(r, a, min(a + step, r.end), max_bytes))
    return slices


def pack(slices: List[Slice], max_bytes: int, one_per_task: bool = False) -> List[Task]:
    """Group consecutive small slices into tasks of up to ``max_bytes`` (first fit, in order)."""
    tasks: List[Task] = []
    cur: List[Slice] = []
    size = 0
    for s in slices:
        if cur and (one_per_task or size + s.nbytes > max_bytes):
            tasks.append(Task(cur))
            cur, size = [], 0
        cur.append(s)
        size += s.nbytes
    if cur:
        tasks.append(Task(cur))
    return tasks


def balance(slices: List[Slice], count: int, max_bytes: int) -> List[Task]:
    """Consecutive slices into about ``count`` tasks of equal bytes, none above ``max_bytes``.

    A slice goes to the task its middle byte falls in (cumulative bytes over the
    ideal task size), so tasks differ by at most about one slice; a task that
    would pass ``max_bytes`` is closed early.  Adjacent pieces of one file that
    land in the same task are joined again (one slice, one decoder).
    """
    total = sum(s.nbytes for s in slices)
    if count <= 1 or total == 0:
        return pack(slices, max_bytes)
    ideal = total / count
    tasks: List[List[Slice]] = []
    cur: List[Slice] = []
    size = done = 0
    want = -1
    for s in slices:
        slot = min(count - 1, int((done + s.nbytes / 2) // ideal))
        if cur and (slot != want or size + s.nbytes > max_bytes):
            tasks.append(cur)
            cur, size = [], 0
        want = slot
        if cur and _joins(cur[-1], s):
            cur[-1] = Slice(s.topic, s.partition, s.path, cur[-1].start_pos, s.end_pos,
                            s.start_offset, s.end_offset)
        else:
            cur.append(s)
        size += s.nbytes
        done += s.nbytes
    if cur:
        tasks.append(cur)
    return [Task(t) for t in tasks]


def _joins(a: Slice, b: Slice) -> bool:
    return (a.path == b.path and a.end_pos == b.start_pos and a.start_offset == b.start_offset
            and a.end_offset == b.end_offset)


#: The largest task when ``maxBytesPerTask`` is not set and the parallelism is not known
#: (no ``minPartitions``): more, smaller tasks keep a large cluster busy.
DEFAULT_TASK_BYTES = 64 << 20
#: Spark's ``spark.sql.files.maxPartitionBytes`` and ``spark.sql.files.openCostInBytes``
#: defaults, which its file sources split by.
SPARK_MAX_PARTITION_BYTES = 128 << 20
SPARK_OPEN_COST_BYTES = 4 << 20


def task_bytes(ro: ReadOptions, total: int) -> int:
    """The largest byte range of one task: ``maxBytesPerTask`` when set, else Spark's rule.

    Spark's file sources split at ``min(maxPartitionBytes, max(openCostInBytes,
    bytes / parallelism))`` (128 MiB and 4 MiB by default).  A Python data source
    sees its options but not the session's SQL settings, so ``minPartitions``
    stands for the parallelism: with it, large inputs get tasks of up to 128 MiB
    (fewer tasks, each paying Spark's fixed task cost once) while inputs of less
    than 128 MiB per core still fill every core; without it, tasks of up to 64 MiB.
    """
    if ro.max_bytes_per_task is not None:
        return ro.max_bytes_per_task
    if not ro.min_partitions:
        return DEFAULT_TASK_BYTES
    per_core = math.ceil(total / ro.min_partitions)
    return min(SPARK_MAX_PARTITION_BYTES, max(SPARK_OPEN_COST_BYTES, per_core))


def plan_tasks(ranges: List[Range], ro: ReadOptions) -> List[Task]:
    """Slices packed into tasks, honouring maxBytesPerTask, minPartitions and maxRecordsPerPartition.

    Without ``maxRecordsPerPartition`` the task count is ``ceil(bytes /
    task_bytes)`` (:func:`task_bytes`), at least ``minPartitions`` and then
    rounded up to a multiple of it (minPartitions is usually the cluster's
    parallelism: full waves), and the bytes are spread evenly over the tasks: a
    Spark task costs ~50 ms whatever it reads, and the slowest task ends the stage.
    """
    tasks = _plan_tasks(ranges, ro)
    if log.isEnabledFor(logging.INFO):
        log.info("planned %d task(s) over %d partition range(s), %d bytes (maxBytesPerTask=%s, "
                 "minPartitions=%s)", len(tasks), len(ranges), sum(t.nbytes for t in tasks),
                 ro.max_bytes_per_task, ro.min_partitions)
    return tasks


def _plan_tasks(ranges: List[Range], ro: ReadOptions) -> List[Task]:
    mp = ro.min_partitions
    if ro.max_records_per_partition is not None:
        max_bytes = DEFAULT_TASK_BYTES if ro.max_bytes_per_task is None else ro.max_bytes_per_task
        slices = plan_slices(ranges, max_bytes, ro.max_records_per_partition)
        tasks = pack(slices, max_bytes, one_per_task=True)
        if mp and len(tasks) < mp:
            total = sum(s.nbytes for s in slices)
            target = max(4096, math.ceil(total / mp))
            tasks = pack(plan_slices(ranges, target, ro.max_records_per_partition), target,
                         one_per_task=True)
        return tasks
    # the total does not depend on where slices are cut; with one task (total <= max_bytes)
    # these slices are the task's
    slices = plan_slices(ranges, task_bytes(ro, 1 << 62))
    total = sum(s.nbytes for s in slices)
    max_bytes = task_bytes(ro, total)
    count = max(1, math.ceil(total / max_bytes))
    if mp:
        count = mp * math.ceil(count / mp)
    if count > 1:
        # finer pieces (cut at index entries) let the tasks come out even
        piece = max(4096, math.ceil(total / count / 8))
        slices = plan_slices(ranges, piece)
        if ro.max_bytes_per_task is None:
            # Spark's rule sets the count; pieces cut at index entries need not add up to it
            max_bytes = max(max_bytes, math.ceil(total / count) + piece)
    return balance(slices, count, max_bytes)
