"""The producer's background thread: drain ready batches, send them, read answers, retry.

One thread owns every connection (a ``Client``); ``send`` only appends to the
accumulator and wakes it.  Per loop: refresh metadata when a queued
partition has no known leader (or a waiting ``send`` needs a topic), get a
producer id for idempotence, drain each leader's ready batches into one
Produce request (at most ``max_in_flight_requests_per_connection`` in flight
per broker), then wait for answers or the next linger deadline.

Idempotence follows Kafka's producer: every batch carries the producer id,
epoch and the partition's next sequence number; a retried batch is resent
with the same numbers, so the broker drops it if it had written it (no
duplicates), and a partition with a batch to retry sends nothing newer until
its in-flight requests are answered (no reordering).  OUT_OF_ORDER_SEQUENCE_NUMBER
for a batch that follows one still unresolved is a consequence and is
retried; for the partition's next expected batch it means the broker lost our
state: the batch fails, and the producer bumps its epoch (InitProducerId with
its id and epoch, KIP-360) and restarts every partition's sequence at 0.
UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH bump the epoch and retry.
"""
from __future__ import annotations

import collections
import logging
import select
import socket
import struct
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from kafkawire import _kernels as K
from kafkawire import protocol as P
from kafkawire.client import _api as A
from kafkawire.client.accumulator import BATCH_HEADER_SIZE, ProducerBatch
from kafkawire.client.cluster import STALE_METADATA_CODES
from kafkawire.client.exceptions import (DeliveryTimeoutError, KafkaConnectionError,
                                         ProducerClosedError, RequestTimeoutError)
from kafkawire.client.futures import complete
from kafkawire.client.security import AuthenticationError
from kafkawire.client.results import ProduceResult
from kafkawire.client.transaction import TransactionManager
from kafkawire.compression import codec_id
from kafkawire.errors import KafkaWireError, ProtocolError
from kafkawire.protocol.error_codes import (COORDINATOR_ERRORS, DUPLICATE_SEQUENCE_NUMBER,
                                           INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
                                           PRODUCER_FENCED, UNKNOWN_PRODUCER_ID,
                                           BrokerResponseError, make_error)

if TYPE_CHECKING:  # pragma: no cover
    from kafkawire.client.producer import Producer

__all__ = ["Sender"]

log = logging.getLogger("kafkawire.client.producer")

_EPOCH_ERRORS = frozenset({UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED})
# Sequence numbers run from 0 to 2**31-1 and then start again at 0, as Kafka's producer
# and broker count them (DefaultRecordBatch.incrementSequence): (seq + n) & _MAX_SEQUENCE.
_MAX_SEQUENCE = 0x7FFFFFFF
_HALF_SEQUENCE = 1 << 30


_HEAD = struct.Struct(">ihhi")      # size, api key, version, correlation id
_ACKS_TIMEOUT = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FLEXIBLE_PRODUCE = 9               # ProduceRequest's first flexible version


def _uvarint(n: int) -> bytes:
    return K.write_unsigned_varint(n)  # type: ignore[no-any-return]


def _string(s: Optional[str], compact: bool) -> bytes:
    """A (nullable) STRING: int16 length, or unsigned varint length + 1 when ``compact``."""
    if s is None:
        return b"\0" if compact else b"\xff\xff"
    raw = s.encode("utf-8")
    return (_uvarint(len(raw) + 1) if compact else _I16.pack(len(raw))) + raw


