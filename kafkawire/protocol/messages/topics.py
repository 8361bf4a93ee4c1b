"""CreateTopics (19) and DeleteTopics (20).

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['CreateTopicsRequest', 'CreateTopicsResponse', 'DeleteTopicsRequest', 'DeleteTopicsResponse']


class CreateTopicsRequest(Message):
    """The CreateTopics request body."""

    class CreatableTopic(Struct):
        class CreatableReplicaAssignment(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('BrokerIds', Array(INT32), '0+'),
            )

        class CreatableTopicConfig(Struct):
            FIELDS = (
                F('Name', STRING, '0+'),
                F('Value', STRING, '0+', nullable='0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('NumPartitions', INT32, '0+'),
            F('ReplicationFactor', INT16, '0+'),
            F('Assignments', Array(CreatableReplicaAssignment), '0+'),
            F('Configs', Array(CreatableTopicConfig), '0+'),
        )

    API_KEY = 19
    VERSIONS = (0, 7)
    FLEXIBLE = 5
    FIELDS = (
        F('Topics', Array(CreatableTopic), '0+'),
        F('TimeoutMs', INT32, '0+', default=60000),
        F('ValidateOnly', BOOL, '1+'),
    )


class CreateTopicsResponse(Message):
    """The CreateTopics response body."""

    class CreatableTopicResult(Struct):
        class CreatableTopicConfigs(Struct):
            FIELDS = (
                F('Name', STRING, '5+'),
                F('Value', STRING, '5+', nullable='5+'),
                F('ReadOnly', BOOL, '5+'),
                F('ConfigSource', INT8, '5+', default=-1),
                F('IsSensitive', BOOL, '5+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('TopicId', UUID, '7+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '1+', nullable='1+'),
            F('NumPartitions', INT32, '5+', default=-1),
            F('ReplicationFactor', INT16, '5+', default=-1),
            F('Configs', Array(CreatableTopicConfigs), '5+', nullable='5+'),
            F('TopicConfigErrorCode', INT16, '5+', tag=0),
        )

    API_KEY = 19
    VERSIONS = (0, 7)
    FLEXIBLE = 5
    FIELDS = (
        F('ThrottleTimeMs', INT32, '2+'),
        F('Topics', Array(CreatableTopicResult), '0+'),
    )


class DeleteTopicsRequest(Message):
    """The DeleteTopics request body."""

    class DeleteTopicState(Struct):
        FIELDS = (
            F('Name', STRING, '6+', nullable='6+', default=None),
            F('TopicId', UUID, '6+'),
        )

    API_KEY = 20
    VERSIONS = (0, 6)
    FLEXIBLE = 4
    FIELDS = (
        F('Topics', Array(DeleteTopicState), '6+'),
        F('TopicNames', Array(STRING), '0-5'),
        F('TimeoutMs', INT32, '0+'),
    )


class DeleteTopicsResponse(Message):
    """The DeleteTopics response body."""

    class DeletableTopicResult(Struct):
        FIELDS = (
            F('Name', STRING, '0+', nullable='6+'),
            F('TopicId', UUID, '6+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '5+', nullable='5+', default=None),
        )

    API_KEY = 20
    VERSIONS = (0, 6)
    FLEXIBLE = 4
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('Responses', Array(DeletableTopicResult), '0+'),
    )
