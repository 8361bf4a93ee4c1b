"""Kafka clients: ``kafkawire.Client`` (blocking calls), ``kafkawire.Producer`` (batching) and
``kafkawire.Consumer`` (groups).

See :class:`kafkawire.client.client.Client` for the calls, and
``kafkawire.protocol.error_codes`` for the exceptions error responses raise.
"""
from __future__ import annotations

from kafkawire.client.client import Client
from kafkawire.client.config import ConfigError
from kafkawire.client.cluster import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from kafkawire.client.connection import BrokerConnection, Pending
from kafkawire.client.exceptions import (ClientClosedError, ClientError, KafkaConnectionError,
                                         NoBrokersAvailableError, RequestTimeoutError)
from kafkawire.client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from kafkawire.client.security import AuthenticationError
from kafkawire.client.results import (FetchResult, OffsetAndMetadata, OffsetResult,
                                      ProduceResult, ProducerRecord, RecordMetadata, TopicResult)
from kafkawire.client.exceptions import (BufferFullError, DeliveryTimeoutError, ProducerClosedError,
                                         ProducerError)
from kafkawire.client.producer import Producer
from kafkawire.client.consumer import (Consumer, ConsumerRecord, NoOffsetForPartitionError,
                                       TopicPartition)
from kafkawire.protocol.error_codes import BrokerResponseError, RetriableBrokerError

__all__ = ["Client", "BrokerInfo", "ClusterMetadata", "PartitionInfo", "TopicInfo",
           "BrokerConnection", "Pending", "ClientError", "ClientClosedError",
           "KafkaConnectionError", "NoBrokersAvailableError", "RequestTimeoutError",
           "DefaultPartitioner", "murmur2", "partition_for_key", "FetchResult",
           "OffsetAndMetadata", "OffsetResult", "ProduceResult", "ProducerRecord", "TopicResult",
           "BrokerResponseError", "RetriableBrokerError", "ConfigError", "AuthenticationError",
           "Producer", "RecordMetadata", "ProducerError", "BufferFullError", "DeliveryTimeoutError",
           "ProducerClosedError", "Consumer", "ConsumerRecord", "TopicPartition",
           "NoOffsetForPartitionError"]
