"""Where the coordinators keep their state: the internal topics, through a small interface.

The group coordinator writes ``__consumer_offsets`` and the transaction
coordinator ``__transaction_state``; both write transaction markers into the
partitions of a transaction.  They do it through :class:`CoordinatorLog`, so
the broker plugs in its partitions (records land in Kafka's on-disk format,
markers in ``.txnindex``) and the unit tests plug in :class:`MemoryLog`.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple

from kafkawire.protocol.coordinator_records import partition_for
from kafkawire.records import BatchBuilder

__all__ = ["CoordinatorLog", "LoggedRecord", "LoggedBatch", "MemoryLog", "PartitionsLog", "KeyValue",
           "InternalTopicOwner"]

log = logging.getLogger("kafkawire.server.coordinators")

#: One record to append: key and value (None: a tombstone).
KeyValue = Tuple[bytes, Optional[bytes]]


@dataclass
class LoggedRecord:
    """A record read back: what the loaders need of :class:`kafkawire.Record`."""
    key: Optional[bytes]
    value: Optional[bytes]


@dataclass
class LoggedBatch:
    """A batch read back: what the loaders need of :class:`kafkawire.RecordBatch`."""
    records: List[LoggedRecord]
    producer_id: int = -1
    producer_epoch: int = -1
    is_transactional: bool = False
    is_control: bool = False
    control_type: Optional[str] = None

    def __iter__(self) -> Any:
        return iter(self.records)


class CoordinatorLog(Protocol):
    """The partitions API a coordinator needs from its broker."""

    def partition_count(self, topic: str) -> Optional[int]:
        """How many partitions ``topic`` has, or None when it does not exist."""

    def ensure_topic(self, topic: str, partitions: int, configs: Dict[str, str]) -> int:
        """Create the internal ``topic`` if missing; its partition count (the existing one wins)."""

    def read(self, topic: str, partition: int) -> Iterable[Any]:
        """Every batch of the partition, in offset order (objects like :class:`LoggedBatch`)."""

    async def append(self, topic: str, partition: int, records: Sequence[KeyValue], *,
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> int:
        """Append one batch of ``records``; its first offset."""

    async def append_marker(self, topic: str, partition: int, committed: bool, *,
                            producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        """Append a COMMIT or ABORT control batch (an abort also goes to ``.txnindex``)."""


@dataclass
class MemoryLog:
    """A :class:`CoordinatorLog` in memory, for tests and for embedding without storage."""

    topics: Dict[str, List[List[LoggedBatch]]] = field(default_factory=dict)
    configs: Dict[str, Dict[str, str]] = field(default_factory=dict)
    fail: Optional[BaseException] = None  # raised by the next append (tests of write failures)

    def partition_count(self, topic: str) -> Optional[int]:
        parts = self.topics.get(topic)
        return None if parts is None else len(parts)

    def ensure_topic(self, topic: str, partitions: int, configs: Dict[str, str]) -> int:
        if topic not in self.topics:
            self.topics[topic] = [[] for _ in range(partitions)]
            self.configs[topic] = dict(configs)
        return len(self.topics[topic])

    def _grow(self, topic: str, partition: int) -> List[LoggedBatch]:
        parts = self.topics[topic]
        while len(parts) <= partition:
            parts.append([])
        return parts[partition]

    def read(self, topic: str, partition: int) -> Iterable[LoggedBatch]:
        parts = self.topics.get(topic, [])
        return list(parts[partition]) if partition < len(parts) else []

    def _add(self, topic: str, partition: int, batch: LoggedBatch) -> int:
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        if topic not in self.topics:
            self.topics[topic] = []
        part = self._grow(topic, partition)
        offset = sum(len(b.records) for b in part)
        part.append(batch)
        return offset

    async def append(self, topic: str, partition: int, records: Sequence[KeyValue], *,
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> int:
        return self._add(topic, partition, LoggedBatch(
            [LoggedRecord(k, v) for k, v in records], producer_id, producer_epoch, transactional))

    async def append_marker(self, topic: str, partition: int, committed: bool, *,
                            producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        return self._add(topic, partition, LoggedBatch(
            [LoggedRecord(None, None)], producer_id, producer_epoch, True, True,
            "commit" if committed else "abort"))


class PartitionsLog:
    """A :class:`CoordinatorLog` over the broker's partition manager
    (:class:`kafkawire.server.partitions.PartitionManager`): records are built
    as v2 batches and appended through the partitions' writers."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager

    def partition_count(self, topic: str) -> Optional[int]:
        t = self.manager.topics.get(topic)
        return None if t is None else len(t.partitions)

    def ensure_topic(self, topic: str, partitions: int, configs: Dict[str, str]) -> int:
        return len(self.manager.ensure_topic(topic, partitions, configs, internal=True).partitions)

    def read(self, topic: str, partition: int) -> Iterable[Any]:
        part = self.manager.partition(topic, partition)
        return () if part is None else part.log_batches()

    async def append(self, topic: str, partition: int, records: Sequence[KeyValue], *,
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> int:
        b = BatchBuilder(2, "none", producer_id=producer_id, producer_epoch=producer_epoch,
                         is_transactional=transactional)
        for key, value in records:
            b.append(value, key=key)
        return int(self.manager.append(topic, partition, b.build()).first_offset)

    async def append_marker(self, topic: str, partition: int, committed: bool, *,
                            producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        return int(self.manager.write_marker(topic, partition, "commit" if committed else "abort",
                                             producer_id=producer_id,
                                             producer_epoch=producer_epoch,
                                             coordinator_epoch=coordinator_epoch))


class InternalTopicOwner:
    """What both coordinators share: an internal topic created on first need (as Kafka
    creates it), the partition a key lives in, and a timer calling ``poll``."""

    TOPIC = ""
    TOPIC_CONFIGS: Dict[str, str] = {}

    def __init__(self, storage: CoordinatorLog, partitions: int, segment_bytes: int) -> None:
        self.storage = storage
        self.topic_partition_count = partitions
        self._segment_bytes = segment_bytes
        self._created = False
        self._task: Optional["asyncio.Task[None]"] = None

    def partition_for(self, key: str) -> int:
        """The partition of the internal topic holding ``key`` (Kafka's rule)."""
        return partition_for(key, self.topic_partition_count)

    def ensure_topic(self) -> None:
        """Create the internal topic (compacted) if it does not exist yet."""
        if not self._created:
            configs = dict(self.TOPIC_CONFIGS, **{"segment.bytes": str(self._segment_bytes)})
            self.topic_partition_count = self.storage.ensure_topic(
                self.TOPIC, self.topic_partition_count, configs)
            self._created = True

    def existing_partitions(self) -> int:
        """How many partitions the internal topic has (0 when it does not exist yet)."""
        count = self.storage.partition_count(self.TOPIC)
        if count is None:
            return 0
        self.topic_partition_count = count
        self._created = True
        return count

    async def poll(self) -> None:
        """Fire the timers that are due (subclasses)."""

    def start(self, interval_ms: int = 100) -> None:
        """Run :meth:`poll` every ``interval_ms`` on the running event loop."""
        async def tick() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000.0)
                try:
                    await self.poll()
                except Exception:  # keep the timer alive whatever one key did
                    log.exception("%s coordinator timer failed", self.TOPIC)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(tick())

    async def stop_timer(self) -> None:
        """Stop the timer started by :meth:`start`."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
