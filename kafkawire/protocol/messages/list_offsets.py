"""ListOffsets (API key 2): offsets by timestamp, earliest and latest.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['ListOffsetsRequest', 'ListOffsetsResponse']


class ListOffsetsRequest(Message):
    """The ListOffsets request body."""

    class ListOffsetsTopic(Struct):
        class ListOffsetsPartition(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('CurrentLeaderEpoch', INT32, '4+', default=-1),
                F('Timestamp', INT64, '0+'),
                F('MaxNumOffsets', INT32, '0', default=1),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(ListOffsetsPartition), '0+'),
        )

    API_KEY = 2
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    FIELDS = (
        F('ReplicaId', INT32, '0+'),
        F('IsolationLevel', INT8, '2+'),
        F('Topics', Array(ListOffsetsTopic), '0+'),
    )


class ListOffsetsResponse(Message):
    """The ListOffsets response body."""

    class ListOffsetsTopicResponse(Struct):
        class ListOffsetsPartitionResponse(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('Timestamp', INT64, '1+', default=-1),
                F('Offset', INT64, '1+', default=-1),
                F('LeaderEpoch', INT32, '4+', default=-1),
                F('OldStyleOffsets', Array(INT64), '0'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(ListOffsetsPartitionResponse), '0+'),
        )

    API_KEY = 2
    VERSIONS = (0, 9)
    FLEXIBLE = 6
    FIELDS = (
        F('ThrottleTimeMs', INT32, '2+'),
        F('Topics', Array(ListOffsetsTopicResponse), '0+'),
    )
