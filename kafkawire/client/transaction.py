"""The transactional producer's conversations with its transaction coordinator.

Kafka's protocol (KIP-98): ``InitProducerId`` with the ``transactional_id``
fences older producers and finishes their open transaction; before the first
record of a partition is written in a transaction, ``AddPartitionsToTxn``
names the partition to the coordinator; ``AddOffsetsToTxn`` and
``TxnOffsetCommit`` (to the group's coordinator) make consumed offsets part of
the transaction; ``EndTxn`` commits or aborts, and the coordinator writes the
markers that read_committed consumers use.  Every call here runs on the
producer's I/O thread; the user's thread waits for its result.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from kafkawire import protocol as P
from kafkawire.client.exceptions import (KafkaConnectionError, RequestTimeoutError,
                                         TransactionStateError)
from kafkawire.client.results import OffsetAndMetadata
from kafkawire.protocol.error_codes import (CONCURRENT_TRANSACTIONS, COORDINATOR_ERRORS,
                                           INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING,
                                           INVALID_TXN_STATE, PRODUCER_FENCED,
                                           TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                           make_error)

if TYPE_CHECKING:  # pragma: no cover
    from kafkawire.client.sender import Sender

__all__ = ["TransactionManager", "group_fields"]

log = logging.getLogger("kafkawire.client.producer")

ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
_FATAL = frozenset({INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING,
                    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, PRODUCER_FENCED})


def group_fields(group_metadata: Any) -> Tuple[str, int, str, Optional[str]]:
    """(group id, generation id, member id, group instance id) of a consumer's group metadata.

    Takes a group id string, or any object with ``group_id`` (and optionally
    ``generation_id``, ``member_id``, ``group_instance_id``) — what a
    consumer's ``group_metadata()`` returns.
    """
    if isinstance(group_metadata, str):
        return group_metadata, -1, "", None
    gid = getattr(group_metadata, "group_id", None)
    if not isinstance(gid, str):
        raise TypeError("group_metadata must be a group id or a consumer's group_metadata(), "
                        f"not {type(group_metadata).__name__}")
    return (gid, int(getattr(group_metadata, "generation_id", -1)),
            getattr(group_metadata, "member_id", "") or "",
            getattr(group_metadata, "group_instance_id", None))


class TransactionManager:
    """Transaction state and coordinator requests, driven by the sender thread."""

    def __init__(self, sender: "Sender", transactional_id: str, timeout: float) -> None:
        self.sender = sender
        self.transactional_id = transactional_id
        self.timeout = timeout
        self.in_transaction = False
        self.partitions: set = set()          # partitions added to the open transaction
        self.offsets_sent = False
        self.failed: Optional[BaseException] = None  # a record of the transaction failed

    # ------------------------------------------------------------ requests
    def _call(self, api: int, build: Callable[[int], Any], key: str, key_type: int,
              what: str) -> Any:
        """Send to the coordinator of ``key``; retry while it moves, loads or is busy."""
        client = self.sender.client
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                node = client.find_coordinator(key, key_type=key_type).node_id
                conn = client._node(node)
                version = client._version(conn, api)
                resp = client._send(conn, build(version), version, None).result(
                    self.sender.request_timeout)
                code = _first_error(resp)
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                code, resp = -1, exc
            if code == 0:
                return resp
            if code in _FATAL or (code > 0 and code not in COORDINATOR_ERRORS
                                  and code != CONCURRENT_TRANSACTIONS
                                  and not make_error(code).retriable):
                raise make_error(code, api=what)
            if time.monotonic() > deadline:
                raise resp if isinstance(resp, BaseException) else make_error(code, api=what)
            if code in COORDINATOR_ERRORS or code < 0:
                client._coordinators.pop(key, None)
            log.debug("%s: retrying (%s)", what, resp if code < 0 else make_error(code).name)
            time.sleep(self.sender._backoff(attempt))

    def add_partitions(self, tps: Iterable[Tuple[str, int]]) -> None:
        tps = [tp for tp in tps if tp not in self.partitions]
        if not tps:
            return
        by_topic: Dict[str, list] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        s = self.sender

        def build(version: int):  # clients speak v0-3 (see _api._CLIENT_MAX)
            return P.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=s.producer_id,
                v3_and_below_producer_epoch=s.producer_epoch,
                v3_and_below_topics=[{"name": t, "partitions": sorted(ps)}
                                     for t, ps in by_topic.items()])

        self._call(ADD_PARTITIONS_TO_TXN, build, self.transactional_id, 1, "AddPartitionsToTxn")
        self.partitions.update(tps)

    def send_offsets(self, offsets: Mapping[Tuple[str, int], Any], group_metadata: Any) -> None:
        group, generation, member, instance = group_fields(group_metadata)
        s = self.sender
        self._call(ADD_OFFSETS_TO_TXN, lambda v: P.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=s.producer_id,
            producer_epoch=s.producer_epoch, group_id=group),
            self.transactional_id, 1, "AddOffsetsToTxn")
        by_topic: Dict[str, list] = {}
        for (topic, partition), om in sorted(offsets.items()):
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(getattr(om, "offset", om)))
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        self._call(TXN_OFFSET_COMMIT, lambda v: P.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group, producer_id=s.producer_id,
            producer_epoch=s.producer_epoch, generation_id=generation, member_id=member,
            group_instance_id=instance,
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()]),
            group, 0, "TxnOffsetCommit")
        self.offsets_sent = True

    def end(self, commit: bool) -> None:
        s = self.sender
        if self.partitions or self.offsets_sent:  # else nothing reached the coordinator
            self._call(END_TXN, lambda v: P.EndTxnRequest(
                transactional_id=self.transactional_id, producer_id=s.producer_id,
                producer_epoch=s.producer_epoch, committed=commit),
                self.transactional_id, 1, "EndTxn")
        self.partitions.clear()
        self.offsets_sent = False
        self.in_transaction = False
        self.failed = None

    def check_open(self, what: str) -> None:
        if not self.in_transaction:
            raise TransactionStateError(f"{what} needs an open transaction: call "
                                        "begin_transaction() first")


def _first_error(resp: Any) -> int:
    """The first non-zero error code anywhere in a transaction response (0 when none)."""
    code = getattr(resp, "error_code", 0) or 0
    if code:
        return code
    groups: List[Any] = []
    for attr in ("results_by_topic_v3_and_below", "topics"):
        groups.extend(getattr(resp, attr, None) or ())
    for r in getattr(resp, "results_by_transaction", None) or ():
        groups.extend(r.topic_results or ())
    for t in groups:
        for p in (getattr(t, "results_by_partition", None) or getattr(t, "partitions", None)
                  or ()):
            c = getattr(p, "partition_error_code", None)
            if c is None:
                c = getattr(p, "error_code", 0)
            if c:
                return c
    return 0
