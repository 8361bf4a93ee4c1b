"""Errors of the client itself (not a broker's error code: see ``kafkawire.protocol.error_codes``)."""
from __future__ import annotations

from kafkawire.errors import KafkaWireError

__all__ = ["ClientError", "KafkaConnectionError", "RequestTimeoutError", "NoBrokersAvailableError",
           "ClientClosedError", "ProducerError", "BufferFullError", "DeliveryTimeoutError",
           "ProducerClosedError", "TransactionStateError"]


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


class ProducerError(ClientError):
    """Base of the errors the producer raises on its own account."""


class BufferFullError(ProducerError, TimeoutError):
    """``send`` waited ``max_block_ms`` for room in ``buffer_memory`` (or for metadata) in vain."""


class DeliveryTimeoutError(ProducerError, TimeoutError):
    """A record was not acknowledged within ``delivery_timeout_ms`` of its ``send``."""


class ProducerClosedError(ProducerError, ClientClosedError):
    """The producer was closed before the record could be delivered (or ``send`` after close)."""


class TransactionStateError(ProducerError):
    """A transactional call out of order (e.g. ``commit_transaction`` with none begun)."""
