"""Streaming reads: tail a live log directory.

Offsets are ``{"topic": {"partition": next_offset}}`` (as Spark's Kafka source
writes them).  Every micro-batch re-lists the folders, so new segments and new
partitions are picked up (new partitions start at their earliest offset);
``maxOffsetsPerTrigger`` caps a micro-batch, spread over partitions in
proportion to what each has waiting; ``trigger(availableNow=True)`` reads
everything present when the query starts, in limited micro-batches, then stops.
"""
from __future__ import annotations

import json
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

from kafkawire._deps import require
from kafkawire.errors import LogError
from kafkawire.spark import layout
from kafkawire.spark.layout import PartitionInfo
from kafkawire.spark.options import ReadOptions, TopicPartition, log
from kafkawire.spark.planning import (Range, Task, last_stable_offset, plan_tasks, resolve_ranges,
                                      select_partitions)
from kafkawire.spark.reader import ArrowBatch, ReadSettings, read_task

require("pyspark", "spark", "The Spark data source")
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition  # noqa: E402
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,  # noqa: E402
                                              SupportsTriggerAvailableNow)

Offsets = Dict[str, Dict[str, int]]


def _to_json(ends: Dict[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for (topic, p), off in sorted(ends.items()):
        out.setdefault(topic, {})[str(p)] = int(off)
    return out


def _from_json(offsets: Offsets) -> Dict[TopicPartition, int]:
    return {(t, int(p)): int(o) for t, parts in (offsets or {}).items() for p, o in parts.items()}


class KafkaWireStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offsets per topic-partition of the files under ``path``."""

    def __init__(self, ro: ReadOptions) -> None:
        self.ro = ro
        self._available_now: Optional[Dict[TopicPartition, int]] = None
        self._last_trigger = time.monotonic()   # for minOffsetsPerTrigger / maxTriggerDelay

    def _parts(self) -> List[PartitionInfo]:
        return select_partitions(layout.discover(self.ro.paths, self.ro.storage_options), self.ro)

    def _ends(self) -> Dict[TopicPartition, int]:
        return {p.tp: p.end_offset for p in self._parts()}

    def initialOffset(self) -> Offsets:  # noqa: N802
        ranges = resolve_ranges(self._parts(), self.ro)
        return _to_json({r.part.tp: r.start for r in ranges})

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        n = self.ro.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._available_now = self._ends()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:  # noqa: N802
        parts = {p.tp: p for p in self._parts()}
        begin = _from_json(start)
        ends = {tp: p.end_offset for tp, p in parts.items()}
        if self._available_now is not None:
            ends = {tp: min(e, self._available_now.get(tp, begin.get(tp, parts[tp].start_offset)))
                    for tp, e in ends.items()}
        for tp, p in parts.items():
            begin.setdefault(tp, p.start_offset)
        ends = {tp: max(e, begin[tp]) for tp, e in ends.items()}
        if self.ro.isolation == "read_committed":
            ends = {tp: max(begin[tp], min(e, last_stable_offset(parts[tp], begin[tp])))
                    for tp, e in ends.items()}
        if isinstance(limit, ReadMaxRows):
            ends = _rate_limit(begin, ends, int(limit.max_rows))
        if self._too_few(begin, ends):
            return _to_json(begin)
        merged = dict(begin)
        merged.update(ends)
        behind = _behind({tp: p.end_offset for tp, p in parts.items()}, merged)
        if behind:
            log.info("kafkawire stream: offsets behind latest after this trigger: avg %.1f, max %d, "
                     "min %d", behind["avgOffsetsBehindLatest"], behind["maxOffsetsBehindLatest"],
                     behind["minOffsetsBehindLatest"])
        return _to_json(merged)

    def _too_few(self, begin: Dict[TopicPartition, int], ends: Dict[TopicPartition, int]) -> bool:
        """minOffsetsPerTrigger: hold the micro-batch back until that many offsets wait or
        maxTriggerDelay has passed since the last one (never under availableNow)."""
        want = self.ro.min_offsets_per_trigger
        if want is None or self._available_now is not None:
            return False
        waiting = sum(e - begin[tp] for tp, e in ends.items())
        now = time.monotonic()
        if waiting >= want or (now - self._last_trigger) * 1000 >= self.ro.max_trigger_delay_ms:
            self._last_trigger = now
            return False
        return True

    def reportLatestOffset(self) -> Optional[Offsets]:  # noqa: N802
        return _to_json(self._ends())

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[Task]:
        parts = {p.tp: p for p in self._parts()}
        begin, stop = _from_json(start), _from_json(end)
        ranges = []
        for tp, e in sorted(stop.items()):
            part = parts.get(tp)
            if part is None:
                continue
            s = begin.get(tp, part.start_offset)
            if s < part.start_offset:
                lost = f"{tp[0]}-{tp[1]}: offsets {s}..{part.start_offset - 1} were deleted " \
                       f"(the log now starts at {part.start_offset})"
                if self.ro.fail_on_data_loss:
                    raise LogError(f"{lost}; set failOnDataLoss=false to skip them")
                log.warning("%s; skipped (failOnDataLoss=false)", lost)
                s = part.start_offset
            if e > s:
                ranges.append(Range(part, s, e))
        return plan_tasks(ranges, self.ro)

    def read(self, partition: InputPartition) -> Iterator[ArrowBatch]:
        if not isinstance(partition, Task):
            return iter(())
        return read_task(partition, ReadSettings.from_options(self.ro))

    def commit(self, end: Offsets) -> None:
        pass


def _behind(latest: Dict[TopicPartition, int], end: Dict[TopicPartition, int]) -> Dict[str, float]:
    values = [max(0, latest[tp] - end.get(tp, latest[tp])) for tp in latest]
    if not values:
        return {}
    return {"avgOffsetsBehindLatest": sum(values) / len(values),
            "maxOffsetsBehindLatest": max(values), "minOffsetsBehindLatest": min(values)}


def offsets_behind_latest(source_progress: Mapping[str, Any]) -> Dict[str, float]:
    """``avgOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and ``minOffsetsBehindLatest`` over
    the topic-partitions of one source of a query's progress (an entry of
    ``query.lastProgress["sources"]``), from its ``endOffset`` and ``latestOffset``: the
    metrics Spark's Kafka source reports, which a Python data source cannot add to the
    progress itself ({} when the progress has no offsets yet)."""
    def parse(v: Any) -> Dict[TopicPartition, int]:
        if not v:
            return {}
        return _from_json(json.loads(v) if isinstance(v, str) else v)
    latest, end = parse(source_progress.get("latestOffset")), parse(source_progress.get("endOffset"))
    return _behind(latest, end) if latest else {}


def _rate_limit(begin: Dict[TopicPartition, int], ends: Dict[TopicPartition, int],
                limit: int) -> Dict[TopicPartition, int]:
    """Cap the total offsets of a micro-batch at ``limit``, shared by what each partition has waiting."""
    waiting = {tp: ends[tp] - begin[tp] for tp in ends}
    total = sum(waiting.values())
    if total <= limit:
        return ends
    out = {}
    given = 0
    for tp, w in sorted(waiting.items()):
        share = w * limit // total
        out[tp] = begin[tp] + share
        given += share
    # hand out the rounding remainder so every trigger makes progress
    for tp, w in sorted(waiting.items(), key=lambda kv: -kv[1]):
        if given >= limit:
            break
        extra = min(limit - given, ends[tp] - out[tp])
        out[tp] += extra
        given += extra
    return out
