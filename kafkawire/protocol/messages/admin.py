"""DeleteRecords (21), DescribeConfigs (32), CreatePartitions (37),
IncrementalAlterConfigs (44) and DescribeCluster (60).

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['DeleteRecordsRequest', 'DeleteRecordsResponse', 'DescribeConfigsRequest',
           'DescribeConfigsResponse', 'CreatePartitionsRequest', 'CreatePartitionsResponse',
           'IncrementalAlterConfigsRequest', 'IncrementalAlterConfigsResponse',
           'DescribeClusterRequest', 'DescribeClusterResponse']


class DeleteRecordsRequest(Message):
    """The DeleteRecords request body."""

    class DeleteRecordsTopic(Struct):
        class DeleteRecordsPartition(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('Offset', INT64, '0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(DeleteRecordsPartition), '0+'),
        )

    API_KEY = 21
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    FIELDS = (
        F('Topics', Array(DeleteRecordsTopic), '0+'),
        F('TimeoutMs', INT32, '0+'),
    )


class DeleteRecordsResponse(Message):
    """The DeleteRecords response body."""

    class DeleteRecordsTopicResult(Struct):
        class DeleteRecordsPartitionResult(Struct):
            FIELDS = (
                F('PartitionIndex', INT32, '0+'),
                F('LowWatermark', INT64, '0+'),
                F('ErrorCode', INT16, '0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Partitions', Array(DeleteRecordsPartitionResult), '0+'),
        )

    API_KEY = 21
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('Topics', Array(DeleteRecordsTopicResult), '0+'),
    )


class DescribeConfigsRequest(Message):
    """The DescribeConfigs request body."""

    class DescribeConfigsResource(Struct):
        FIELDS = (
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('ConfigurationKeys', Array(STRING), '0+', nullable='0+'),
        )

    API_KEY = 32
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    FIELDS = (
        F('Resources', Array(DescribeConfigsResource), '0+'),
        F('IncludeSynonyms', BOOL, '1+', default=False),
        F('IncludeDocumentation', BOOL, '3+', default=False),
    )


class DescribeConfigsResponse(Message):
    """The DescribeConfigs response body."""

    class DescribeConfigsResult(Struct):
        class DescribeConfigsResourceResult(Struct):
            class DescribeConfigsSynonym(Struct):
                FIELDS = (
                    F('Name', STRING, '1+'),
                    F('Value', STRING, '1+', nullable='0+'),
                    F('Source', INT8, '1+'),
                )

            FIELDS = (
                F('Name', STRING, '0+'),
                F('Value', STRING, '0+', nullable='0+'),
                F('ReadOnly', BOOL, '0+'),
                F('IsDefault', BOOL, '0'),
                F('ConfigSource', INT8, '1+', default=-1),
                F('IsSensitive', BOOL, '0+'),
                F('Synonyms', Array(DescribeConfigsSynonym), '1+'),
                F('ConfigType', INT8, '3+', default=0),
                F('Documentation', STRING, '3+', nullable='0+'),
            )

        FIELDS = (
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('Configs', Array(DescribeConfigsResourceResult), '0+'),
        )

    API_KEY = 32
    VERSIONS = (0, 4)
    FLEXIBLE = 4
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', Array(DescribeConfigsResult), '0+'),
    )


class CreatePartitionsRequest(Message):
    """The CreatePartitions request body."""

    class CreatePartitionsTopic(Struct):
        class CreatePartitionsAssignment(Struct):
            FIELDS = (
                F('BrokerIds', Array(INT32), '0+'),
            )

        FIELDS = (
            F('Name', STRING, '0+'),
            F('Count', INT32, '0+'),
            F('Assignments', Array(CreatePartitionsAssignment), '0+', nullable='0+'),
        )

    API_KEY = 37
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    FIELDS = (
        F('Topics', Array(CreatePartitionsTopic), '0+'),
        F('TimeoutMs', INT32, '0+'),
        F('ValidateOnly', BOOL, '0+'),
    )


class CreatePartitionsResponse(Message):
    """The CreatePartitions response body."""

    class CreatePartitionsTopicResult(Struct):
        FIELDS = (
            F('Name', STRING, '0+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
        )

    API_KEY = 37
    VERSIONS = (0, 3)
    FLEXIBLE = 2
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', Array(CreatePartitionsTopicResult), '0+'),
    )


class IncrementalAlterConfigsRequest(Message):
    """The IncrementalAlterConfigs request body."""

    class AlterConfigsResource(Struct):
        class AlterableConfig(Struct):
            FIELDS = (
                F('Name', STRING, '0+'),
                F('ConfigOperation', INT8, '0+'),
                F('Value', STRING, '0+', nullable='0+'),
            )

        FIELDS = (
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('Configs', Array(AlterableConfig), '0+'),
        )

    API_KEY = 44
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    FIELDS = (
        F('Resources', Array(AlterConfigsResource), '0+'),
        F('ValidateOnly', BOOL, '0+'),
    )


class IncrementalAlterConfigsResponse(Message):
    """The IncrementalAlterConfigs response body."""

    class AlterConfigsResourceResponse(Struct):
        FIELDS = (
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
        )

    API_KEY = 44
    VERSIONS = (0, 1)
    FLEXIBLE = 1
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('Responses', Array(AlterConfigsResourceResponse), '0+'),
    )


class DescribeClusterRequest(Message):
    """The DescribeCluster request body."""

    API_KEY = 60
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    FIELDS = (
        F('IncludeClusterAuthorizedOperations', BOOL, '0+'),
        F('EndpointType', INT8, '1+', default=1),
    )


class DescribeClusterResponse(Message):
    """The DescribeCluster response body."""

    class DescribeClusterBroker(Struct):
        FIELDS = (
            F('BrokerId', INT32, '0+'),
            F('Host', STRING, '0+'),
            F('Port', INT32, '0+'),
            F('Rack', STRING, '0+', nullable='0+', default=None),
        )

    API_KEY = 60
    VERSIONS = (0, 1)
    FLEXIBLE = 0
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
        F('EndpointType', INT8, '1+', default=1),
        F('ClusterId', STRING, '0+'),
        F('ControllerId', INT32, '0+', default=-1),
        F('Brokers', Array(DescribeClusterBroker), '0+'),
        F('ClusterAuthorizedOperations', INT32, '0+', default=-2147483648),
    )
