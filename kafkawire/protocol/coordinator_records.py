"""The records Kafka's coordinators keep in ``__consumer_offsets`` and ``__transaction_state``.

Each record's key and value starts with an int16 version naming its schema:

* ``__consumer_offsets`` keys v0/v1 are :class:`OffsetCommitKey` (group, topic,
  partition) with an :class:`OffsetCommitValue` (v0-v4, flexible from v4);
  key v2 is :class:`GroupMetadataKey` (group) with a :class:`GroupMetadataValue`
  (v0-v4, flexible from v4) listing the members of the current generation.
* ``__transaction_state`` key v0 is :class:`TransactionLogKey` (transactional
  id) with a :class:`TransactionLogValue` (v0-v1, flexible from v1).

A null value (tombstone) deletes the key once the topic is compacted.  The
schemas are written in the declarative schema language of the wire protocol
(:mod:`kafkawire.protocol.schema`), so the compiled kernels encode and decode
them.  :func:`partition_for` picks the partition a group or transactional id
lives in exactly as Kafka does, so a broker reading folders Kafka wrote finds
every group where Kafka put it.  ``kafkawire dump --offsets-decoder`` and
``--transaction-log-decoder`` read these records (with Kafka's tool's output).
"""
from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple, Type, Union

from kafkawire.protocol.errors import MessageDecodeError
from kafkawire.protocol.schema import INT8, INT16, INT32, INT64, STRING, BYTES, Array, F, Message, Struct

__all__ = ["OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
           "TransactionLogKey", "TransactionLogValue", "OFFSET_COMMIT_KEY_VERSIONS",
           "GROUP_METADATA_KEY_VERSION", "TRANSACTION_LOG_KEY_VERSION", "VALUE_VERSIONS",
           "CONSUMER_PROTOCOL_TYPE", "TXN_STATES", "java_string_hash", "partition_for",
           "encode", "decode_offsets_key", "decode_offsets_value", "decode_txn_key",
           "decode_txn_value", "WRITE_VERSIONS"]

#: The group protocol type whose member metadata is a consumer subscription/assignment.
CONSUMER_PROTOCOL_TYPE = "consumer"

#: Key versions of ``__consumer_offsets``: offset commits, then group metadata.
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2
#: The one key version of ``__transaction_state``.
TRANSACTION_LOG_KEY_VERSION = 0

#: TransactionState ids as Kafka stores them in ``TransactionStatus``.
TXN_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
              4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


class OffsetCommitKey(Message):
    """Key of a committed offset (key versions 0 and 1 have the same fields)."""

    group: str
    topic: str
    partition: int

    VERSIONS = (0, 1)
    FIELDS = (
        F("Group", STRING, "0+"),
        F("Topic", STRING, "0+"),
        F("Partition", INT32, "0+"),
    )


class OffsetCommitValue(Message):
    """A committed offset: ``expire_timestamp`` only in v1, ``leader_epoch`` from v3."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int

    VERSIONS = (0, 4)
    FLEXIBLE = 4
    FIELDS = (
        F("Offset", INT64, "0+"),
        F("LeaderEpoch", INT32, "3+", default=-1),
        F("Metadata", STRING, "0+"),
        F("CommitTimestamp", INT64, "0+"),
        F("ExpireTimestamp", INT64, "1", default=-1),
    )


class GroupMetadataKey(Message):
    """Key of a group's metadata record (key version 2)."""

    group: str

    VERSIONS = (2, 2)
    FIELDS = (F("Group", STRING, "0+"),)


class GroupMetadataValue(Message):
    """A group's generation: protocol, leader and each member's metadata and assignment."""

    class MemberMetadata(Struct):
        member_id: str
        group_instance_id: Optional[str]
        client_id: str
        client_host: str
        rebalance_timeout: int
        session_timeout: int
        subscription: bytes
        assignment: bytes
        FIELDS = (
            F("MemberId", STRING, "0+"),
            F("GroupInstanceId", STRING, "3+", nullable="3+", default=None),
            F("ClientId", STRING, "0+"),
            F("ClientHost", STRING, "0+"),
            F("RebalanceTimeout", INT32, "1+", default=-1),
            F("SessionTimeout", INT32, "0+"),
            F("Subscription", BYTES, "0+"),
            F("Assignment", BYTES, "0+"),
        )

    protocol_type: str
    generation: int
    protocol: Optional[str]
    leader: Optional[str]
    current_state_timestamp: int
    members: List["GroupMetadataValue.MemberMetadata"]
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    FIELDS = (
        F("ProtocolType", STRING, "0+"),
        F("Generation", INT32, "0+"),
        F("Protocol", STRING, "0+", nullable="0+"),
        F("Leader", STRING, "0+", nullable="0+"),
        F("CurrentStateTimestamp", INT64, "2+", default=-1),
        F("Members", Array(MemberMetadata), "0+"),
    )


