"""Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28).

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
AddPartitionsToTxn v4+ is the brokers' batched form (several transactional
ids, ``VerifyOnly``); clients send v3 and below.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['AddPartitionsToTxnRequest', 'AddPartitionsToTxnResponse', 'AddOffsetsToTxnRequest',
           'AddOffsetsToTxnResponse', 'EndTxnRequest', 'EndTxnResponse',
           'TxnOffsetCommitRequest', 'TxnOffsetCommitResponse']


# The fields AddOffsetsToTxn and EndTxn share: who is asking, and their answer.
_PRODUCER = (
    F('TransactionalId', STRING, '0+'),
    F('ProducerId', INT64, '0+'),
    F('ProducerEpoch', INT16, '0+'),
)
_THROTTLE_AND_ERROR = (
    F('ThrottleTimeMs', INT32, '0+'),
    F('ErrorCode', INT16, '0+'),
)


class AddPartitionsToTxnTopic(Struct):
    FIELDS = (
        F('Name', STRING, '0+'),
        F('Partitions', Array(INT32), '0+'),
    )


class AddPartitionsToTxnRequest(Message):
    """The AddPartitionsToTxn request body."""

    class AddPartitionsToTxnTransaction(Struct):
        FIELDS = (
            F('TransactionalId', STRING, '4+'),
            F('ProducerId', INT64, '4+'),
            F('ProducerEpoch', INT16, '4+'),
            F('VerifyOnly', BOOL, '4+', default=False),
            F('Topics', Array(AddPartitionsToTxnTopic), '4+'),
        )

    API_KEY = 24
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    FIELDS = (
        F('Transactions', Array(AddPartitionsToTxnTransaction), '4+'),
        F('V3AndBelowTransactionalId', STRING, '0-3'),
        F('V3AndBelowProducerId', INT64, '0-3'),
        F('V3AndBelowProducerEpoch', INT16, '0-3'),
        F('V3AndBelowTopics', Array(AddPartitionsToTxnTopic), '0-3'),
    )


class AddPartitionsToTxnPartitionResult(Struct):
    FIELDS = (
        F('PartitionIndex', INT32, '0+'),
        F('PartitionErrorCode', INT16, '0+'),
    )


class AddPartitionsToTxnTopicResult(Struct):
    FIELDS = (
        F('Name', STRING, '0+'),
        F('ResultsByPartition', Array(AddPartitionsToTxnPartitionResult), '0+'),
    )


class AddPartitionsToTxnResponse(Message):
    """The AddPartitionsToTxn response body."""

    class AddPartitionsToTxnResult(Struct):
        FIELDS = (
            F('TransactionalId', STRING, '4+'),
            F('TopicResults', Array(AddPartitionsToTxnTopicResult), '4+'),
        )

    API_KEY = 24
    VERSIONS = (0, 5)
    FLEXIBLE = 3
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '4+'),
        F('ResultsByTransaction', Array(AddPartitionsToTxnResult), '4+'),
        F('ResultsByTopicV3AndBelow', Array(AddPartitionsToTxnTopicResult), '0-3'),
    )


class AddOffsetsToTxnRequest(Message):
    """The AddOffsetsToTxn request body."""

    API_KEY = 25
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = _PRODUCER + (F('GroupId', STRING, '0+'),)


class AddOffsetsToTxnResponse(Message):
    """The AddOffsetsToTxn response body."""

    API_KEY = 25
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = _THROTTLE_AND_ERROR


class EndTxnRequest(Message):
    """The EndTxn request body."""

    API_KEY = 26
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = _PRODUCER + (F('Committed', BOOL, '0+'),)


class EndTxnResponse(Message):
    """The EndTxn response body."""

    API_KEY = 26
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = _THROTTLE_AND_ERROR


class TxnOffsetCommitRequest(Message):
    """The TxnOffsetCommit request body."""

    class TxnOffsetCommitRequestTopic(Struct):
        class TxnOffsetCommitRequestPartition(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('CommittedOffset', INT64, '0+'),
                F('CommittedLeaderEpoch', INT32, '2+', default=-1),
                F('CommittedMetadata', STRING, '0+', nullable='0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(TxnOffsetCommitRequestPartition), '0+'),
        )

    API_KEY = 28
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = (
        F('TransactionalId', STRING, '0+'),
        F('GroupId', STRING, '0+'),
        F('ProducerId', INT64, '0+'),
        F('ProducerEpoch', INT16, '0+'),
        F('GenerationId', INT32, '3+', default=-1),
        F('MemberId', STRING, '3+', default=''),
        F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
        F('Topics', Array(TxnOffsetCommitRequestTopic), '0+'),
    )


class TxnOffsetCommitResponse(Message):
    """The TxnOffsetCommit response body."""

    class TxnOffsetCommitResponseTopic(Struct):
        class TxnOffsetCommitResponsePartition(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(TxnOffsetCommitResponsePartition), '0+'),
        )

    API_KEY = 28
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('Topics', Array(TxnOffsetCommitResponseTopic), '0+'),
    )
