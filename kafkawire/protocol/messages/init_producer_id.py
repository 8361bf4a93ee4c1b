"""InitProducerId (API key 22): producer id and epoch for idempotent/transactional producers.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['InitProducerIdRequest', 'InitProducerIdResponse']


class InitProducerIdRequest(Message):
    """The InitProducerId request body."""

    API_KEY = 22
    VERSIONS = (0, 5)
    FLEXIBLE = 2
    FIELDS = (
        F('TransactionalId', STRING, '0+', nullable='0+'),
        F('TransactionTimeoutMs', INT32, '0+'),
        F('ProducerId', INT64, '3+', default=-1),
        F('ProducerEpoch', INT16, '3+', default=-1),
    )


class InitProducerIdResponse(Message):
    """The InitProducerId response body."""

    API_KEY = 22
    VERSIONS = (0, 5)
    FLEXIBLE = 2
    FIELDS = (
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ProducerId', INT64, '0+', default=-1),
        F('ProducerEpoch', INT16, '0+'),
    )
