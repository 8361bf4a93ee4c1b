"""The producer's record accumulator: one queue of batches per partition, and the buffer budget.

``send`` appends records to the last open batch of their partition; a batch
closes when it reaches ``batch_size`` bytes, and the sender takes a
partition's first batch once it is closed, ``linger_ms`` old, or a flush or
close wants everything out.  The bytes of records not yet acknowledged count
against ``buffer_memory``; ``send`` blocks (up to ``max_block_ms``) while
the budget is spent.  A batch that must be retried goes back to the front of
its queue, ordered by sequence number, so an idempotent producer never
reorders a partition.
"""
from __future__ import annotations

import itertools
import struct
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from kafkawire import _kernels as K
from kafkawire import compression as _compression
from kafkawire.client.futures import Outcome

__all__ = ["BufferPool", "ProducerBatch", "RecordAccumulator", "RECORD_OVERHEAD", "batch_header",
           "encode_batch", "encode_batch_parts"]

# Bytes a record adds besides its key, value and headers (length, attributes, deltas, counts):
# an estimate for batch_size and buffer_memory, as Kafka's producer estimates.
RECORD_OVERHEAD = 12
BATCH_HEADER_SIZE = 61

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_ORDER = itertools.count()


def batch_header(records: Any, count: int, first_ts: int, max_ts: int, codec: int,
                 producer_id: int, producer_epoch: int, base_sequence: int,
                 transactional: bool) -> bytes:
    """The 61-byte v2 batch header (base offset 0) for a records region as sent (already
    compressed with ``codec``), its CRC included."""
    head = bytearray(BATCH_HEADER_SIZE)
    attrs = codec | (0x10 if transactional else 0)
    _V2_HEADER.pack_into(head, 0, 0, BATCH_HEADER_SIZE - 12 + len(records), -1, 2, 0, attrs,
                         max(count - 1, 0), first_ts, max_ts, producer_id, producer_epoch,
                         base_sequence, count)
    # the CRC runs from the attributes through the records: the header's part, then on
    # through the records
    struct.pack_into(">I", head, 17, _crc_held(records, K.crc32c(head, 21, -1, 0)))
    return bytes(head)


_CRC_PIECE = 65536  # the kernel keeps the GIL for pieces this size (it lets go above)


def _crc_held(data: Any, crc: int) -> int:
    """CRC-32C of ``data`` continuing from ``crc``, without letting go of the GIL.

    The sender thread checksums each batch as it sends it (the sequence number
    is part of what the CRC covers): at tens of GB/s a 256 KiB batch takes
    microseconds, while handing the GIL to a thread encoding the next batches
    can cost the sender milliseconds before it gets it back.
    """
    n = len(data) if not isinstance(data, memoryview) else data.nbytes
    crc32c = K.crc32c
    for start in range(0, n, _CRC_PIECE):
        crc = crc32c(data, start, min(start + _CRC_PIECE, n), crc)
    return crc


def encode_batch_parts(records: Any, count: int, first_ts: int, max_ts: int, codec: int,
                       level: Optional[int], producer_id: int, producer_epoch: int,
                       base_sequence: int, transactional: bool) -> Tuple[bytes, Any]:
    """A v2 batch at base offset 0 around an encoded records region (compressed here), as
    ``(header, records)``: the records are not copied, the socket writes both."""
    if codec:
        records = _compression.compress(codec, records, magic=2, level=level)
    return batch_header(records, count, first_ts, max_ts, codec, producer_id, producer_epoch,
                        base_sequence, transactional), records


def encode_batch(records: bytes, count: int, first_ts: int, max_ts: int, codec: int,
                 level: Optional[int], producer_id: int, producer_epoch: int,
                 base_sequence: int, transactional: bool) -> bytes:
    """A v2 batch at base offset 0 around an encoded records region (compressed here)."""
    head, body = encode_batch_parts(records, count, first_ts, max_ts, codec, level, producer_id,
                                    producer_epoch, base_sequence, transactional)
    return head + bytes(body)


