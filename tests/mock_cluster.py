"""librdkafka's in-memory mock cluster (confluent-kafka's ``test.mock.num.brokers``) for tests.

The mock is a real protocol peer on loopback with groups, idempotence and
transactions; it lives as long as the confluent-kafka client that owns it.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Tuple

_names = itertools.count()


def unique_name(prefix: str) -> str:
    """A topic or group name no other test in this run uses (the mock lives per module)."""
    return f"{prefix}-{next(_names)}-{int(time.time() * 1000) % 100000}"


def start_mock_cluster(brokers: int = 3) -> Tuple[str, Any]:
    """Start a mock cluster; ``(bootstrap servers, the Producer that owns it)``."""
    import confluent_kafka as ck
    owner = ck.Producer({"test.mock.num.brokers": brokers, "log_level": 0})
    md = owner.list_topics(timeout=10)
    return ",".join(f"{b.host}:{b.port}" for b in md.brokers.values()), owner