class ProduceFrame:
    """A Produce request written around its batches' buffers, which it does not copy.

    The generic encoder copies every batch into one frame; this one keeps the
    fields between batches in small byte strings and hands the socket a list
    of buffers (``parts``), in the byte order ``protocol.encode_request``
    writes (versions 3 and up, the ones v2 batches travel in).  ``size`` is the
    frame's exact size, so a request is packed up to ``max_request_size`` and
    never past it.
    """

    __slots__ = ("version", "flexible", "head", "topics", "size")

    def __init__(self, version: int, correlation_id: int, client_id: Optional[str],
                 transactional_id: Optional[str], acks: int, timeout_ms: int) -> None:
        self.version = version
        flexible = self.flexible = version >= _FLEXIBLE_PRODUCE
        head = bytearray(_HEAD.pack(0, 0, version, correlation_id))
        head += _string(client_id, False)   # the header's client id is never compact
        if flexible:
            head += b"\0"                   # the header's tagged fields
        head += _string(transactional_id, flexible)
        head += _ACKS_TIMEOUT.pack(acks, timeout_ms)
        self.head = head
        self.topics: Dict[str, list] = {}   # name -> [(partition, header, records)]
        self.size = self._size()

    def _count(self, n: int) -> int:
        return len(_uvarint(n + 1)) if self.flexible else 4

    def _size(self) -> int:
        flex = self.flexible
        n = len(self.head) + self._count(len(self.topics)) + flex
        for name, parts in self.topics.items():
            n += len(_string(name, flex)) + self._count(len(parts)) + flex
            for _, head, records in parts:
                k = len(head) + len(records)
                n += 4 + (len(_uvarint(k + 1)) if flex else 4) + k + flex
        return n

    def _growth(self, topic: str, nbytes: int) -> int:
        """How many bytes adding a partition's ``nbytes`` of batch for ``topic`` adds (the
        counts of topics and partitions in front of them may grow a byte too)."""
        flex = self.flexible
        grow = 4 + (len(_uvarint(nbytes + 1)) if flex else 4) + nbytes + flex
        parts = self.topics.get(topic)
        if parts is None:
            n = len(self.topics)
            return grow + self._count(n + 1) - self._count(n) + len(_string(topic, flex)) \
                + self._count(1) + flex
        return grow + self._count(len(parts) + 1) - self._count(len(parts))

    def size_with(self, topic: str, partition: int, nbytes: int) -> int:
        """The frame's size once a batch of ``nbytes`` for ``topic`` is added."""
        return self.size + self._growth(topic, nbytes)

    def add(self, topic: str, partition: int, head: bytes, records: Any) -> None:
        self.size += self._growth(topic, len(head) + len(records))
        self.topics.setdefault(topic, []).append((partition, head, records))

    def parts(self) -> List[Any]:
        """The frame as buffers for ``socket.sendmsg`` (small fields joined)."""
        flex = self.flexible
        out: List[Any] = []
        small = bytearray(self.head)
        small += _uvarint(len(self.topics) + 1) if flex else _I32.pack(len(self.topics))
        for name, parts in self.topics.items():
            small += _string(name, flex)
            small += _uvarint(len(parts) + 1) if flex else _I32.pack(len(parts))
            for index, head, records in parts:
                k = len(head) + len(records)
                small += _I32.pack(index)
                small += _uvarint(k + 1) if flex else _I32.pack(k)
                small += head
                out.append(small)
                out.append(records)
                small = bytearray(b"\0" if flex else b"")   # the partition's tagged fields
            if flex:
                small += b"\0"                           # the topic's
        if flex:
            small += b"\0"                               # the request's
        out.append(small)
        _I32.pack_into(out[0], 0, self.size - 4)
        return out


def request_overhead(client_id: Optional[str], transactional_id: Optional[str]) -> int:
    """The most bytes a one-batch Produce request adds around its batch (any version from 3,
    any topic name Kafka allows)."""
    return max(ProduceFrame(v, 0, client_id, transactional_id, -1, 0).size_with("t" * 249, 0, 0)
               for v in (3, _FLEXIBLE_PRODUCE))


class _Request:
    __slots__ = ("node", "conn", "pending", "batches", "sent_at")

    def __init__(self, node, conn, pending, batches, sent_at) -> None:
        self.node, self.conn, self.pending, self.batches, self.sent_at = \
            node, conn, pending, batches, sent_at


