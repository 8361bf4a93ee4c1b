"""Produce (API key 0): write record batches to partition leaders.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['ProduceRequest', 'ProduceResponse']


class ProduceRequest(Message):
    """The Produce request body."""

    class TopicProduceData(Struct):
        class PartitionProduceData(Struct):
            FIELDS = (
                F('Index', INT32, '0+'),
                F('Records', RECORDS, '0+', nullable='0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('PartitionData', Array(PartitionProduceData), '0+'),
        )

    API_KEY = 0
    VERSIONS = (0, 11)
    FLEXIBLE = 9
    FIELDS = (
        F('TransactionalId', STRING, '3+', nullable='3+', default=None),
        F('Acks', INT16, '0+'),
        F('TimeoutMs', INT32, '0+'),
        F('TopicData', Array(TopicProduceData), '0+'),
    )


class ProduceResponse(Message):
    """The Produce response body."""

    class TopicProduceResponse(Struct):
        class PartitionProduceResponse(Struct):
            class BatchIndexAndErrorMessage(Struct):
                FIELDS = (
                    F('BatchIndex', INT32, '8+'),
                    F('BatchIndexErrorMessage', STRING, '8+', nullable='8+', default=None),
                )

            class LeaderIdAndEpoch(Struct):
                FIELDS = (
                    F('LeaderId', INT32, '10+', default=-1),
                    F('LeaderEpoch', INT32, '10+', default=-1),
                )

            FIELDS = (
                F('Index', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('BaseOffset', INT64, '0+'),
                F('LogAppendTimeMs', INT64, '2+', default=-1),
                F('LogStartOffset', INT64, '5+', default=-1),
                F('RecordErrors', Array(BatchIndexAndErrorMessage), '8+'),
                F('ErrorMessage', STRING, '8+', nullable='8+', default=None),
                F('CurrentLeader', LeaderIdAndEpoch, '10+', tag=0),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('PartitionResponses', Array(PartitionProduceResponse), '0+'),
        )

    class NodeEndpoint(Struct):
        FIELDS = (
            F('NodeId', INT32, '10+'),
            F('Host', STRING, '10+'),
            F('Port', INT32, '10+'),
            F('Rack', STRING, '10+', nullable='10+', default=None),
        )

    API_KEY = 0
    VERSIONS = (0, 11)
    FLEXIBLE = 9
    FIELDS = (
        F('Responses', Array(TopicProduceResponse), '0+'),
        F('ThrottleTimeMs', INT32, '1+'),
        F('NodeEndpoints', Array(NodeEndpoint), '10+', tag=0),
    )
