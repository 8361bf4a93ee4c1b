"""Metadata (API key 3): brokers, topics, partitions and their leaders.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['MetadataRequest', 'MetadataResponse']


class MetadataRequest(Message):
    """The Metadata request body."""

    class MetadataRequestTopic(Struct):
        FIELDS = (
            F('TopicId', UUID, '10+'),
            F('Name', STRING, '0+', nullable='10+'),
        )

    API_KEY = 3
    VERSIONS = (0, 12)
    FLEXIBLE = 9
    FIELDS = (
        F('Topics', Array(MetadataRequestTopic), '0+', nullable='1+'),
        F('AllowAutoTopicCreation', BOOL, '4+', default=True),
        F('IncludeClusterAuthorizedOperations', BOOL, '8-10'),
        F('IncludeTopicAuthorizedOperations', BOOL, '8+'),
    )


class MetadataResponse(Message):
    """The Metadata response body."""

    class MetadataResponseBroker(Struct):
        FIELDS = (
            F('NodeId', INT32, '0+'),
            F('Host', STRING, '0+'),
            F('Port', INT32, '0+'),
            F('Rack', STRING, '1+', nullable='1+', default=None),
        )

    class MetadataResponseTopic(Struct):
        class MetadataResponsePartition(Struct):
            FIELDS = (
                F('ErrorCode', INT16, '0+'),
                F('PartitionIndex', INT32, '0+'),
                F('LeaderId', INT32, '0+'),
                F('LeaderEpoch', INT32, '7+', default=-1),
                F('ReplicaNodes', Array(INT32), '0+'),
                F('IsrNodes', Array(INT32), '0+'),
                F('OfflineReplicas', Array(INT32), '5+'),
            )

        FIELDS = (
            F('ErrorCode', INT16, '0+'),
            F('Name', STRING, '0+', nullable='12+'),
            F('TopicId', UUID, '10+'),
            F('IsInternal', BOOL, '1+'),
            F('Partitions', Array(MetadataResponsePartition), '0+'),
            F('TopicAuthorizedOperations', INT32, '8+', default=-2147483648),
        )

    API_KEY = 3
    VERSIONS = (0, 12)
    FLEXIBLE = 9
    FIELDS = (
        F('ThrottleTimeMs', INT32, '3+'),
        F('Brokers', Array(MetadataResponseBroker), '0+'),
        F('ClusterId', STRING, '2+', nullable='2+', default=None),
        F('ControllerId', INT32, '1+', default=-1),
        F('Topics', Array(MetadataResponseTopic), '0+'),
        F('ClusterAuthorizedOperations', INT32, '8-10', default=-2147483648),
    )
