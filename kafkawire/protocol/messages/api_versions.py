"""ApiVersions (API key 18): which API versions a broker speaks.

Its response always travels with response header v0, even in flexible versions.

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['ApiVersionsRequest', 'ApiVersionsResponse']


class ApiVersionsRequest(Message):
    """The ApiVersions request body."""

    API_KEY = 18
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = (
        F('ClientSoftwareName', STRING, '3+'),
        F('ClientSoftwareVersion', STRING, '3+'),
    )


class ApiVersionsResponse(Message):
    """The ApiVersions response body."""

    class ApiVersion(Struct):
        FIELDS = (
            F('ApiKey', INT16, '0+'),
            F('MinVersion', INT16, '0+'),
            F('MaxVersion', INT16, '0+'),
        )

    class FinalizedFeatureKey(Struct):
        FIELDS = (
            F('Name', STRING, '3+'),
            F('MaxVersionLevel', INT16, '3+'),
            F('MinVersionLevel', INT16, '3+'),
        )

    class SupportedFeatureKey(Struct):
        FIELDS = (
            F('Name', STRING, '3+'),
            F('MinVersion', INT16, '3+'),
            F('MaxVersion', INT16, '3+'),
        )

    API_KEY = 18
    VERSIONS = (0, 4)
    FLEXIBLE = 3
    FIELDS = (
        F('ErrorCode', INT16, '0+'),
        F('ApiKeys', Array(ApiVersion), '0+'),
        F('ThrottleTimeMs', INT32, '1+'),
        F('ZkMigrationReady', BOOL, '3+', tag=3),
        F('FinalizedFeatures', Array(FinalizedFeatureKey), '3+', tag=2),
        F('FinalizedFeaturesEpoch', INT64, '3+', tag=1, default=-1),
        F('SupportedFeatures', Array(SupportedFeatureKey), '3+', tag=0),
    )
