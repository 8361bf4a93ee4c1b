"""Errors of the client itself (not a broker's error code: see ``kafkawire.protocol.error_codes``)."""
from __future__ import annotations

from kafkawire.errors import KafkaWireError

__all__ = ["ClientError", "KafkaConnectionError", "RequestTimeoutError", "NoBrokersAvailableError",
           "ClientClosedError"]


class ClientError(KafkaWireError):
    """Base of the errors raised by ``kafkawire.Client`` on its own account."""


class KafkaConnectionError(ClientError, OSError):
    """A broker could not be reached, or the connection broke mid-request."""


class RequestTimeoutError(ClientError, TimeoutError):
    """No response within the request timeout; the connection was closed (its state is unknown)."""


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers or known brokers answered."""


class ClientClosedError(ClientError):
    """The client or connection was used after ``close()``."""