class BufferPool:
    """Reusable output buffers for encoded batches, up to ``limit`` bytes kept.

    Fresh memory costs a page fault per 4 KiB and zeroing; a producer
    streaming a large table reuses the buffers of acknowledged batches
    instead.  A buffer comes back (``put``) only once nothing reads it: its
    batch was answered or failed.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free: List[bytearray] = []
        self._kept = 0
        self._lock = threading.Lock()

    def get(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes (its contents are stale)."""
        with self._lock:
            free = self._free
            for i in range(len(free) - 1, -1, -1):
                if len(free[i]) >= size:
                    buf = free.pop(i)
                    self._kept -= len(buf)
                    return buf
        return bytearray(-(-size // 65536) * 65536)

    def put(self, buf: bytearray) -> None:
        with self._lock:
            if self._kept + len(buf) <= self.limit:
                self._free.append(buf)
                self._kept += len(buf)


class ProducerBatch:
    """Records of one partition sent (and retried) together as one v2 batch.

    ``send`` appends to ``buf`` (a ``RecordBuffer`` kernel: records are
    encoded as they arrive); ``send_batch`` gives a pre-encoded ``blob`` or,
    for rows it could not encode from Arrow buffers, the per-record lists.
    """

    __slots__ = ("topic", "partition", "buf", "values", "keys", "timestamps", "headers",
                 "outcome", "callbacks", "created", "deadline", "attempts", "retry_at",
                 "base_sequence", "encoded", "encoded_for", "blob", "first_ts", "max_ts",
                 "batch_future", "sent_at", "epoch", "order", "pooled", "region_cache")

    def __init__(self, topic: str, partition: int, now: float, delivery_timeout: float) -> None:
        self.topic = topic
        self.partition = partition
        self.buf = K.RecordBuffer(BATCH_HEADER_SIZE)  # count, size, closed and the records
        self.values: Optional[List[Optional[bytes]]] = None  # send_batch rows: per-record lists
        self.keys: Optional[List[Optional[bytes]]] = None
        self.timestamps: Optional[List[int]] = None
        self.headers: Any = None
        self.outcome = Outcome(topic, partition, self.buf)
        self.callbacks: Optional[Dict[int, Callable]] = None
        self.created = now
        self.deadline = now + delivery_timeout
        self.attempts = 0
        self.retry_at = 0.0
        self.base_sequence = -1
        self.encoded: Optional[Tuple[bytes, Any]] = None
        self.encoded_for: Optional[Tuple[int, int, int]] = None
        self.blob: Any = None                  # a pre-encoded records region (send_batch)
        self.pooled: Optional[bytearray] = None  # the pool buffer ``blob`` lies in
        self.region_cache: Any = None          # the records region as sent (compressed)
        self.first_ts = -1
        self.max_ts = -1
        self.batch_future: Optional[Tuple[Any, int]] = None  # send_batch: (future, index)
        self.sent_at = 0.0
        self.epoch = -1
        self.order = next(_ORDER)              # creation order: retries go back in this order

    # The fields send() updates live in the buffer, where the compiled fast path reaches them.
    @property
    def count(self) -> int:
        return self.buf.count

    @count.setter
    def count(self, value: int) -> None:
        self.buf.count = value

    @property
    def size(self) -> int:
        return self.buf.size

    @size.setter
    def size(self, value: int) -> None:
        self.buf.size = value

    @property
    def closed(self) -> bool:
        return self.buf.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self.buf.closed = value

    def __repr__(self) -> str:
        return (f"<ProducerBatch {self.topic}-{self.partition} records={self.count} "
                f"bytes={self.size} seq={self.base_sequence} attempts={self.attempts}>")

    def region(self, codec: int, level: Optional[int]) -> Any:
        """The records region as sent: encoded, and compressed with ``codec``, once (retries
        and new sequence numbers reuse it)."""
        if self.region_cache is not None:
            return self.region_cache
        if self.blob is None:
            if self.values is not None:  # send_batch rows
                assert self.timestamps is not None and self.keys is not None
                ts = self.timestamps
                first = ts[0]
                self.first_ts, self.max_ts = first, max(ts)
                headers = self.headers if self.headers is not None else [None] * self.count
                self.blob = K.encode_records_v2(range(self.count), [t - first for t in ts],
                                                self.keys, self.values, headers)
                # The records now live in the blob; drop the per-record lists.
                self.values = self.keys = self.headers = None
            else:
                buf = self.buf
                self.first_ts, self.max_ts = buf.first_timestamp, buf.max_timestamp
                self.blob = buf.take()
        region = self.blob
        if codec:
            region = _compression.compress(codec, region, magic=2, level=level)
        self.region_cache = region
        return region

    def encode(self, producer_id: int, producer_epoch: int, base_sequence: int, codec: int,
               level: Optional[int], transactional: bool) -> Tuple[bytes, Any]:
        """The batch for this producer id/epoch/sequence as ``(header, records)`` buffers
        (cached: retries resend them)."""
        key = (producer_id, producer_epoch, base_sequence)
        if self.encoded is not None and self.encoded_for == key:
            return self.encoded
        region = self.region(codec, level)
        self.encoded = (batch_header(region, self.count, self.first_ts, self.max_ts, codec,
                                     producer_id, producer_epoch, base_sequence, transactional),
                        region)
        self.encoded_for = key
        return self.encoded


class RecordAccumulator:
    """Per-partition batch queues guarded by one lock, with the buffer-memory budget."""

    def __init__(self, batch_size: int, buffer_memory: int, delivery_timeout: float) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.delivery_timeout = delivery_timeout
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)   # memory freed / records completed
        self.queues: Dict[str, Dict[int, Deque[ProducerBatch]]] = {}
        self.flushing = 0
        # send_batch's encoded batches reuse the buffers of answered ones
        self.pool = BufferPool(buffer_memory)
        # The bytes and records queued: counted by an Appender kernel (the producer's send
        # path), which changes them atomically even where send() takes no lock.
        self.counters: Any = K.Appender(None, self.queues, {}, {}, None, batch_size, 0,
                                        buffer_memory, False)

    @property
    def used(self) -> int:
        return self.counters.used

    @property
    def pending_records(self) -> int:
        return self.counters.pending_records

    # The caller holds ``lock`` for the methods below.
    def queue(self, topic: str, partition: int) -> Deque[ProducerBatch]:
        parts = self.queues.get(topic)
        if parts is None:
            parts = self.queues[topic] = {}
        q = parts.get(partition)
        if q is None:
            q = parts[partition] = deque()
        return q

    def wait_for_room(self, size: int, deadline: float) -> bool:
        """Block until ``size`` more bytes fit in the budget (False: ``deadline`` passed)."""
        while self.used + size > self.buffer_memory and self.used > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.wait(left)
        return True

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a batch to retry back in its queue, before every batch created after it."""
        q = self.queue(batch.topic, batch.partition)
        order = batch.order
        for i, other in enumerate(q):
            if other.order > order:
                q.insert(i, batch)
                return
        q.append(batch)

    def release(self, batch: ProducerBatch) -> None:
        """The batch is done (answered or failed): its bytes leave the budget, its buffer
        goes back to the pool."""
        self.counters.release(batch.size, batch.count)
        if batch.pooled is not None:
            buf, batch.pooled = batch.pooled, None
            batch.blob = batch.encoded = batch.region_cache = None
            self.pool.put(buf)
        self.changed.notify_all()

    def batches(self) -> List[ProducerBatch]:
        return [b for parts in self.queues.values() for q in parts.values() for b in q]

    def empty(self) -> bool:
        return not any(q for parts in self.queues.values() for q in parts.values())
