"""API keys kafkawire speaks, and the message classes behind them."""
from __future__ import annotations

from enum import IntEnum
from typing import Dict, Tuple, Type

from kafkawire.protocol import messages  # noqa: F401  (loads and registers every schema)
from kafkawire.protocol.errors import UnknownApiKeyError
from kafkawire.protocol.schema import REGISTRY, Message

__all__ = ["ApiKey", "request_class", "response_class", "supported_versions"]


class ApiKey(IntEnum):
    """The APIs of the codec, with Kafka's numbers."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_CLUSTER = 60
    DELETE_GROUPS = 42


def _lookup(api_key: int, response: bool) -> Type[Message]:
    cls = REGISTRY.get((int(api_key), response))
    if cls is None:
        raise UnknownApiKeyError(
            f"API key {api_key} is not one kafkawire speaks (known: "
            f"{', '.join(f'{k.value}={k.name}' for k in ApiKey)})")
    return cls


def request_class(api_key: int) -> Type[Message]:
    """The request class for ``api_key``; raises UnknownApiKeyError."""
    return _lookup(api_key, False)


def response_class(api_key: int) -> Type[Message]:
    """The response class for ``api_key``; raises UnknownApiKeyError."""
    return _lookup(api_key, True)


def supported_versions() -> Dict[int, Tuple[int, int]]:
    """``{api_key: (min_version, max_version)}`` for every API (what an ApiVersions
    response from kafkawire's side would advertise)."""
    return {int(k): request_class(k).VERSIONS for k in ApiKey}
