"""The log's lifecycle in the broker: retention, compaction, flush and checkpoints on a
schedule, off the event loop.

Kafka's log manager deletes old segments every
``log.retention.check.interval.ms``, its cleaner compacts partitions with
``cleanup.policy`` ``compact`` (or ``compact,delete``), waiting
``log.cleaner.backoff.ms`` between passes, and its scheduler applies the
``flush.ms`` policy every ``log.flush.scheduler.interval.ms`` and writes the
checkpoints every ``log.flush.offset.checkpoint.interval.ms``.
:class:`LogLifecycle` does all of it for a
:class:`~kafkawire.server.partitions.PartitionManager` in one worker thread,
so a long compaction never stalls produce or fetch requests.  Each topic's
configs are read at every pass: a config altered through
IncrementalAlterConfigs applies to the next pass.  Rolling (``segment.bytes``,
``segment.ms``) happens on append, in each partition's
:class:`~kafkawire.log.LogWriter`.

How the worker and the event loop share a partition: the heavy work (reading
segments, building the cleaner's key map, writing ``.cleaned`` segments,
planning retention) reads only segments below the active one, which appends
never touch, and runs without any lock.  Every step that changes what a
reader sees (a compaction's segment swap, retention renaming segments to
``.deleted``, an fsync of the active segment) runs under the partition's
:attr:`~kafkawire.server.partitions.Partition.lock`, which appends and reads
on the loop also take, and the partition's read view is refreshed in the same
step; a fetch below the new log start offset answers OFFSET_OUT_OF_RANGE.
Records already handed to a connection keep their open files.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Set

from kafkawire.errors import LogError
from kafkawire.log.checkpoints import write_offset_checkpoint
from kafkawire.log.compact import CLEANER_CHECKPOINT, Cleaner
from kafkawire.log.log import Log
from kafkawire.log.retention import plan_retention

if TYPE_CHECKING:
    from kafkawire.server.partitions import Partition, PartitionManager

__all__ = ["LogLifecycle"]

log = logging.getLogger("kafkawire.server.lifecycle")


class _Stopped(Exception):
    """The lifecycle is stopping, or the partition was closed (topic deleted) meanwhile."""


class LogLifecycle:
    """Retention, compaction, flush and checkpoint passes over every partition of a manager,
    in a worker thread of their own (see the module docstring)."""

    def __init__(self, manager: "PartitionManager") -> None:
        self.manager = manager
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._inflight: Optional["asyncio.Future[None]"] = None
        self._stopping = threading.Event()

    def _broker_int(self, name: str) -> int:
        return self.manager.config.int(name)

    def _policy(self, part: "Partition") -> Set[str]:
        return {p.strip() for p in (part.config("cleanup.policy") or "").split(",") if p.strip()}

    def _num(self, part: "Partition", name: str) -> int:
        return int(part.config(name) or 0)

    @contextlib.contextmanager
    def _changing(self, part: "Partition") -> Iterator[None]:
        """Hold ``part``'s lock for a step that changes its segments; refresh its read view
        afterwards (even when the step failed half-way)."""
        with part.lock:
            if part.closed or self._stopping.is_set():
                raise _Stopped(part.path)
            try:
                yield
            finally:
                part.segments_changed(part.log_start_offset)

    # -- passes ----------------------------------------------------------------
    def retention_pass(self, now_ms: Optional[int] = None,
                       parts: Optional[Sequence["Partition"]] = None) -> int:
        """Delete segments past ``retention.ms``/``retention.bytes`` (topics whose policy
        has ``delete``) or wholly below the log start offset; the segments deleted."""
        if self.manager.read_only:
            return 0
        deleted = 0
        for part in self.manager.partitions() if parts is None else parts:
            try:
                deleted += self.retain(part, now_ms)
            except _Stopped:
                continue
            except (LogError, OSError) as exc:
                if not part.closed:
                    log.error("retention of %s failed: %s", part.path, exc)
        if deleted:
            self.manager.write_checkpoints(parts)
        return deleted

    def retain(self, part: "Partition", now_ms: Optional[int] = None) -> int:
        """Retention on one partition; the segments deleted."""
        if part.writer is None or part.closed:
            return 0
        delete = "delete" in self._policy(part)
        with Log.open(part.path) as lg:
            plan = plan_retention(lg, retention_ms=self._num(part, "retention.ms") if delete else None,
                                  retention_bytes=self._num(part, "retention.bytes") if delete else None,
                                  log_start_offset=part.log_start_offset, now_ms=now_ms)
            if plan.empty:
                return 0
            with self._changing(part):
                plan.apply(file_delete_delay_ms=max(self._num(part, "file.delete.delay.ms"), 0),
                           locked=True)
                part.log_start_offset = max(part.log_start_offset,
                                            min(plan.log_start_offset, part.log_end_offset))
        return len(plan.deletions)

    def cleaner_pass(self, now_ms: Optional[int] = None,
                     parts: Optional[Sequence["Partition"]] = None) -> int:
        """Compact every partition whose policy has ``compact`` and whose dirty ratio reaches
        ``min.cleanable.dirty.ratio``; the partitions cleaned."""
        if self.manager.read_only or not self.manager.config.bool("log.cleaner.enable"):
            return 0
        for d in self.manager.log_dirs:
            cp = os.path.join(d, CLEANER_CHECKPOINT)
            if not os.path.exists(cp):   # so the cleaner remembers how far it cleaned
                write_offset_checkpoint(cp, {})
        cleaned = 0
        for part in self.cleaning_order(self.manager.partitions() if parts is None else parts,
                                        now_ms):
            if self._stopping.is_set():
                break
            try:
                cleaned += self.clean(part, now_ms)
            except _Stopped:
                continue
            except (LogError, OSError) as exc:
                if not part.closed:
                    log.error("cleaning %s failed: %s", part.path, exc)
        return cleaned

    def cleaning_order(self, parts: Sequence["Partition"],
                       now_ms: Optional[int] = None) -> List["Partition"]:
        """The compacted partitions worth cleaning now, as Kafka's cleaner takes them: those
        past ``max.compaction.lag.ms`` first, then the dirtiest (highest dirty ratio) first."""
        ranked = []
        for part in parts:
            if part.writer is None or part.closed or "compact" not in self._policy(part):
                continue
            try:
                survey = self.cleaner(part).survey(part.path, now_ms=now_ms)
            except (LogError, OSError) as exc:
                if not part.closed:
                    log.error("surveying %s for cleaning failed: %s", part.path, exc)
                continue
            if survey.cleanable:
                ranked.append((survey.must_clean, survey.dirty_ratio, part))
        ranked.sort(key=lambda r: (r[0], r[1]), reverse=True)
        return [r[2] for r in ranked]

    def cleaner(self, part: "Partition") -> Cleaner:
        """A :class:`~kafkawire.log.compact.Cleaner` with ``part``'s topic configs, whose
        segment swaps run under the partition's lock."""
        return Cleaner(
            policy="compact",
            delete_retention_ms=max(self._num(part, "delete.retention.ms"), 0),
            min_cleanable_dirty_ratio=min(max(float(part.config("min.cleanable.dirty.ratio")
                                                    or 0.5), 0.0), 1.0),
            min_compaction_lag_ms=max(self._num(part, "min.compaction.lag.ms"), 0),
            max_compaction_lag_ms=self._max_lag(part),
            segment_bytes=max(self._num(part, "segment.bytes"), 64),
            max_index_bytes=max(self._num(part, "segment.index.bytes"), 12),
            index_interval_bytes=self._num(part, "index.interval.bytes"),
            dedupe_buffer_size=self._broker_int("log.cleaner.dedupe.buffer.size"),
            swap_guard=lambda: self._changing(part))

    def _max_lag(self, part: "Partition") -> Optional[int]:
        lag = self._num(part, "max.compaction.lag.ms")
        return None if lag <= 0 or lag >= (1 << 63) - 1 else lag

    def clean(self, part: "Partition", now_ms: Optional[int] = None) -> int:
        """One cleaning of one partition (1 when something was rewritten)."""
        if part.writer is None or part.closed or "compact" not in self._policy(part):
            return 0
        now = int(time.time() * 1000) if now_ms is None else now_ms
        plan = self.cleaner(part).clean(part.path, now_ms=now, locked=True)
        return 1 if plan.groups else 0

    def flush_pass(self, parts: Optional[Sequence["Partition"]] = None) -> None:
        """The ``flush.ms`` policy's time check on every partition."""
        for part in self.manager.partitions() if parts is None else parts:
            if self._stopping.is_set():
                return
            try:
                part.maybe_flush()
            except (LogError, OSError) as exc:
                if not part.closed:
                    log.error("flushing %s failed: %s", part.path, exc)

    # -- the schedule ----------------------------------------------------------
    async def run(self) -> None:
        """Run each pass on its schedule, in the worker thread, until cancelled (errors are
        logged, the schedule goes on).  The partitions are listed on the loop."""
        loop = asyncio.get_running_loop()
        self._stopping.clear()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="kafkawire-log-lifecycle")
        cfg = self._broker_int
        every = {
            "flush": max(cfg("log.flush.scheduler.interval.ms"), 10) / 1000.0,
            "checkpoint": max(cfg("log.flush.offset.checkpoint.interval.ms"), 10) / 1000.0,
        }
        if not self.manager.read_only:
            every["clean"] = max(cfg("log.cleaner.backoff.ms"), 10) / 1000.0
            every["retention"] = max(cfg("log.retention.check.interval.ms"), 10) / 1000.0
        due = {name: loop.time() + e for name, e in every.items()}
        while True:
            await asyncio.sleep(max(min(due.values()) - loop.time(), 0.0))
            now = loop.time()
            names: List[str] = [n for n in ("clean", "retention", "flush", "checkpoint")
                     if n in due and due[n] <= now]
            parts = self.manager.partitions()
            self._inflight = loop.run_in_executor(self._executor, self._passes, names, parts)
            try:
                await asyncio.shield(self._inflight)
            except Exception:
                log.exception("a log lifecycle pass failed")
            finally:
                self._inflight = None
            for n in names:
                due[n] = loop.time() + every[n]

    def _passes(self, names: List[str], parts: List["Partition"]) -> None:
        steps: Dict[str, Callable[[], Any]] = {"clean": lambda: self.cleaner_pass(parts=parts),
                       "retention": lambda: self.retention_pass(parts=parts),
                       "flush": lambda: self.flush_pass(parts),
                       "checkpoint": lambda: self.manager.write_checkpoints(parts)}
        for name in names:
            if self._stopping.is_set():
                return
            try:
                steps[name]()
            except Exception:
                log.exception("the %s pass failed", name)

    async def stop(self) -> None:
        """On the loop, at shutdown: end the pass in progress at its next step and wait for
        it (the loop must outlive the worker's answer)."""
        self._stopping.set()
        inflight = self._inflight
        if inflight is not None:
            await asyncio.wait([inflight])

    def close(self) -> None:
        """Stop: a pass in progress ends at its next step; wait for the worker to finish."""
        self._stopping.set()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
