"""Request headers v0/v1/v2 and response headers v0/v1, and which version a message uses.

Request header v2 (flexible requests) keeps ``ClientId`` as a classic nullable
string (int16 length) before its tagged fields; an ApiVersions response always
uses response header v0 so that a client can read it whatever version it asked.
"""
from __future__ import annotations

from kafkawire.protocol.schema import INT16, INT32, STRING, F, Message
from kafkawire.protocol.api_keys import ApiKey, request_class

__all__ = ["RequestHeader", "ResponseHeader", "request_header_version", "response_header_version"]


class RequestHeader(Message):
    """The header in front of every request body."""

    VERSIONS = (0, 2)
    FLEXIBLE = 2
    FIELDS = (
        F("RequestApiKey", INT16, "0+"),
        F("RequestApiVersion", INT16, "0+"),
        F("CorrelationId", INT32, "0+"),
        F("ClientId", STRING, "1+", nullable="1+", classic=True),
    )


class ResponseHeader(Message):
    """The header in front of every response body."""

    VERSIONS = (0, 1)
    FLEXIBLE = 1
    FIELDS = (
        F("CorrelationId", INT32, "0+"),
    )


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible request versions, else 1 (v0 only for ControlledShutdown v0)."""
    if api_key == 7 and api_version == 0:
        return 0
    return 2 if request_class(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible response versions, else 0; always 0 for ApiVersions."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if request_class(api_key).is_flexible(api_version) else 0
