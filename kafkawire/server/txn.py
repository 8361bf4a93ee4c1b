"""The transaction coordinator: producer ids, epochs and transactions on a single node.

:class:`TransactionCoordinator` answers InitProducerId (fresh producer ids for
idempotent producers; for a transactional id, the same id with its epoch
bumped, which fences any older producer of that id), AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn.  Ending a transaction writes a COMMIT or ABORT
control batch into every partition of the transaction (an abort is recorded
in the segment's ``.txnindex``), including the ``__consumer_offsets``
partition of a group whose offsets were sent in the transaction, whose
offsets then become visible (commit) or are dropped (abort).

Each transactional id's state is written to ``__transaction_state`` in
Kafka's record format (``TransactionLogKey``/``TransactionLogValue`` of
:mod:`kafkawire.protocol.coordinator_records`) before it is acknowledged, and
read back at start-up; a transaction found half-ended (PrepareCommit or
PrepareAbort) is finished then.  Transactions open longer than their timeout
are aborted by :meth:`TransactionCoordinator.poll` with the producer's epoch
bumped, so the late producer is fenced.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from kafkawire.protocol import ApiKey
from kafkawire.protocol import coordinator_records as R
from kafkawire.protocol.error_codes import (NONE, UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_NOT_AVAILABLE,
                                            INVALID_REQUEST, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE,
                                            INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT,
                                            CONCURRENT_TRANSACTIONS, OPERATION_NOT_ATTEMPTED,
                                            PRODUCER_FENCED)
from kafkawire.protocol.messages import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse)
from kafkawire.protocol.messages.transactions import (AddPartitionsToTxnPartitionResult,
                                                      AddPartitionsToTxnTopicResult)
from kafkawire.server.groups_storage import CoordinatorLog, InternalTopicOwner, PartitionsLog

__all__ = ["TransactionCoordinator", "TxnConfig", "TRANSACTION_STATE_TOPIC", "TxnMetadata"]

log = logging.getLogger("kafkawire.server.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"


# Kafka's TransactionState ids (TransactionStatus in the log).
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, \
    PREPARE_EPOCH_FENCE = range(8)

_MAX_EPOCH = 32767


@dataclass
class TxnConfig:
    """The broker settings of the transaction coordinator (Kafka's names and defaults)."""
    state_log_partitions: int = 50                   # transaction.state.log.num.partitions
    max_timeout_ms: int = 900000                     # transaction.max.timeout.ms
    abort_check_interval_ms: int = 10000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    state_log_segment_bytes: int = 100 * 1024 * 1024  # transaction.state.log.segment.bytes

    @classmethod
    def from_properties(cls, props: Dict[str, str]) -> "TxnConfig":
        """Read the broker properties Kafka names for these settings."""
        names = {"transaction.state.log.num.partitions": "state_log_partitions",
                 "transaction.max.timeout.ms": "max_timeout_ms",
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms":
                     "abort_check_interval_ms",
                 "transaction.state.log.segment.bytes": "state_log_segment_bytes"}
        return cls(**{attr: int(props[k]) for k, attr in names.items() if k in props})


@dataclass
class TxnMetadata:
    """One transactional id: its producer, state and the partitions of its open transaction."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = EMPTY
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    partitions: Set[Tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    #: a request is writing this id's state: others get CONCURRENT_TRANSACTIONS
    busy: bool = False


class TransactionCoordinator(InternalTopicOwner):
    """Kafka's transaction coordinator for one node (see the module docs).

    ``storage`` holds ``__transaction_state`` and writes the markers;
    ``on_marker(producer_id, topic, partition, committed)`` is told about each
    marker written (the group coordinator completes transactional offsets);
    ``topic_partitions(topic)`` (optional) gives a topic's partition count or
    None when it does not exist.
    """

    TOPIC = TRANSACTION_STATE_TOPIC
    TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed"}

    def __init__(self, storage: CoordinatorLog, config: Optional[TxnConfig] = None, *,
                 clock: Optional[Callable[[], int]] = None,
                 on_marker: Optional[Callable[[int, str, int, bool], None]] = None,
                 topic_partitions: Optional[Callable[[str], Optional[int]]] = None,
                 offsets_partition: Optional[Callable[[str], Tuple[str, int]]] = None) -> None:
        self.config = config or TxnConfig()
        super().__init__(storage, self.config.state_log_partitions,
                         self.config.state_log_segment_bytes)
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.on_marker = on_marker
        self.topic_partitions = topic_partitions
        self.offsets_partition = offsets_partition or (
            lambda group: ("__consumer_offsets", R.partition_for(group, 50)))
        self.txns: Dict[str, TxnMetadata] = {}
        self.next_producer_id = 0

    async def load(self) -> None:
        """Read ``__transaction_state`` back (if it exists) and finish half-ended transactions."""
        # Producer ids are never reused: start above every id this node may have handed out.
        self.next_producer_id = max(self.next_producer_id, self.clock() * 1000)
        for p in range(self.existing_partitions()):
            for batch in self.storage.read(TRANSACTION_STATE_TOPIC, p):
                if batch.is_control:
                    continue
                for rec in batch:
                    self._load_record(p, rec.key, rec.value)
        for m in self.txns.values():
            self.next_producer_id = max(self.next_producer_id, m.producer_id + 1,
                                        m.last_producer_id + 1)
        for m in list(self.txns.values()):
            if m.state in (PREPARE_COMMIT, PREPARE_ABORT):
                log.info("finishing transaction of %s left in %s", m.transactional_id,
                         R.TXN_STATES[m.state])
                await self._write_markers(m, m.state == PREPARE_COMMIT)
        log.info("loaded %d transactional ids from %s", len(self.txns), TRANSACTION_STATE_TOPIC)

    def _load_record(self, partition: int, key: Optional[bytes], value: Optional[bytes]) -> None:
        if key is None:
            return
        try:
            tid = R.decode_txn_key(bytes(key)).transactional_id
            v = None if value is None else R.decode_txn_value(bytes(value))
        except Exception as exc:  # skipped, as Kafka's loader skips what it cannot read
            log.warning("%s-%d: skipping an unreadable record: %s", TRANSACTION_STATE_TOPIC,
                        partition, exc)
            return
        if v is None:
            self.txns.pop(tid, None)
            return
        self.txns[tid] = TxnMetadata(
            tid, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.transaction_status,
            v.previous_producer_id, -1,
            {(p.topic, i) for p in (v.transaction_partitions or []) for i in p.partition_ids},
            v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms)

    async def stop(self) -> None:
        """Stop the timer."""
        await self.stop_timer()

    async def poll(self) -> None:
        """Abort every transaction open longer than its timeout, fencing its producer."""
        now = self.clock()
        for m in list(self.txns.values()):
            if m.state in (PREPARE_COMMIT, PREPARE_ABORT) and not m.busy:
                # an EndTxn whose markers could not all be written: finish it
                m.busy = True
                try:
                    await self._write_markers(m, m.state == PREPARE_COMMIT)
                except Exception as exc:
                    log.error("finishing the transaction of %s failed: %s", m.transactional_id, exc)
                finally:
                    m.busy = False
            elif m.state == ONGOING and not m.busy and m.start_ms + m.timeout_ms < now:
                log.info("aborting the transaction of %s: open for more than %d ms",
                         m.transactional_id, m.timeout_ms)
                m.busy = True
                try:
                    self._bump_epoch(m)
                    await self._end(m, committed=False)
                except Exception as exc:
                    log.error("aborting the timed-out transaction of %s failed: %s",
                              m.transactional_id, exc)
                finally:
                    m.busy = False

    # ------------------------------------------------------------------ storage
    def _fresh_producer_id(self) -> int:
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid

    async def _store(self, m: TxnMetadata, state: int) -> None:
        """Write ``m`` with ``state`` to the log, then adopt the state (not before: a failed
        write leaves the coordinator as it was)."""
        self.ensure_topic()
        now = self.clock()
        by_topic: Dict[str, List[int]] = {}
        for t, p in sorted(m.partitions):
            by_topic.setdefault(t, []).append(p)
        value = R.TransactionLogValue(
            producer_id=m.producer_id, previous_producer_id=m.last_producer_id,
            producer_epoch=m.producer_epoch, transaction_timeout_ms=m.timeout_ms,
            transaction_status=state,
            transaction_partitions=[R.TransactionLogValue.PartitionsSchema(
                topic=t, partition_ids=ps) for t, ps in by_topic.items()],
            transaction_last_update_timestamp_ms=now, transaction_start_timestamp_ms=m.start_ms)
        await self.storage.append(TRANSACTION_STATE_TOPIC, self.partition_for(m.transactional_id),
                                  [(R.encode(R.TransactionLogKey(
                                      transactional_id=m.transactional_id)), R.encode(value))])
        m.state = state
        m.last_update_ms = now

    async def _write_markers(self, m: TxnMetadata, committed: bool) -> None:
        await self._store(m, PREPARE_COMMIT if committed else PREPARE_ABORT)
        for topic, partition in sorted(m.partitions):
            await self.storage.append_marker(topic, partition, committed,
                                             producer_id=m.producer_id,
                                             producer_epoch=m.producer_epoch, coordinator_epoch=0)
            if self.on_marker is not None:
                self.on_marker(m.producer_id, topic, partition, committed)
        m.partitions = set()
        m.start_ms = -1
        await self._store(m, COMPLETE_COMMIT if committed else COMPLETE_ABORT)

    async def _end(self, m: TxnMetadata, committed: bool) -> None:
        await self._write_markers(m, committed)
        log.info("transaction of %s (producer %d epoch %d) %s", m.transactional_id,
                 m.producer_id, m.producer_epoch, "committed" if committed else "aborted")

    def _bump_epoch(self, m: TxnMetadata) -> None:
        m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
        if m.producer_epoch + 1 >= _MAX_EPOCH:
            m.producer_id, m.producer_epoch = self._fresh_producer_id(), 0
        else:
            m.producer_epoch += 1

    # ------------------------------------------------------------------ InitProducerId
    async def init_producer_id(self, req: InitProducerIdRequest, version: int
                               ) -> InitProducerIdResponse:
        """InitProducerId: a fresh id (idempotent producer) or the transactional id's
        producer with its epoch bumped (an open transaction is aborted first)."""
        tid = req.transactional_id
        if tid is None:
            return InitProducerIdResponse(error_code=NONE, producer_id=self._fresh_producer_id(),
                                          producer_epoch=0)
        if not tid:
            return InitProducerIdResponse(error_code=INVALID_REQUEST)
        if not 0 < req.transaction_timeout_ms <= self.config.max_timeout_ms:
            return InitProducerIdResponse(error_code=INVALID_TRANSACTION_TIMEOUT)
        m = self.txns.get(tid)
        if m is not None and m.busy:
            return InitProducerIdResponse(error_code=CONCURRENT_TRANSACTIONS)
        given = (req.producer_id, req.producer_epoch) if version >= 3 else (-1, -1)
        new = m is None
        if m is None:
            m = TxnMetadata(tid, self._fresh_producer_id(), 0, req.transaction_timeout_ms)
        elif given != (-1, -1):
            current = given == (m.producer_id, m.producer_epoch)
            retried = given == (m.last_producer_id, m.last_producer_epoch)
            if not current and not retried:
                return InitProducerIdResponse(error_code=PRODUCER_FENCED)
        m.busy = True
        try:
            if not new:
                if m.state == ONGOING:
                    self._bump_epoch(m)
                    await self._end(m, committed=False)
                m.timeout_ms = req.transaction_timeout_ms
                self._bump_epoch(m)
            await self._store(m, EMPTY)
        except Exception as exc:
            log.error("initializing the producer of %s failed: %s", tid, exc)
            return InitProducerIdResponse(error_code=COORDINATOR_NOT_AVAILABLE)
        finally:
            m.busy = False
        self.txns[tid] = m
        return InitProducerIdResponse(error_code=NONE, producer_id=m.producer_id,
                                      producer_epoch=m.producer_epoch)

    # ------------------------------------------------------------------ checks
    def _check(self, tid: str, producer_id: int, producer_epoch: int) -> Tuple[int, Optional[TxnMetadata]]:
        m = self.txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        if m.producer_epoch != producer_epoch:
            return PRODUCER_FENCED, None
        if m.busy or m.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS, None
        return NONE, m

    def check_offsets(self, tid: str, producer_id: int, producer_epoch: int) -> int:
        """TxnOffsetCommit's producer check: the error code, or NONE when the producer
        is the current one of ``tid`` with a transaction open."""
        code, m = self._check(tid, producer_id, producer_epoch)
        if code == PRODUCER_FENCED:
            return INVALID_PRODUCER_EPOCH
        if code == NONE and m is not None and m.state != ONGOING:
            return INVALID_TXN_STATE
        return code

    def check_produce(self, tid: Optional[str], topic: str, partition: int, producer_id: int,
                      producer_epoch: int) -> int:
        """Whether a transactional batch may be appended: its producer is the current one
        of ``tid`` and the partition was added to the open transaction (0), or the error."""
        m = self.txns.get(tid) if tid else None
        if m is None or m.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != m.producer_epoch:
            return INVALID_PRODUCER_EPOCH
        if m.state != ONGOING or (topic, partition) not in m.partitions:
            return INVALID_TXN_STATE
        return NONE

    async def _add(self, m: TxnMetadata, parts: Set[Tuple[str, int]]) -> int:
        if m.state == ONGOING and parts <= m.partitions:
            return NONE
        m.busy = True
        old_parts, old_start = set(m.partitions), m.start_ms
        try:
            if m.state != ONGOING:
                m.start_ms = self.clock()
            m.partitions |= parts
            await self._store(m, ONGOING)
        except Exception as exc:
            log.error("adding partitions to the transaction of %s failed: %s",
                      m.transactional_id, exc)
            m.partitions, m.start_ms = old_parts, old_start
            return COORDINATOR_NOT_AVAILABLE
        finally:
            m.busy = False
        return NONE

    # ------------------------------------------------------------------ AddPartitions / AddOffsets
    async def add_partitions_to_txn(self, req: AddPartitionsToTxnRequest, version: int
                                    ) -> AddPartitionsToTxnResponse:
        """AddPartitionsToTxn: the partitions the producer will write in its transaction."""
        if version < 4:
            results = await self._add_one(req.v3_and_below_transactional_id,
                                          req.v3_and_below_producer_id,
                                          req.v3_and_below_producer_epoch,
                                          req.v3_and_below_topics, False)
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results)
        out = []
        for t in req.transactions:
            results = await self._add_one(t.transactional_id, t.producer_id, t.producer_epoch,
                                          t.topics, t.verify_only)
            out.append(AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                transactional_id=t.transactional_id, topic_results=results))
        return AddPartitionsToTxnResponse(error_code=NONE, results_by_transaction=out)

    async def _add_one(self, tid: str, producer_id: int, producer_epoch: int, topics: List[Any],
                       verify_only: bool) -> List[AddPartitionsToTxnTopicResult]:
        wanted = [(t.name, p) for t in topics for p in t.partitions]
        codes: Dict[Tuple[str, int], int] = {}
        for topic, p in wanted:
            if self.topic_partitions is not None:
                n = self.topic_partitions(topic)
                if n is None or not 0 <= p < n:
                    codes[(topic, p)] = UNKNOWN_TOPIC_OR_PARTITION
        if codes:
            codes = {tp: codes.get(tp, OPERATION_NOT_ATTEMPTED) for tp in wanted}
        else:
            code, m = self._check(tid, producer_id, producer_epoch)
            if code == NONE and m is not None:
                if verify_only:
                    code = NONE if m.state == ONGOING and set(wanted) <= m.partitions \
                        else INVALID_TXN_STATE
                else:
                    code = await self._add(m, set(wanted))
            codes = {tp: code for tp in wanted}
        by_topic: Dict[str, List[AddPartitionsToTxnPartitionResult]] = {}
        for (topic, p), code in codes.items():
            by_topic.setdefault(topic, []).append(
                AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
        return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=r)
                for t, r in by_topic.items()]

    async def add_offsets_to_txn(self, req: AddOffsetsToTxnRequest, version: int
                                 ) -> AddOffsetsToTxnResponse:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        code, m = self._check(req.transactional_id, req.producer_id, req.producer_epoch)
        if code == NONE and m is not None:
            code = await self._add(m, {self.offsets_partition(req.group_id)})
        return AddOffsetsToTxnResponse(error_code=code)

    # ------------------------------------------------------------------ EndTxn
    async def end_txn(self, req: EndTxnRequest, version: int) -> EndTxnResponse:
        """EndTxn: markers into every partition of the transaction, then the new state."""
        code, m = self._check(req.transactional_id, req.producer_id, req.producer_epoch)
        if code != NONE or m is None:
            return EndTxnResponse(error_code=code)
        committed = bool(req.committed)
        if m.state == COMPLETE_COMMIT and committed or m.state == COMPLETE_ABORT and not committed:
            return EndTxnResponse(error_code=NONE)  # a retry of what already happened
        if m.state != ONGOING:
            return EndTxnResponse(error_code=INVALID_TXN_STATE)
        m.busy = True
        try:
            await self._end(m, committed)
        except Exception as exc:
            log.error("ending the transaction of %s failed: %s", m.transactional_id, exc)
            return EndTxnResponse(error_code=COORDINATOR_NOT_AVAILABLE)
        finally:
            m.busy = False
        return EndTxnResponse(error_code=NONE)


def register(broker: Any) -> None:
    """Plug the transaction coordinator into ``broker`` (after the group coordinator, whose
    offsets it completes): its handlers, and loading at start-up."""
    groups = getattr(broker, "group_coordinator", None)

    def on_marker(producer_id: int, topic: str, partition: int, committed: bool) -> None:
        if groups is not None and topic == "__consumer_offsets":
            groups.complete_txn(producer_id, partition, committed)

    def offsets_partition(group_id: str) -> Tuple[str, int]:
        assert groups is not None
        groups.ensure_topic()
        return "__consumer_offsets", groups.partition_for(group_id)

    def topic_partitions(topic: str) -> Optional[int]:
        t = broker.partitions.topics.get(topic)
        return None if t is None else len(t.partitions)

    coord = TransactionCoordinator(PartitionsLog(broker.partitions),
                                   TxnConfig.from_properties(broker.config.values),
                                   on_marker=on_marker, topic_partitions=topic_partitions,
                                   offsets_partition=offsets_partition if groups else None)
    broker.txn_coordinator = coord

    def plain(method: Callable[[Any, int], Any]) -> Any:
        async def handler(ctx: Any, req: Any, version: int) -> Any:
            return await method(req, version)
        return handler

    d = broker.dispatcher
    d.register(ApiKey.INIT_PRODUCER_ID, plain(coord.init_producer_id))
    d.register(ApiKey.ADD_PARTITIONS_TO_TXN, plain(coord.add_partitions_to_txn))
    d.register(ApiKey.ADD_OFFSETS_TO_TXN, plain(coord.add_offsets_to_txn))
    d.register(ApiKey.END_TXN, plain(coord.end_txn))

    async def on_start(b: Any) -> None:
        await coord.load()
        coord.start(coord.config.abort_check_interval_ms)

    async def on_stop(b: Any) -> None:
        await coord.stop()

    broker.on_start.append(on_start)
    broker.on_stop.append(on_stop)
