"""``kafkawire.Producer``: batching, idempotent producing from a background thread.

``send`` serialises and partitions a record, appends it to its partition's
open batch and returns a ``concurrent.futures.Future`` of its
:class:`~kafkawire.client.results.RecordMetadata`; a background thread (see
``sender.py``) sends batches as they fill or linger out and resolves the
futures.  Settings are Kafka's producer settings in snake_case (see
``config.py``); idempotence is on by default, as in Kafka's producer since 3.0.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from concurrent.futures import Future
from time import monotonic as _monotonic
from time import time as _time
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from kafkawire import _kernels as K
from kafkawire.client import bulk
from kafkawire.client.accumulator import (BATCH_HEADER_SIZE, RECORD_OVERHEAD, ProducerBatch,
                                         RecordAccumulator)
from kafkawire.client.client import Client
from kafkawire.client.config import Config, connection_kwargs, resolve
from kafkawire.client.exceptions import (BufferFullError, ProducerClosedError,
                                         TransactionStateError)
from kafkawire.client.futures import BatchFuture, DeliveryFuture
from kafkawire.client.partitioner import partition_for_key
from kafkawire.client.results import ProduceResult, RecordMetadata
from kafkawire.client.sender import Sender, request_overhead
from kafkawire.protocol.error_codes import UNKNOWN_TOPIC_OR_PARTITION, error_code, make_error

__all__ = ["Producer", "RecordMetadata"]

log = logging.getLogger("kafkawire.client.producer")

Headers = Optional[Union[Mapping[str, Optional[bytes]], Sequence[Tuple[str, Optional[bytes]]]]]


def _bytes_field(v: Any, what: str) -> Optional[bytes]:
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        raise TypeError(f"{what} must be bytes or None, not str: encode it, or give the producer "
                        f"a {what}_serializer (e.g. {what}_serializer=str.encode)")
    raise TypeError(f"{what} must be bytes or None, not {type(v).__name__}; give the producer "
                    f"a {what}_serializer")


def _headers(headers: Headers) -> Tuple[Optional[list], int]:
    """Headers as ``[(str, bytes | None)]`` and their size."""
    if not headers:
        return None, 0
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    size = 0
    for k, v in items:
        if not isinstance(k, str):
            raise TypeError(f"header keys must be str, not {type(k).__name__}")
        v = _bytes_field(v, "header value")
        out.append((k, v))
        size += len(k) + (len(v) if v is not None else 0) + 2
    return out, size


class Producer:
    """A thread-safe Kafka producer.

    ``Producer(bootstrap_servers, **config)``: ``config`` takes Kafka's
    producer settings in snake_case (``acks``, ``linger_ms``, ``batch_size``,
    ``compression_type``, ``enable_idempotence``, ``key_serializer``,
    ``partitioner``, ``on_delivery``, TLS/SASL settings, ...); an unknown
    setting raises :class:`~kafkawire.client.config.ConfigError`.  Use it as a
    context manager, or call :meth:`close` (which delivers what is queued).
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[Any]], **config: Any) -> None:
        self.config: Config = resolve("producer", config)
        cfg = self.config
        self._client = Client(bootstrap_servers, retries=0,
                              **connection_kwargs(cfg))
        self._acc = RecordAccumulator(cfg.batch_size, cfg.buffer_memory,
                                      cfg.delivery_timeout_ms / 1000.0)
        self._lock = self._acc.lock
        self._max_request_size = cfg.max_request_size
        # A Produce request never exceeds max_request_size: a batch (and so a record) leaves
        # room for the request's own fields around it.
        room = cfg.max_request_size - request_overhead(cfg.client_id, cfg.transactional_id)
        self._batch_size = max(min(cfg.batch_size, room), 1)
        self._max_block = cfg.max_block_ms / 1000.0
        self._delivery_timeout = cfg.delivery_timeout_ms / 1000.0
        self._key_ser = cfg.key_serializer
        self._value_ser = cfg.value_serializer
        self._serialize = self._key_ser is not None or self._value_ser is not None
        self._transactional = cfg.transactional_id is not None
        self._gated = self._transactional  # send() checks the gate when this is True
        self._max_record_size = room - BATCH_HEADER_SIZE
        self._topics = self._client.cluster.topics  # the dict is updated in place
        part = cfg.partitioner
        self._custom_partitioner: Optional[Callable] = part if callable(part) else None
        self._round_robin = part == "round_robin"
        self._ignore_keys = cfg.partitioner_ignore_keys
        # Keyless records stick to one partition until ``batch_size`` bytes went there
        # (KIP-480/794): {topic: Sticky}.
        self._sticky: Dict[str, Any] = {}
        self._rr: Dict[str, int] = {}
        self._closed = False
        self._txn_ready = False
        # send()'s common case runs in one compiled call (the Appender kernel); everything
        # else, and every record with the pure kernels, takes _send_general.
        self._kernels = K
        self._appender = K.Appender(self._send_general, self._acc.queues, self._topics,
                                    self._sticky, DeliveryFuture, self._batch_size,
                                    self._max_record_size, self._acc.buffer_memory,
                                    self._ignore_keys)
        self._appender.bypass = (self._gated or self._serialize or self._round_robin
                                 or self._custom_partitioner is not None)
        self._acc.counters = self._appender
        self.send = self._appender.send  # type: ignore[method-assign]
        self._sender = Sender(self)
        self._sender.start()

    # ----------------------------------------------------------- lifecycle
    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<kafkawire.Producer client_id={self.config.client_id!r}" \
               f"{' closed' if self._closed else ''}>"

    def flush(self, timeout: Optional[float] = None) -> int:
        """Send everything queued now and wait until it is acknowledged (or failed).

        Returns the number of records still waiting when ``timeout`` seconds
        ran out (0: all delivered).  Raises
        :class:`~kafkawire.client.AuthenticationError` if a broker refused the
        producer's credentials (the queued records failed with it).
        """
        acc = self._acc
        sender = self._sender
        deadline = None if timeout is None else time.monotonic() + timeout
        with acc.lock:
            acc.flushing += 1
        try:
            sender.wake()
            with acc.lock:
                while acc.pending_records > 0 and sender.is_alive():
                    if sender.auth_error is not None:
                        break
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    acc.changed.wait(0.05 if left is None else min(left, 0.05))
                    sender.wake()
                pending = acc.pending_records
        finally:
            with acc.lock:
                acc.flushing -= 1
        if sender.auth_error is not None:
            raise sender.auth_error
        return pending

    def close(self, timeout: Optional[float] = None) -> None:
        """Deliver what is queued (up to ``timeout`` seconds), then stop and close connections.

        Records still undelivered when the time is up fail with
        :class:`~kafkawire.client.exceptions.ProducerClosedError`.
        """
        if self._closed and not self._sender.is_alive():
            return
        self._closed = True
        self._gated = True
        self._appender.bypass = True
        sender = self._sender
        sender.closing = True
        sender.wake()
        if threading.current_thread() is sender:  # close() from a delivery callback
            sender.force = True
            return
        sender.join(timeout)
        if sender.is_alive():
            sender.force = True
            sender.wake()
            sender.join()

    # --------------------------------------------------------------- send
    def send(self, topic: str, value: Any = None, key: Any = None, headers: Headers = None,
             partition: Optional[int] = None, timestamp: Optional[int] = None,
             on_delivery: Optional[Callable[[Optional[BaseException], Optional[RecordMetadata]],
                                            None]] = None) -> "DeliveryFuture":
        """Queue one record; the future resolves to its :class:`RecordMetadata` once acknowledged.

        Blocks only when the buffer is full or the topic's metadata is not
        known yet (up to ``max_block_ms``).  ``on_delivery(error, metadata)``
        runs on the producer's I/O thread once the record is acknowledged or
        has failed; keep it short.
        """
        return self._appender.send(topic, value, key, headers, partition, timestamp, on_delivery)

    def _send_general(self, topic: str, value: Any, key: Any, headers: Headers,
                      partition: Optional[int], timestamp: Optional[int],
                      on_delivery: Optional[Callable[[Optional[BaseException],
                                                      Optional[RecordMetadata]], None]]
                      ) -> "DeliveryFuture":
        """``send`` for every record the compiled fast path does not take."""
        if self._gated:  # closed, or transactional: checked only then
            self._check_gate("send()")
        if self._serialize:
            if self._key_ser is not None:
                key = self._key_ser(key)
            if self._value_ser is not None:
                value = self._value_ser(value)
        if value is None:
            size = RECORD_OVERHEAD
        elif type(value) is bytes:
            size = RECORD_OVERHEAD + len(value)
        else:
            value = _bytes_field(value, "value")
            size = RECORD_OVERHEAD + len(value)  # type: ignore[arg-type]
        if key is not None:
            if type(key) is not bytes:
                key = _bytes_field(key, "key")
            size += len(key)  # type: ignore[arg-type]
        hdrs = None
        if headers:
            hdrs, hsize = _headers(headers)
            size += hsize
        if size > self._max_record_size:
            raise make_error(10, f"the record is {size} bytes, over max_request_size "
                                 f"({self._max_request_size})", api="Produce", topic=topic)
        if timestamp is None:
            timestamp = int(_time() * 1000)
        info = self._topics.get(topic)
        if info is None or not info.partitions:
            info = self._wait_for_topic(topic)
        future = DeliveryFuture()
        acc = self._acc
        with self._lock:
            if partition is None:
                sticky = self._sticky.get(topic) if key is None or self._ignore_keys else None
                if sticky is not None and sticky.left > 0:
                    sticky.left -= size
                    partition = sticky.partition
                else:
                    partition = self._partition(topic, key, len(info.partitions), info, size)
            elif partition.__class__ is not int or not 0 <= partition < len(info.partitions):
                raise ValueError(f"{topic} has partitions 0..{len(info.partitions) - 1}, "
                                 f"not {partition!r}")
            if acc.used + size > acc.buffer_memory and acc.used > 0:
                if not acc.wait_for_room(size, _monotonic() + self._max_block):
                    raise BufferFullError(
                        f"buffer_memory ({acc.buffer_memory} bytes) stayed full for "
                        f"max_block_ms ({self._max_block * 1000:.0f} ms); the brokers are not "
                        "keeping up, or cannot be reached")
            parts = acc.queues.get(topic)
            q = parts.get(partition) if parts is not None else None
            if q is None:
                q = acc.queue(topic, partition)
            b = q[-1] if q else None
            wake = False
            if b is None or b.closed or (b.size + size > self._batch_size and b.count):
                if b is not None and not b.closed:
                    b.closed = True
                    wake = True
                b = ProducerBatch(topic, partition, _monotonic(), self._delivery_timeout)
                q.append(b)
                # the batch's header counts too: its whole size is released when it completes
                acc.counters.reserve(b.size, 0)
            i = b.buf.append(timestamp, key, value, hdrs, size)
            if on_delivery is not None:
                if b.callbacks is None:
                    b.callbacks = {}
                b.callbacks[i] = on_delivery
            acc.counters.reserve(size, 1)
        future._outcome = b.outcome
        future._index = i
        if wake:
            self._sender.wake()
        return future

    def _check_gate(self, what: str) -> None:
        if self._closed:
            raise ProducerClosedError(f"{what} after close(); create a new Producer")
        if self._transactional and not self._sender.txn.in_transaction:  # type: ignore[union-attr]
            raise TransactionStateError("a transactional producer sends inside a transaction: "
                                        "call begin_transaction() first")

    def _partition(self, topic: str, key: Optional[bytes], n: int, info, size: int) -> int:
        """The partition for a record (the caller holds the lock)."""
        custom = self._custom_partitioner
        if custom is not None:
            p = custom(key, n)
            if not isinstance(p, int) or not 0 <= p < n:
                raise ValueError(f"the partitioner returned {p!r} for {topic}, which has "
                                 f"partitions 0..{n - 1}")
            return p
        if key is not None and not self._ignore_keys and not self._round_robin:
            return partition_for_key(key, n)
        if self._round_robin:
            i = self._rr.get(topic, 0)
            self._rr[topic] = i + 1
            avail = info.available_partitions()
            return avail[i % len(avail)] if avail else i % n
        sticky = self._sticky.get(topic)
        if sticky is None:
            sticky = self._sticky[topic] = self._kernels.Sticky()
        if sticky.left <= 0 or sticky.partition >= n:
            avail = info.available_partitions() or list(range(n))
            if len(avail) > 1 and sticky.partition in avail:
                choices = [p for p in avail if p != sticky.partition]
            else:
                choices = avail
            sticky.partition = random.choice(choices)
            sticky.left = self._batch_size
        sticky.left -= size
        return sticky.partition

    def _wait_for_topic(self, topic: str):
        """Block until the sender has the topic's metadata (up to ``max_block_ms``)."""
        deadline = time.monotonic() + self._max_block
        sender = self._sender
        cluster = self._client.cluster
        with sender.metadata_ready:
            while True:
                info = cluster.topics.get(topic)
                if info is not None and info.partitions and info.error_code == 0:
                    return info
                if sender.auth_error is not None:
                    # the last try was refused: fail now, and have the sender try again
                    sender.want_metadata(topic, now=False)
                    raise sender.auth_error
                if info is not None and info.error_code and \
                        not error_code(info.error_code).retriable and \
                        info.error_code != UNKNOWN_TOPIC_OR_PARTITION:
                    raise make_error(info.error_code, api="Metadata", topic=topic)
                if not sender.is_alive():
                    raise ProducerClosedError("the producer is closed")
                left = deadline - time.monotonic()
                if left <= 0:
                    code = info.error_code if info is not None else 3
                    raise BufferFullError(
                        f"topic {topic!r} not in the cluster's metadata after max_block_ms "
                        f"({self._max_block * 1000:.0f} ms)"
                        + (f": {error_code(code).name}" if code else ""))
                sender.want_metadata(topic)
                sender.metadata_ready.wait(min(left, 0.1))

    # -------------------------------------------------------- transactions
    def _txn(self, what: str):
        txn = self._sender.txn
        if txn is None:
            raise TransactionStateError(f"{what} needs a transactional producer: give it a "
                                        "transactional_id")
        return txn

    def init_transactions(self, timeout: Optional[float] = None) -> None:
        """Register ``transactional_id`` with its coordinator (fencing older producers with it).

        Blocks until the producer has its id and epoch (``max_block_ms`` when
        ``timeout`` is None); an earlier producer's open transaction is
        finished by the coordinator first.
        """
        self._txn("init_transactions()")
        sender = self._sender
        deadline = _monotonic() + (self._max_block if timeout is None else timeout)
        while sender.producer_id < 0:
            if sender.fatal is not None:
                raise sender.fatal
            if sender.auth_error is not None:
                raise sender.auth_error
            if _monotonic() > deadline or not sender.is_alive():
                raise BufferFullError("init_transactions() timed out waiting for the "
                                      "transaction coordinator")
            sender.wake()
            time.sleep(0.005)
        self._txn_ready = True

    def begin_transaction(self) -> None:
        """Start a transaction: records sent from now until commit/abort belong to it."""
        txn = self._txn("begin_transaction()")
        if not self._txn_ready:
            raise TransactionStateError("call init_transactions() before begin_transaction()")
        if txn.in_transaction:
            raise TransactionStateError("a transaction is already open; commit or abort it")
        txn.failed = None
        txn.in_transaction = True

    def send_offsets_to_transaction(self, offsets: Mapping[Tuple[str, int], Any],
                                    group_metadata: Any,
                                    timeout: Optional[float] = None) -> None:
        """Commit a consumer group's offsets ``{(topic, partition): offset}`` with the transaction.

        ``group_metadata`` is the consuming group's id, or its consumer's
        ``group_metadata()``; offsets are the next ones to read, as for a commit.
        """
        txn = self._txn("send_offsets_to_transaction()")
        txn.check_open("send_offsets_to_transaction()")
        self._sender.submit(lambda: txn.send_offsets(offsets, group_metadata)).result(
            self._max_block if timeout is None else timeout)

    def commit_transaction(self, timeout: Optional[float] = None) -> None:
        """Deliver the transaction's records, then commit it: read_committed consumers see them.

        If a record of the transaction failed, raises ``TransactionStateError``
        (its cause is the record's error): abort the transaction instead.
        """
        txn = self._txn("commit_transaction()")
        txn.check_open("commit_transaction()")
        if self.flush(timeout) > 0:
            raise BufferFullError("commit_transaction(): records were still undelivered when "
                                  "the timeout ran out")
        if txn.failed is not None:
            raise TransactionStateError("a record of this transaction failed; call "
                                        "abort_transaction()") from txn.failed
        self._sender.submit(lambda: txn.end(True)).result(
            self._max_block if timeout is None else timeout)

    def abort_transaction(self, timeout: Optional[float] = None) -> None:
        """Abort the open transaction: its records stay invisible to read_committed consumers."""
        txn = self._txn("abort_transaction()")
        txn.check_open("abort_transaction()")
        self.flush(timeout)
        self._sender.submit(lambda: txn.end(False)).result(
            self._max_block if timeout is None else timeout)

    # --------------------------------------------------------------- bulk
    def send_batch(self, topic: str, records: Any, *,
                   partition: Optional[int] = None) -> "Future[List[ProduceResult]]":
        """Queue many records at once; the future resolves to one ``ProduceResult`` per batch.

        ``records``: a ``pyarrow.Table`` or ``RecordBatch`` (columns ``value``,
        ``key``, ``timestamp``, ``partition``, ``headers``; all optional), or a
        list of values, ``(key, value)`` tuples, dicts or ``ProducerRecord``s.
        Arrow data is encoded straight from its buffers, without a Python
        object per record (keys are hashed vectorised; a ``headers`` column or a
        custom partitioner costs one per record).  Rows go where :meth:`send` would put them; the
        results say where each batch landed (``base_offset``,
        ``record_count``).  If a batch fails, the future fails with its error
        (other batches may have been written).  The serializers are not
        applied: the data must be bytes (or Arrow binary/string columns).
        """
        self._check_gate("send_batch()")
        info = self._topics.get(topic)
        if info is None or not info.partitions:
            info = self._wait_for_topic(topic)
        n = len(info.partitions)
        if partition is not None and not 0 <= partition < n:
            raise ValueError(f"{topic} has partitions 0..{n - 1}, not {partition}")
        now = int(_time() * 1000)
        custom = self._custom_partitioner
        if self._ignore_keys and custom is None:
            def key_partition(k: bytes) -> int:
                return -1  # treated as keyless
        elif custom is not None:
            def key_partition(k: bytes) -> int:
                return self._partition(topic, k, n, info, 0)
        elif self._round_robin:
            def key_partition(k: bytes) -> int:
                with self._lock:
                    return self._partition(topic, None, n, info, 0)
        else:
            def key_partition(k: bytes) -> int:
                return partition_for_key(k, n)

        def keyless() -> int:
            with self._lock:
                return self._partition(topic, None, n, info, self._batch_size)

        chunks = None
        if bulk.is_arrow(records):
            chunks = bulk.arrow_chunks(records, n, self._batch_size, now, partition,
                                       key_partition, keyless,
                                       default_keys=custom is None and not self._round_robin
                                       and not self._ignore_keys)
            if chunks is None:  # a headers column: row by row
                records = records.to_pylist()
        if chunks is None:
            chunks = bulk.row_chunks(records, n, self._batch_size, now, partition,
                                     key_partition, keyless)
        future = BatchFuture(len(chunks))
        acc = self._acc
        sender = self._sender
        for index, (p, job, rows, count, first_ts, max_ts, size) in enumerate(chunks):
            b = ProducerBatch(topic, p, _monotonic(), self._delivery_timeout)
            b.batch_future = (future, index)
            b.count = count
            b.first_ts, b.max_ts = first_ts, max_ts
            b.size += size
            if rows is not None:
                b.values, b.keys, b.timestamps, b.headers = rows  # type: ignore[misc]
            b.closed = True
            with self._lock:
                if acc.used + b.size > acc.buffer_memory and acc.used > 0:
                    sender.wake()
                    if not acc.wait_for_room(b.size, _monotonic() + self._max_block):
                        err = BufferFullError(
                            f"buffer_memory ({acc.buffer_memory} bytes) stayed full for "
                            f"max_block_ms ({self._max_block * 1000:.0f} ms)")
                        for j in range(index, len(chunks)):
                            future._fail(j, err)
                        break
                # the room is taken before the batch is encoded, outside the lock
                acc.counters.reserve(b.size, count)
                if job is None:
                    acc.queue(topic, p).append(b)
            if job is not None:
                enc, start, stop, spread = job
                try:
                    b.pooled, n = enc.encode(start, stop, first_ts, spread, acc.pool)
                except BaseException as exc:
                    with self._lock:
                        acc.release(b)
                    for j in range(index, len(chunks)):
                        future._fail(j, exc)
                    raise
                b.blob = memoryview(b.pooled)[:n]
                with self._lock:
                    acc.queue(topic, p).append(b)
            sender.wake()
        return future

    # ------------------------------------------------------------ metadata
    def partitions_for(self, topic: str) -> List[int]:
        """The topic's partition numbers (fetching its metadata if needed)."""
        info = self._client.cluster.topics.get(topic)
        if info is None or not info.partitions:
            info = self._wait_for_topic(topic)
        return sorted(info.partitions)
