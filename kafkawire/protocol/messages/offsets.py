"""OffsetCommit (8) and OffsetFetch (9): consumer group offsets.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['OffsetCommitRequest', 'OffsetCommitResponse', 'OffsetFetchRequest', 'OffsetFetchResponse']


class OffsetCommitRequest(Message):
    """The OffsetCommit request body."""

    class OffsetCommitRequestTopic(Struct):
        class OffsetCommitRequestPartition(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('CommittedOffset', INT64, '0+'),
                F('CommittedLeaderEpoch', INT32, '6+', default=-1),
                F('CommitTimestamp', INT64, '1', default=-1),
                F('CommittedMetadata', STRING, '0+', nullable='0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(OffsetCommitRequestPartition), '0+'),
        )

    API_KEY = 8
    VERSIONS = (0, 9)
    FLEXIBLE = 8
    FIELDS = (
        F('GroupId', STRING, '0+'),
        F('GenerationIdOrMemberEpoch', INT32, '1+', default=-1),
        F('MemberId', STRING, '1+'),
        F('GroupInstanceId', STRING, '7+', nullable='7+', default=None),
        F('RetentionTimeMs', INT64, '2-4', default=-1),
        F('Topics', Array(OffsetCommitRequestTopic), '0+'),
    )


class OffsetCommitResponse(Message):
    """The OffsetCommit response body."""

    class OffsetCommitResponseTopic(Struct):
        class OffsetCommitResponsePartition(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(OffsetCommitResponsePartition), '0+'),
        )

    API_KEY = 8
    VERSIONS = (0, 9)
    FLEXIBLE = 8
    FIELDS = (
        F('ThrottleTimeMs', INT32, '3+'),
        F('Topics', Array(OffsetCommitResponseTopic), '0+'),
    )


class OffsetFetchRequest(Message):
    """The OffsetFetch request body."""

    class OffsetFetchRequestGroup(Struct):
        class OffsetFetchRequestTopics(Struct):
            FIELDS = (
                F('Name', STRING, '8+'),
                F('PartitionIndexes', Array(INT32), '8+'),
            )

        FIELDS = (
            F('GroupId', STRING, '8+'),
            F('MemberId', STRING, '9+', nullable='9+', default=None),
            F('MemberEpoch', INT32, '9+', default=-1),
            F('Topics', Array(OffsetFetchRequestTopics), '8+', nullable='8+'),
        )

    class OffsetFetchRequestTopic(Struct):
        FIELDS = (
            F('Name', STRING, '0-7'),
            F('PartitionIndexes', Array(INT32), '0-7'),
        )

    API_KEY = 9
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    FIELDS = (
        F('Groups', Array(OffsetFetchRequestGroup), '8+'),
        F('GroupId', STRING, '0-7'),
        F('Topics', Array(OffsetFetchRequestTopic), '0-7', nullable='2-7'),
        F('RequireStable', BOOL, '7+'),
    )


class OffsetFetchResponse(Message):
    """The OffsetFetch response body."""

    class OffsetFetchResponseGroup(Struct):
        class OffsetFetchResponseTopics(Struct):
            class OffsetFetchResponsePartitions(Struct):
                FIELDS = (
                    F('PartitionIndex', INT32, '8+'),
                    F('CommittedOffset', INT64, '8+'),
                    F('CommittedLeaderEpoch', INT32, '8+', default=-1),
                    F('Metadata', STRING, '8+', nullable='8+'),
                    F('ErrorCode', INT16, '8+'),
                )

            FIELDS = (
                F('Name', STRING, '8+'),
                F('Partitions', Array(OffsetFetchResponsePartitions), '8+'),
            )

        FIELDS = (
            F('GroupId', STRING, '8+'),
            F('Topics', Array(OffsetFetchResponseTopics), '8+'),
            F('ErrorCode', INT16, '8+'),
        )

    class OffsetFetchResponseTopic(Struct):
        class OffsetFetchResponsePartition(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0-7'),
                F('CommittedOffset', INT64, '0-7'),
                F('CommittedLeaderEpoch', INT32, '5-7', default=-1),
                F('Metadata', STRING, '0-7', nullable='0-7'),
                F('ErrorCode', INT16, '0-7'),
            )

        FIELDS = (
            F('Name', STRING, '0-7'),
            F('Partitions', Array(OffsetFetchResponsePartition), '0-7'),
        )

    API_KEY = 9
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    FIELDS = (
        F('ThrottleTimeMs', INT32, '3+'),
        F('Groups', Array(OffsetFetchResponseGroup), '8+'),
        F('Topics', Array(OffsetFetchResponseTopic), '0-7'),
        F('ErrorCode', INT16, '2-7'),
    )