class Sender(threading.Thread):
    """The I/O thread of one :class:`~kafkawire.client.producer.Producer`."""

    def __init__(self, producer: "Producer") -> None:
        super().__init__(name=f"kafkawire-producer-{producer.config.client_id}", daemon=True)
        cfg = producer.config
        self.producer = producer
        self.client = producer._client
        self.acc = producer._acc
        self.acks = cfg.acks
        self.linger = cfg.linger_ms / 1000.0
        self.max_inflight = cfg.max_in_flight_requests_per_connection
        self.retries = cfg.retries
        self.retry_backoff = cfg.retry_backoff_ms / 1000.0
        self.retry_backoff_max = max(cfg.retry_backoff_max_ms, cfg.retry_backoff_ms) / 1000.0
        self.request_timeout = cfg.request_timeout_ms / 1000.0
        self.max_request_size = cfg.max_request_size
        self.codec = codec_id(cfg.compression_type)
        self.level = cfg.compression_level
        self.idempotent = cfg.enable_idempotence
        self.transactional_id = cfg.transactional_id
        self.transaction_timeout_ms = cfg.transaction_timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_seq: Dict[Tuple[str, int], int] = {}
        self.last_acked: Dict[Tuple[str, int], int] = {}
        self.bump_epoch = False
        self.fatal: Optional[BaseException] = None
        # The last authentication failure, until a broker accepts us again: queued records fail
        # with it, and send()/flush() raise it instead of waiting out max_block_ms.
        self.auth_error: Optional[AuthenticationError] = None
        self.inflight: Dict[Any, List[_Request]] = defaultdict(list)
        self.inflight_tp: Dict[Tuple[str, int], int] = defaultdict(int)
        self.closing = False
        self.force = False
        self._metadata_wanted: set = set()
        self._metadata_due = 0.0
        self._metadata_failures = 0
        self.metadata_ready = threading.Condition()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._woken = False
        self.tasks: collections.deque = collections.deque()  # (callable, Future) to run here
        self.txn: Optional[Any] = None  # a TransactionManager with a transactional_id
        if self.transactional_id is not None:
            self.txn = TransactionManager(self, self.transactional_id,
                                          max(cfg.max_block_ms, cfg.request_timeout_ms) / 1000.0)

    # ------------------------------------------------------------ signals
    def wake(self) -> None:
        """Make the loop look at the accumulator now (cheap when already woken)."""
        if not self._woken:
            self._woken = True
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass

    def submit(self, fn):
        """Run ``fn()`` on this thread; returns a Future of its result."""
        from concurrent.futures import Future
        f: Future = Future()
        self.tasks.append((fn, f))
        self.wake()
        return f

    def _run_tasks(self) -> None:
        while self.tasks:
            fn, f = self.tasks.popleft()
            try:
                f.set_result(fn())
            except BaseException as exc:  # handed to the waiting caller
                f.set_exception(exc)

    def want_metadata(self, topic: str, now: bool = True) -> None:
        """Ask for ``topic``'s metadata: at once, or (``now=False``) after the retry backoff."""
        self._metadata_wanted.add(topic)
        if now:
            self._metadata_due = 0.0
        self.wake()

    # --------------------------------------------------------------- loop
    def run(self) -> None:
        try:
            while True:
                try:
                    if not self._run_once():
                        break
                except Exception as exc:  # keep delivering: one bad round must not stop the thread
                    log.exception("producer I/O loop error (continuing): %s", exc)
                    time.sleep(self.retry_backoff)
        finally:
            self._abandon(ProducerClosedError("the producer was closed before this record was "
                                              "delivered"))
            self.client.close()
            self._wake_r.close()
            self._wake_w.close()
            with self.metadata_ready:
                self.metadata_ready.notify_all()

    def _busy(self) -> bool:
        return any(self.inflight.values())

    def _run_once(self) -> bool:
        if self.force:
            return False
        if self.closing and not self._busy():
            with self.acc.lock:
                if self.acc.empty():
                    return False
        now = time.monotonic()
        self._refresh_metadata(now)
        if self.auth_error is not None:
            self._abandon(self.auth_error, queued_only=True)
            while self.tasks:
                self.tasks.popleft()[1].set_exception(self.auth_error)
            self._poll(self._timeout(time.monotonic()))
            self._check_request_timeouts(time.monotonic())
            return True
        if self.fatal is None and (self.idempotent and (self.producer_id < 0 or self.bump_epoch)) \
                and not self._busy():
            self._init_producer_id()
        self._expire(now)
        if self.tasks and (self.producer_id >= 0 or self.fatal is not None or
                           not self.idempotent):
            if self.fatal is not None:
                while self.tasks:
                    self.tasks.popleft()[1].set_exception(self.fatal)
            else:
                self._run_tasks()
        if self.fatal is not None:
            self._abandon(self.fatal, queued_only=True)
        elif not (self.idempotent and (self.producer_id < 0 or self.bump_epoch)):
            self._drain(now)
        self._poll(self._timeout(time.monotonic()))
        self._check_request_timeouts(time.monotonic())
        return True

    # ------------------------------------------------------------ metadata
    def _refresh_metadata(self, now: float) -> None:
        cluster = self.client.cluster
        topics = set(self._metadata_wanted)
        missing_leader = False
        with self.acc.lock:
            for topic, parts in self.acc.queues.items():
                if any(parts.values()):
                    topics.add(topic)
                    for p, q in parts.items():
                        if q and cluster.leader(topic, p) is None:
                            missing_leader = True
        if self.auth_error is not None:  # try again (after the backoff) only for a waiting send
            if now < self._metadata_due or not self._metadata_wanted:
                return
        elif not topics or now < self._metadata_due:
            return
        elif not (missing_leader or self._metadata_wanted or
                  cluster.needs_refresh(sorted(topics))):
            return
        try:
            self.client._refresh(sorted(topics | set(cluster.topics)))
            self._metadata_failures = 0
            self.auth_error = None
            wanted_done = {t for t in list(self._metadata_wanted)  # send() threads add to it
                           if (info := cluster.topics.get(t)) is not None and info.partitions}
            self._metadata_wanted -= wanted_done
        except AuthenticationError as exc:
            self._metadata_failures += 1
            self.authentication_failed(exc)
        except KafkaWireError as exc:
            self._metadata_failures += 1
            log.warning("metadata refresh failed: %s", exc)
        self._metadata_due = now + self._backoff(self._metadata_failures or 1)
        with self.metadata_ready:
            self.metadata_ready.notify_all()

    def _backoff(self, attempts: int) -> float:
        return min(self.retry_backoff * (2 ** max(attempts - 1, 0)), self.retry_backoff_max)

    def authentication_failed(self, exc: AuthenticationError) -> None:
        """A broker refused our credentials: queued records and waiting callers fail with ``exc``
        (the loop fails records queued later too), until a metadata request is accepted."""
        if self.auth_error is None:
            log.error("authentication failed: %s", exc)
        self.auth_error = exc
        self._metadata_wanted.clear()
        self._abandon(exc, queued_only=True)
        with self.metadata_ready:
            self.metadata_ready.notify_all()
        with self.acc.lock:
            self.acc.changed.notify_all()

    # ---------------------------------------------------------- producer id
    def _init_producer_id(self) -> None:
        """InitProducerId: a new id, or (bumping) the next epoch of ours where the broker can."""
        client = self.client
        try:
            if self.transactional_id is not None:
                conn = client._node(client.find_coordinator(self.transactional_id,
                                                            key_type=1).node_id)
            else:
                conn = client._any()
            version = client._version(conn, A.INIT_PRODUCER_ID)
            bump = self.bump_epoch and self.producer_id >= 0 and version >= 3
            req = P.InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=self.producer_id if bump else -1,
                producer_epoch=self.producer_epoch if bump else -1)
            resp = client._send(conn, req, version, None).result(self.request_timeout)
        except AuthenticationError as exc:
            self.authentication_failed(exc)
            return
        except (KafkaConnectionError, RequestTimeoutError, BrokerResponseError) as exc:
            if isinstance(exc, BrokerResponseError) and not exc.retriable:
                self.fatal = exc
            log.warning("InitProducerId failed: %s", exc)
            time.sleep(self.retry_backoff)
            return
        if resp.error_code:
            err = make_error(resp.error_code, api="InitProducerId")
            if err.retriable or resp.error_code in COORDINATOR_ERRORS:
                log.info("InitProducerId: %s; retrying", err)
                if self.transactional_id is not None:
                    client._coordinators.pop(self.transactional_id, None)
                time.sleep(self.retry_backoff)
                return
            self.fatal = err
            log.error("InitProducerId failed: %s", err)
            return
        log.info("producer id %d epoch %d%s", resp.producer_id, resp.producer_epoch,
                 " (epoch bumped)" if self.bump_epoch else "")
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        if self.bump_epoch:
            self._reset_sequences()
        self.bump_epoch = False

    def _reset_sequences(self) -> None:
        """A new epoch: every partition's sequence restarts at 0; unsent batches are renumbered."""
        self.next_seq.clear()
        self.last_acked.clear()
        with self.acc.lock:
            for b in self.acc.batches():
                b.base_sequence = -1

    def request_epoch_bump(self, why: str) -> None:
        if not self.bump_epoch:
            log.warning("bumping the producer epoch: %s", why)
        self.bump_epoch = True

    # --------------------------------------------------------------- drain
    def _drain(self, now: float) -> None:
        cluster = self.client.cluster
        acc = self.acc
        by_node: Dict[int, List[ProducerBatch]] = {}
        sizes: Dict[int, int] = {}
        linger = self.linger
        txn = self.txn
        to_add: List[Tuple[str, int]] = []
        with acc.lock:
            urgent = acc.flushing or self.closing
            for topic, parts in acc.queues.items():
                for partition, q in parts.items():
                    if not q:
                        continue
                    b = q[0]
                    if b.retry_at > now:
                        continue
                    if not (b.closed or urgent or now - b.created >= linger):
                        continue
                    leader = cluster.leader(topic, partition)
                    if leader is None:
                        continue
                    if len(self.inflight[leader]) >= self.max_inflight:
                        continue
                    if self.idempotent:
                        n = self.inflight_tp[(topic, partition)]
                        if n and (b.attempts or n >= self.max_inflight):
                            continue
                    if self.client.reconnect_delay(leader) > 0:
                        continue
                    if txn is not None and (topic, partition) not in txn.partitions:
                        to_add.append((topic, partition))
                        continue
                    # closed before its size is read: send() appends nothing from here on
                    # (its compiled path takes no lock), so the size is the batch's last
                    b.closed = True
                    size = b.size
                    if leader in sizes and sizes[leader] + size > self.max_request_size:
                        continue
                    q.popleft()
                    by_node.setdefault(leader, []).append(b)
                    sizes[leader] = sizes.get(leader, 0) + size
        for node, batches in by_node.items():
            self._send(node, batches, now)
        if to_add:
            self._add_partitions(to_add)

    def _add_partitions(self, tps: List[Tuple[str, int]]) -> None:
        """AddPartitionsToTxn before a partition's first batch of the transaction."""
        assert self.txn is not None
        try:
            self.txn.add_partitions(tps)
        except BrokerResponseError as exc:
            log.error("AddPartitionsToTxn failed: %s", exc)
            if exc.code in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED):
                self.fatal = exc
            failed = []
            with self.acc.lock:
                for topic, partition in tps:
                    q = self.acc.queues.get(topic, {}).get(partition)
                    while q:
                        failed.append(q.popleft())
            for b in failed:
                self._complete(b, error=exc)

    def _send(self, node: int, batches: List[ProducerBatch], now: float) -> None:
        client = self.client
        try:
            conn = client._node(node)
            version = client._version(conn, A.PRODUCE)
        except (KafkaConnectionError, RequestTimeoutError) as exc:
            self._send_failed(node, batches, exc, now)
            return
        except AuthenticationError as exc:
            for b in batches:
                self._complete(b, error=exc)
            self.authentication_failed(exc)
            return
        except KafkaWireError as exc:  # e.g. no common Produce version: not worth retrying
            for b in batches:
                self._complete(b, error=exc)
            return
        cid = conn.next_correlation_id()
        frame = ProduceFrame(version, cid, client.client_id, self.transactional_id, self.acks,
                             int(self.request_timeout * 1000))
        sent: List[ProducerBatch] = []
        later: List[ProducerBatch] = []
        for b in batches:
            # the exact bytes decide, before a sequence number is given: the request never
            # exceeds max_request_size
            nbytes = BATCH_HEADER_SIZE + len(b.region(self.codec, self.level))
            if frame.size_with(b.topic, b.partition, nbytes) > self.max_request_size:
                if sent:
                    later.append(b)
                    continue
                self._complete(b, error=make_error(
                    10, f"a batch of {b.count} record(s) makes a {nbytes}-byte Produce request "
                        f"for {b.topic}-{b.partition}, over max_request_size "
                        f"({self.max_request_size})", api="Produce", topic=b.topic,
                    partition=b.partition))
                continue
            if self.idempotent:
                tp = (b.topic, b.partition)
                if b.base_sequence < 0:
                    b.base_sequence = self.next_seq.get(tp, 0)
                    self.next_seq[tp] = (b.base_sequence + b.count) & _MAX_SEQUENCE
                head, records = b.encode(self.producer_id, self.producer_epoch, b.base_sequence,
                                         self.codec, self.level, self.transactional_id is not None)
                b.epoch = self.producer_epoch
            else:
                head, records = b.encode(-1, -1, -1, self.codec, self.level, False)
            frame.add(b.topic, b.partition, head, records)
            sent.append(b)
        if later:  # the next request takes them, in their partitions' order
            with self.acc.lock:
                for b in later:
                    self.acc.requeue(b)
        batches = sent
        if not batches:
            return
        try:
            pending = conn.send(frame.parts(), cid, A.PRODUCE, version,
                                expect_response=self.acks != 0,
                                timeout=self.request_timeout,
                                decode=lambda f, v=version: A.decode_response(A.PRODUCE, v, f))
        except (KafkaConnectionError, RequestTimeoutError) as exc:
            self._send_failed(node, batches, exc, now)
            return
        for b in batches:
            b.sent_at = now
        if pending is None:  # acks=0: done once written
            for b in batches:
                self._complete(b, base_offset=-1)
            return
        self.inflight[node].append(_Request(node, conn, pending, batches, now))
        for b in batches:
            self.inflight_tp[(b.topic, b.partition)] += 1

    def _send_failed(self, node: int, batches: List[ProducerBatch], exc: BaseException,
                     now: float) -> None:
        log.info("sending to broker %s failed: %s", node, exc)
        self.client.cluster.mark_stale()
        for b in batches:
            self._retry_or_fail(b, exc, now)

    # ---------------------------------------------------------------- poll
    def _timeout(self, now: float) -> float:
        """How long the loop may sleep: until a linger deadline, a retry, or an answer."""
        timeout = 0.1
        acc = self.acc
        with acc.lock:
            if acc.flushing or self.closing:
                timeout = 0.01
            for parts in acc.queues.values():
                for q in parts.values():
                    if q:
                        b = q[0]
                        due = max(b.retry_at, b.created + self.linger)
                        if b.closed and b.retry_at <= now:
                            due = now
                        timeout = min(timeout, due - now)
        if self._metadata_wanted:
            timeout = min(timeout, max(self._metadata_due - now, 0.0))
        return max(timeout, 0.0)

    def _poll(self, timeout: float) -> None:
        conns = {}
        for reqs in self.inflight.values():
            for r in reqs:
                if r.conn.fileno() >= 0:
                    conns[r.conn.fileno()] = r.conn
        ready = [c for c in conns.values() if c.buffered()]
        if not ready:
            try:
                rl, _, _ = select.select([self._wake_r, *conns.values()], [], [], timeout)
            except (OSError, ValueError):
                rl = list(conns.values())
            ready = [c for c in rl if c is not self._wake_r]
            if self._wake_r in rl:
                self._woken = False
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
        for c in ready:
            c.poll(0)
        for node in list(self.inflight):
            reqs = self.inflight[node]
            while reqs and reqs[0].pending.done():
                self._handle(reqs.pop(0))
            # An answer read for a later request means the earlier ones failed with the connection.
            done = [r for r in reqs if r.pending.done()]
            for r in done:
                reqs.remove(r)
                self._handle(r)

    def _check_request_timeouts(self, now: float) -> None:
        for node, reqs in self.inflight.items():
            if reqs and now - reqs[0].sent_at > self.request_timeout:
                conn = reqs[0].conn
                log.warning("broker %s did not answer a Produce request within %.0f ms; "
                            "reconnecting", node, self.request_timeout * 1000)
                conn._fail(RequestTimeoutError(
                    f"no Produce response from broker {node} within "
                    f"{self.request_timeout * 1000:.0f} ms"))
        if any(r.pending.done() for reqs in self.inflight.values() for r in reqs):
            self._poll(0)

    # ------------------------------------------------------------ answers
    def _handle(self, req: _Request) -> None:
        now = time.monotonic()
        for b in req.batches:
            tp = (b.topic, b.partition)
            self.inflight_tp[tp] -= 1
        try:
            resp = req.pending.result(0)
        except (KafkaConnectionError, RequestTimeoutError, ProtocolError) as exc:
            self.client.cluster.mark_stale()
            for b in req.batches:
                self._retry_or_fail(b, exc, now, connection=True)
            return
        answers: Dict[Tuple[str, int], Any] = {}
        wanted = {(b.topic, b.partition) for b in req.batches}
        stray = None
        for t in resp.responses:
            for p in t.partition_responses:
                key = (t.name, p.index)
                if key not in wanted or key in answers:
                    stray = key
                answers[key] = p
        for b in req.batches:
            key = (b.topic, b.partition)
            p = answers.get(key)
            if p is None or stray is not None:
                what = f"answers {stray[0]}-{stray[1]}, which it did not write (or twice)" \
                    if stray is not None else f"has no answer for {b.topic}-{b.partition}"
                self._complete(b, error=ProtocolError(
                    f"broker {req.node}'s Produce response {what}; the records may or may not "
                    "have been written"))
                continue
            self._partition_answer(b, p, now)

    def _partition_answer(self, b: ProducerBatch, p, now: float) -> None:
        code = p.error_code
        tp = (b.topic, b.partition)
        if code == 0 or code == DUPLICATE_SEQUENCE_NUMBER:
            if self.idempotent and b.epoch == self.producer_epoch:
                last = (b.base_sequence + b.count - 1) & _MAX_SEQUENCE
                prev = self.last_acked.get(tp, -1)
                if prev < 0 or 0 < (last - prev) & _MAX_SEQUENCE < _HALF_SEQUENCE:
                    self.last_acked[tp] = last   # newer, also across the wrap
            self._complete(b, base_offset=p.base_offset if code == 0 else -1,
                           log_append_time=getattr(p, "log_append_time_ms", -1))
            return
        err = make_error(code, getattr(p, "error_message", None), api="Produce", topic=b.topic,
                         partition=b.partition)
        if self.idempotent:
            if code == OUT_OF_ORDER_SEQUENCE_NUMBER:
                expected = (self.last_acked.get(tp, -1) + 1) & _MAX_SEQUENCE
                if b.epoch == self.producer_epoch and b.base_sequence == expected:
                    # The broker lost the sequence we are at: Kafka fails the batch and moves on
                    # with a new epoch rather than risk a duplicate.
                    self.request_epoch_bump(f"{b.topic}-{b.partition}: {err.name}")
                    self._complete(b, error=err)
                else:  # a batch before it is still unresolved: try again after it
                    self._retry(b, now, err)
                return
            if code in _EPOCH_ERRORS:
                if self.transactional_id is not None and code != UNKNOWN_PRODUCER_ID:
                    self.fatal = err
                    self._complete(b, error=err)
                    return
                if b.epoch == self.producer_epoch:
                    self.request_epoch_bump(f"{b.topic}-{b.partition}: {err.name}")
                b.base_sequence = -1  # renumbered under the new epoch
                self._retry_or_fail(b, err, now)
                return
        if code in STALE_METADATA_CODES:
            self.client.cluster.mark_stale([b.topic])
        self._retry_or_fail(b, err, now)

    def _retry_or_fail(self, b: ProducerBatch, err: BaseException, now: float,
                       connection: bool = False) -> None:
        retriable = connection or isinstance(err, (KafkaConnectionError, RequestTimeoutError)) \
            or getattr(err, "retriable", False) or (self.idempotent and isinstance(
                err, BrokerResponseError) and err.code in _EPOCH_ERRORS)
        if not retriable:
            self._complete(b, error=err)
        elif b.attempts >= self.retries:
            self._complete(b, error=err)
        elif now >= b.deadline:
            self._complete(b, error=self._expired(b, err))
        else:
            self._retry(b, now, err)

    def _retry(self, b: ProducerBatch, now: float, err: BaseException) -> None:
        b.attempts += 1
        b.retry_at = now + self._backoff(b.attempts)
        log.debug("retrying %r after %s", b, err)
        with self.acc.lock:
            self.acc.requeue(b)

    def _expired(self, b: ProducerBatch, cause: Optional[BaseException] = None) -> BaseException:
        err = DeliveryTimeoutError(
            f"{b.count} record(s) for {b.topic}-{b.partition} not delivered within "
            f"delivery_timeout_ms" + (f"; last error: {cause}" if cause is not None else ""))
        err.__cause__ = cause
        return err

    def _expire(self, now: float) -> None:
        """Fail queued batches past ``delivery_timeout_ms`` (in-flight ones wait for their answer)."""
        expired = []
        with self.acc.lock:
            for parts in self.acc.queues.values():
                for q in parts.values():
                    while q and q[0].deadline <= now and (not self.idempotent or
                                                          q[0].base_sequence < 0):
                        expired.append(q.popleft())
        for b in expired:
            self._complete(b, error=self._expired(b))

    # ---------------------------------------------------------- completion
    def _complete(self, b: ProducerBatch, base_offset: int = -1, log_append_time: int = -1,
                  error: Optional[BaseException] = None) -> None:
        with self.acc.lock:
            self.acc.release(b)
        producer_cb = self.producer.config.on_delivery
        if error is not None and self.txn is not None:
            self.txn.failed = error
        if b.batch_future is not None:  # send_batch: one future for all its batches
            future, index = b.batch_future
            if error is None:
                future._add(index, ProduceResult(b.topic, b.partition, base_offset, b.count,
                                                 log_append_time))
            else:
                future._fail(index, error)
            return
        if error is not None:
            log.debug("%r failed: %s", b, error)
        complete(b.outcome, base_offset, log_append_time, error)
        if b.callbacks or producer_cb is not None:
            outcome = b.outcome
            mds = [None] * b.count if error is not None else \
                [outcome.metadata(i) for i in range(b.count)]
            self._callbacks(b, mds, error, producer_cb)

    @staticmethod
    def _callbacks(b: ProducerBatch, mds, error, producer_cb) -> None:
        per = b.callbacks or {}
        for i, md in enumerate(mds):
            cb = per.get(i, producer_cb)
            if cb is None:
                continue
            try:
                cb(error, md)
            except Exception:  # a user's callback must not stop delivery
                log.exception("on_delivery callback raised")

    def _abandon(self, error: BaseException, queued_only: bool = False) -> None:
        """Fail every queued (and, unless ``queued_only``, in-flight) batch with ``error``."""
        with self.acc.lock:
            batches: List[ProducerBatch] = []
            for parts in self.acc.queues.values():
                for q in parts.values():
                    batches.extend(q)
                    q.clear()
        if not queued_only:
            for reqs in self.inflight.values():
                for r in reqs:
                    batches.extend(r.batches)
                reqs.clear()
        for b in batches:
            self._complete(b, error=error)