class TransactionLogKey(Message):
    """Key of a transactional id's state."""

    transactional_id: str

    VERSIONS = (0, 0)
    FIELDS = (F("TransactionalId", STRING, "0+"),)


class TransactionLogValue(Message):
    """A transactional id's producer id/epoch, state and the partitions of its transaction."""

    class PartitionsSchema(Struct):
        topic: str
        partition_ids: List[int]
        FIELDS = (
            F("Topic", STRING, "0+"),
            F("PartitionIds", Array(INT32), "0+"),
        )

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: Optional[List["TransactionLogValue.PartitionsSchema"]]
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    client_transaction_version: int
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    FIELDS = (
        F("ProducerId", INT64, "0+"),
        F("PreviousProducerId", INT64, "1+", tag=0, default=-1),
        F("NextProducerId", INT64, "1+", tag=1, default=-1),
        F("ProducerEpoch", INT16, "0+"),
        F("TransactionTimeoutMs", INT32, "0+"),
        F("TransactionStatus", INT8, "0+"),
        F("TransactionPartitions", Array(PartitionsSchema), "0+", nullable="0+"),
        F("TransactionLastUpdateTimestampMs", INT64, "0+"),
        F("TransactionStartTimestampMs", INT64, "0+"),
        F("ClientTransactionVersion", INT16, "1+", tag=2, default=0),
    )


#: Value schema -> (lowest, highest) version a reader accepts.
VALUE_VERSIONS: Dict[str, Tuple[int, int]] = {
    "OffsetCommitValue": OffsetCommitValue.VERSIONS,
    "GroupMetadataValue": GroupMetadataValue.VERSIONS,
    "TransactionLogValue": TransactionLogValue.VERSIONS,
}

#: The versions kafkawire writes: those Kafka 3.9's classic coordinators write.
WRITE_VERSIONS: Dict[Type[Message], int] = {
    OffsetCommitKey: 1,
    OffsetCommitValue: 3,
    GroupMetadataKey: 2,
    GroupMetadataValue: 3,
    TransactionLogKey: 0,
    TransactionLogValue: 0,
}

_H = struct.Struct(">h")


def encode(msg: Message, version: Optional[int] = None) -> bytes:
    """``msg`` as a record key or value: its int16 version, then its fields."""
    if version is None:
        version = WRITE_VERSIONS[type(msg)]
    return msg.encode_with_prefix(version, _H.pack(version), sized=False)


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise MessageDecodeError(f"{what} of {len(data)} bytes has no version", position=0,
                                 reason="truncated")
    return int(_H.unpack_from(data, 0)[0])


def _body(cls: Type[Message], data: bytes, version: int) -> Any:
    lo, hi = cls.VERSIONS
    if not lo <= version <= hi:
        raise MessageDecodeError(f"Can't read version {version} of {cls.__name__}", position=0,
                                 reason="version")
    return cls.decode(data, version, pos=2)


def decode_offsets_key(data: bytes) -> Union[OffsetCommitKey, GroupMetadataKey]:
    """A ``__consumer_offsets`` key: an :class:`OffsetCommitKey` or a :class:`GroupMetadataKey`."""
    version = _version(data, "key")
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        return _body(OffsetCommitKey, data, version)  # type: ignore[no-any-return]
    if version == GROUP_METADATA_KEY_VERSION:
        return _body(GroupMetadataKey, data, version)  # type: ignore[no-any-return]
    raise MessageDecodeError(f"unknown __consumer_offsets key version {version}", position=0,
                             reason="version")


def decode_offsets_value(key: Union[OffsetCommitKey, GroupMetadataKey], data: bytes
                         ) -> Union[OffsetCommitValue, GroupMetadataValue]:
    """The value belonging to ``key`` (as returned by :func:`decode_offsets_key`)."""
    cls: Type[Message] = OffsetCommitValue if isinstance(key, OffsetCommitKey) else GroupMetadataValue
    return _body(cls, data, _version(data, "value"))  # type: ignore[no-any-return]


def decode_txn_key(data: bytes) -> TransactionLogKey:
    """A ``__transaction_state`` key."""
    version = _version(data, "key")
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise MessageDecodeError(f"unknown __transaction_state key version {version}",
                                 position=0, reason="version")
    return _body(TransactionLogKey, data, version)  # type: ignore[no-any-return]


def decode_txn_value(data: bytes) -> TransactionLogValue:
    """A ``__transaction_state`` value."""
    return _body(TransactionLogValue, data, _version(data, "value"))  # type: ignore[no-any-return]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units, as a signed 32-bit int)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets``/``__transaction_state`` holding ``key``:
    Kafka's ``Utils.abs(key.hashCode()) % partitions``."""
    if partitions <= 0:
        raise ValueError("partitions must be positive")
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions

