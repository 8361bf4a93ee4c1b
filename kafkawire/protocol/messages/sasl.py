"""SASL: SaslHandshake (17) and SaslAuthenticate (36).

Schemas written from Kafka 3.9's message definitions: field names, version
ranges, nullable versions, tags and defaults as Kafka declares them.
"""
from __future__ import annotations

from kafkawire.protocol.schema import (  # noqa: F401
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UINT32, UUID,
    Array, F, Message, Struct,
)

__all__ = ['SaslHandshakeRequest', 'SaslHandshakeResponse', 'SaslAuthenticateRequest', 'SaslAuthenticateResponse']


class SaslHandshakeRequest(Message):
    """The SaslHandshake request body."""

    API_KEY = 17
    VERSIONS = (0, 1)
    FLEXIBLE = None
    FIELDS = (
        F('Mechanism', STRING, '0+'),
    )


class SaslHandshakeResponse(Message):
    """The SaslHandshake response body."""

    API_KEY = 17
    VERSIONS = (0, 1)
    FLEXIBLE = None
    FIELDS = (
        F('ErrorCode', INT16, '0+'),
        F('Mechanisms', Array(STRING), '0+'),
    )


class SaslAuthenticateRequest(Message):
    """The SaslAuthenticate request body."""

    API_KEY = 36
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    FIELDS = (
        F('AuthBytes', BYTES, '0+'),
    )


class SaslAuthenticateResponse(Message):
    """The SaslAuthenticate response body."""

    API_KEY = 36
    VERSIONS = (0, 2)
    FLEXIBLE = 2
    FIELDS = (
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+'),
        F('AuthBytes', BYTES, '0+'),
        F('SessionLifetimeMs', INT64, '1+'),
    )
