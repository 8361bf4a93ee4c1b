"""The log's lifecycle in the broker: retention and compaction on a schedule.

Kafka's log manager deletes old segments every
``log.retention.check.interval.ms`` and its cleaner compacts partitions with
``cleanup.policy`` ``compact`` (or ``compact,delete``), waiting
``log.cleaner.backoff.ms`` between passes.  :class:`LogLifecycle` does both
for a :class:`~kafkawire.server.partitions.PartitionManager`, on the broker's
event loop (so no request sees a partition half changed), with each topic's
configs read at every pass: a config altered through IncrementalAlterConfigs
applies to the next pass.  Rolling (``segment.bytes``, ``segment.ms``) and the
flush policy (``flush.messages``, ``flush.ms``) belong to each partition's
:class:`~kafkawire.log.LogWriter`, which the partition configures.

The partition's writer holds the folder's ``.lock``; retention and the cleaner
run under it (``locked=True``): neither touches the active segment, the only
one the writer uses.  Afterwards the partition's read view is refreshed, its
log start offset moved, and the checkpoints written; a fetch below the new
log start offset answers OFFSET_OUT_OF_RANGE.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Optional, Set

from kafkawire.errors import LogError
from kafkawire.log.checkpoints import write_offset_checkpoint
from kafkawire.log.compact import CLEANER_CHECKPOINT, Cleaner
from kafkawire.log.retention import plan_retention

if TYPE_CHECKING:
    from kafkawire.server.partitions import Partition, PartitionManager

__all__ = ["LogLifecycle"]

log = logging.getLogger("kafkawire.server.lifecycle")

class LogLifecycle:
    """Retention and compaction passes over every partition of a manager."""

    def __init__(self, manager: "PartitionManager") -> None:
        self.manager = manager

    def _broker_int(self, name: str) -> int:
        return self.manager.config.int(name)

    def _policy(self, part: "Partition") -> Set[str]:
        return {p.strip() for p in (part.config("cleanup.policy") or "").split(",") if p.strip()}

    def _num(self, part: "Partition", name: str) -> int:
        return int(part.config(name) or 0)

    # -- passes ----------------------------------------------------------------
    def retention_pass(self, now_ms: Optional[int] = None) -> int:
        """Delete segments past ``retention.ms``/``retention.bytes`` (topics whose policy
        has ``delete``) or wholly below the log start offset; the segments deleted."""
        if self.manager.read_only:
            return 0
        deleted = 0
        for part in self.manager.partitions():
            try:
                deleted += self.retain(part, now_ms)
            except (LogError, OSError) as exc:
                log.error("retention of %s failed: %s", part.path, exc)
        if deleted:
            self.manager.write_checkpoints()
        return deleted

    def retain(self, part: "Partition", now_ms: Optional[int] = None) -> int:
        """Retention on one partition; the segments deleted."""
        if part.writer is None:
            return 0
        delete = "delete" in self._policy(part)
        plan = plan_retention(part.log_view(),
                              retention_ms=self._num(part, "retention.ms") if delete else None,
                              retention_bytes=self._num(part, "retention.bytes") if delete else None,
                              log_start_offset=part.log_start_offset, now_ms=now_ms)
        if plan.empty:
            return 0
        plan.apply(file_delete_delay_ms=max(self._num(part, "file.delete.delay.ms"), 0), locked=True)
        part.segments_changed(plan.log_start_offset)
        return len(plan.deletions)

    def cleaner_pass(self, now_ms: Optional[int] = None) -> int:
        """Compact every partition whose policy has ``compact`` and whose dirty ratio reaches
        ``min.cleanable.dirty.ratio``; the partitions cleaned."""
        if self.manager.read_only or not self.manager.config.bool("log.cleaner.enable"):
            return 0
        for d in self.manager.log_dirs:
            cp = os.path.join(d, CLEANER_CHECKPOINT)
            if not os.path.exists(cp):   # so the cleaner remembers how far it cleaned
                write_offset_checkpoint(cp, {})
        cleaned = 0
        for part in self.manager.partitions():
            try:
                cleaned += self.clean(part, now_ms)
            except (LogError, OSError) as exc:
                log.error("cleaning %s failed: %s", part.path, exc)
        return cleaned

    def clean(self, part: "Partition", now_ms: Optional[int] = None) -> int:
        """One cleaning of one partition (1 when something was rewritten)."""
        if part.writer is None or "compact" not in self._policy(part):
            return 0
        now = int(time.time() * 1000) if now_ms is None else now_ms
        cleaner = Cleaner(
            policy="compact",
            delete_retention_ms=max(self._num(part, "delete.retention.ms"), 0),
            min_cleanable_dirty_ratio=min(max(float(part.config("min.cleanable.dirty.ratio")
                                                    or 0.5), 0.0), 1.0),
            min_compaction_lag_ms=max(self._num(part, "min.compaction.lag.ms"), 0),
            segment_bytes=max(self._num(part, "segment.bytes"), 64),
            max_index_bytes=max(self._num(part, "segment.index.bytes"), 12),
            index_interval_bytes=self._num(part, "index.interval.bytes"),
            dedupe_buffer_size=self._broker_int("log.cleaner.dedupe.buffer.size"))
        plan = cleaner.clean(part.path, now_ms=now, locked=True)
        if not plan.groups:
            return 0
        part.segments_changed(part.log_start_offset)
        return 1

    # -- the schedule ----------------------------------------------------------
    async def run(self) -> None:
        """Run retention every ``log.retention.check.interval.ms`` and the cleaner every
        ``log.cleaner.backoff.ms`` until cancelled (errors are logged, the schedule goes on)."""
        loop = asyncio.get_running_loop()
        retention_every = max(self._broker_int("log.retention.check.interval.ms"), 10) / 1000.0
        clean_every = max(self._broker_int("log.cleaner.backoff.ms"), 10) / 1000.0
        next_retention = loop.time() + retention_every
        next_clean = loop.time() + clean_every
        while True:
            await asyncio.sleep(max(min(next_retention, next_clean) - loop.time(), 0.0))
            try:
                if loop.time() >= next_clean:
                    self.cleaner_pass()
                    next_clean = loop.time() + clean_every
                if loop.time() >= next_retention:
                    self.retention_pass()
                    next_retention = loop.time() + retention_every
            except Exception:
                log.exception("a log lifecycle pass failed")
