"""Fetch (API key 1): read record batches; ``records`` fields are zero-copy memoryviews.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['FetchRequest', 'FetchResponse']


class FetchRequest(Message):
    """The Fetch request body."""

    class FetchTopic(Struct):
        class FetchPartition(Struct):
            FIELDS = (
                F('Partition', INT32, '0+'),
                F('CurrentLeaderEpoch', INT32, '9+', default=-1),
                F('FetchOffset', INT64, '0+'),
                F('LastFetchedEpoch', INT32, '12+', default=-1),
                F('LogStartOffset', INT64, '5+', default=-1),
                F('PartitionMaxBytes', INT32, '0+'),
                F('ReplicaDirectoryId', UUID, '17+', tag=0),
            )

        FIELDS = (
            F('TopicId', UUID, '13+'),
            F('Topic', STRING, '0-12'),
            F('Partitions', Array(FetchPartition), '0+'),
        )

    class ForgottenTopic(Struct):
        FIELDS = (
            F('TopicId', UUID, '13+'),
            F('Topic', STRING, '7-12'),
            F('Partitions', Array(INT32), '7+'),
        )

    class ReplicaState(Struct):
        FIELDS = (
            F('ReplicaId', INT32, '15+', default=-1),
            F('ReplicaEpoch', INT64, '15+', default=-1),
        )

    API_KEY = 1
    VERSIONS = (0, 17)
    FLEXIBLE = 12
    FIELDS = (
        F('ReplicaId', INT32, '0-14', default=-1),
        F('MaxWaitMs', INT32, '0+'),
        F('MinBytes', INT32, '0+'),
        F('MaxBytes', INT32, '3+', default=2147483647),
        F('IsolationLevel', INT8, '4+'),
        F('SessionId', INT32, '7+'),
        F('SessionEpoch', INT32, '7+', default=-1),
        F('Topics', Array(FetchTopic), '0+'),
        F('ForgottenTopicsData', Array(ForgottenTopic), '7+'),
        F('RackId', STRING, '11+'),
        F('ReplicaState', ReplicaState, '15+', tag=1),
        F('ClusterId', STRING, '12+', nullable='12+', tag=0, default=None),
    )


class FetchResponse(Message):
    """The Fetch response body."""

    class FetchableTopicResponse(Struct):
        class PartitionData(Struct):
            class AbortedTransaction(Struct):
                FIELDS = (
                    F('ProducerId', INT64, '4+'),
                    F('FirstOffset', INT64, '4+'),
                )

            class SnapshotId(Struct):
                FIELDS = (
                    F('EndOffset', INT64, '12+', default=-1),
                    F('Epoch', INT32, '12+', default=-1),
                )

            class LeaderIdAndEpoch(Struct):
                FIELDS = (
                    F('LeaderId', INT32, '12+', default=-1),
                    F('LeaderEpoch', INT32, '12+', default=-1),
                )

            class EpochEndOffset(Struct):
                FIELDS = (
                    F('Epoch', INT32, '12+', default=-1),
                    F('EndOffset', INT64, '12+', default=-1),
                )

            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('HighWatermark', INT64, '0+'),
                F('LastStableOffset', INT64, '4+', default=-1),
                F('LogStartOffset', INT64, '5+', default=-1),
                F('AbortedTransactions', Array(AbortedTransaction), '4+', nullable='4+'),
                F('PreferredReadReplica', INT32, '11+', default=-1),
                F('Records', RECORDS, '0+', nullable='0+'),
                F('SnapshotId', SnapshotId, '12+', tag=2),
                F('CurrentLeader', LeaderIdAndEpoch, '12+', tag=1),
                F('DivergingEpoch', EpochEndOffset, '12+', tag=0),
            )

        FIELDS = (
            F('TopicId', UUID, '13+'),
            F('Topic', STRING, '0-12'),
            F('Partitions', Array(PartitionData), '0+'),
        )

    class NodeEndpoint(Struct):
        FIELDS = (
            F('NodeId', INT32, '16+'),
            F('Host', STRING, '16+'),
            F('Port', INT32, '16+'),
            F('Rack', STRING, '16+', nullable='16+', default=None),
        )

    API_KEY = 1
    VERSIONS = (0, 17)
    FLEXIBLE = 12
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '7+'),
        F('SessionId', INT32, '7+'),
        F('Responses', Array(FetchableTopicResponse), '0+'),
        F('NodeEndpoints', Array(NodeEndpoint), '16+', tag=0),
    )
