"""FindCoordinator (API key 10): the broker coordinating a group or transaction.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['FindCoordinatorRequest', 'FindCoordinatorResponse']


class FindCoordinatorRequest(Message):
    """The FindCoordinator request body."""

    API_KEY = 10
    VERSIONS = (0, 6)
    FLEXIBLE = 3
    FIELDS = (
        F('Key', STRING, '0-3'),
        F('KeyType', INT8, '1+'),
        F('CoordinatorKeys', Array(STRING), '4+'),
    )


class FindCoordinatorResponse(Message):
    """The FindCoordinator response body."""

    class Coordinator(Struct):
        FIELDS = (
            F('Key', STRING, '4+'),
            F('NodeId', INT32, '4+'),
            F('Host', STRING, '4+'),
            F('Port', INT32, '4+'),
            F('ErrorCode', INT16, '4+'),
            F('ErrorMessage', STRING, '4+', nullable='4+'),
        )

    API_KEY = 10
    VERSIONS = (0, 6)
    FLEXIBLE = 3
    FIELDS = (
        F('ThrottleTimeMs', INT32, '1+'),
        F('Coordinators', Array(Coordinator), '4+'),
        F('ErrorCode', INT16, '0-3'),
        F('ErrorMessage', STRING, '1-3', nullable='1-3'),
        F('NodeId', INT32, '0-3'),
        F('Host', STRING, '0-3'),
        F('Port', INT32, '0-3'),
    )
