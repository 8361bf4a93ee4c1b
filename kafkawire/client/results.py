"""What the client's calls return: small immutable values, no protocol classes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, NamedTuple, Optional, Sequence, Set, Tuple

if TYPE_CHECKING:
    from kafkawire.records._types import Record
    from kafkawire.records.iterate import Batch

__all__ = ["RecordMetadata", "ProducerRecord", "ProduceResult", "FetchResult", "OffsetResult", "OffsetAndMetadata",
           "TopicResult", "as_offset_and_metadata", "as_producer_record", "normalize_record"]


class RecordMetadata(NamedTuple):
    """Where a produced record landed.

    ``offset`` is -1 with ``acks=0`` (no answer) or when the broker reported
    the batch as a duplicate of one it already had; ``timestamp`` is the
    broker's log-append time when the topic uses LogAppendTime, else the
    record's own.
    """
    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerRecord(NamedTuple):
    """One record to produce; ``partition`` overrides the partitioner for this record."""
    value: Optional[bytes]
    key: Optional[bytes] = None
    headers: Sequence[Tuple[str, Optional[bytes]]] = ()
    timestamp: Optional[int] = None
    partition: Optional[int] = None


def _b(x: Any) -> Optional[bytes]:
    if x is None or isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    return bytes(x)


def as_producer_record(item: Any) -> ProducerRecord:
    """Accept ``bytes``/``str`` (a value), ``(key, value)``, a dict, or a record-like object."""
    return ProducerRecord(*normalize_record(item))


def normalize_record(item: Any) -> Tuple[Any, ...]:
    """``as_producer_record`` as a plain ``(value, key, headers, timestamp, partition)`` tuple.

    The produce path uses this form: a plain tuple costs a fraction of a
    NamedTuple to build, which shows at hundreds of thousands of records.
    """
    t = type(item)
    if t is tuple and len(item) == 2:
        k, v = item
        if (k is None or type(k) is bytes) and (v is None or type(v) is bytes):
            return (v, k, (), None, None)
        return (_b(v), _b(k), (), None, None)
    if t is bytes:
        return (item, None, (), None, None)
    return tuple(_slow_record(item))


def _slow_record(item: Any) -> ProducerRecord:
    if isinstance(item, ProducerRecord):
        return item
    if item is None or isinstance(item, (bytes, bytearray, memoryview, str)):
        return ProducerRecord(_b(item))
    if isinstance(item, tuple):
        if len(item) != 2:
            raise TypeError("a tuple record must be (key, value); use a dict or ProducerRecord "
                            "for headers and timestamps")
        return ProducerRecord(_b(item[1]), _b(item[0]))
    if isinstance(item, dict):
        unknown = set(item) - {"value", "key", "headers", "timestamp", "partition"}
        if unknown:
            raise TypeError(f"unknown record field(s) {sorted(unknown)}; use value, key, headers, "
                            "timestamp, partition")
        return ProducerRecord(_b(item.get("value")), _b(item.get("key")),
                              [(k, _b(v)) for k, v in (item.get("headers") or ())],
                              item.get("timestamp"), item.get("partition"))
    if hasattr(item, "value"):
        return ProducerRecord(_b(item.value), _b(getattr(item, "key", None)),
                              [(k, _b(v)) for k, v in (getattr(item, "headers", None) or ())],
                              getattr(item, "timestamp", None))
    raise TypeError(f"cannot produce a {type(item).__name__}; give bytes, (key, value), a dict "
                    "or a ProducerRecord")


@dataclass(frozen=True)
class ProduceResult:
    """Where a partition's batch landed (``base_offset`` is -1 with acks=0)."""
    topic: str
    partition: int
    base_offset: int
    record_count: int
    log_append_time: int = -1
    log_start_offset: int = -1


@dataclass
class FetchResult:
    """One partition's fetch: decoded batches plus the partition's watermarks.

    ``batches`` may start before the requested offset (a broker returns whole
    batches); :meth:`records` drops records below ``fetch_offset``.
    """
    topic: str
    partition: int
    fetch_offset: int
    high_watermark: int
    last_stable_offset: int = -1
    log_start_offset: int = -1
    batches: List[Batch] = field(default_factory=list)
    aborted_transactions: List[Tuple[int, int]] = field(default_factory=list)
    partial_tail: Optional[int] = None
    size: int = 0

    def records(self) -> List[Record]:
        """All records at or after ``fetch_offset``: control batches and aborted transactions left out.

        ``aborted_transactions`` (a read_committed fetch's ``(producer_id,
        first_offset)`` list) is applied as Kafka's consumer applies it: a
        producer's transactional batches are dropped from the first offset of
        its aborted transaction up to that transaction's abort marker.
        """
        out: List[Record] = []
        pending = sorted(self.aborted_transactions, key=lambda a: a[1])
        aborting: Set[int] = set()
        i = 0
        for b in self.batches:
            if pending or aborting:
                pid = getattr(b, "producer_id", -1)
                if pid is not None and pid >= 0:
                    while i < len(pending) and pending[i][1] <= b.last_offset:
                        aborting.add(pending[i][0])
                        i += 1
                    if b.is_control:
                        if b.control_type == "abort":
                            aborting.discard(pid)
                        continue
                    if b.is_transactional and pid in aborting:
                        continue
            if getattr(b, "is_control", False) or b.last_offset < self.fetch_offset:
                continue
            out.extend(r for r in b if r.offset >= self.fetch_offset)
        return out

    @property
    def next_offset(self) -> int:
        """The offset to fetch next."""
        if self.batches:
            return max(self.fetch_offset, self.batches[-1].last_offset + 1)
        return self.fetch_offset


@dataclass(frozen=True)
class OffsetResult:
    """A ListOffsets answer: the offset (and its timestamp, -1 for earliest/latest)."""
    topic: str
    partition: int
    offset: int
    timestamp: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset; ``offset`` is -1 when the group has none for the partition."""
    offset: int
    metadata: Optional[str] = ""
    leader_epoch: int = -1


def as_offset_and_metadata(value: Any) -> OffsetAndMetadata:
    """An offset to commit as given by a caller: an ``int``, ``(offset, metadata)`` or
    an ``OffsetAndMetadata`` (the forms ``Consumer.commit`` and ``Client.commit_offsets`` take)."""
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, tuple):
        return OffsetAndMetadata(int(value[0]), value[1])
    return OffsetAndMetadata(int(value))


@dataclass(frozen=True)
class TopicResult:
    """The outcome of creating or deleting one topic (``error`` None on success)."""
    name: str
    error: Optional[Exception] = None
    num_partitions: int = -1
    replication_factor: int = -1
    topic_id: Any = None
