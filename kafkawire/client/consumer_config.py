"""The consumer's settings: Kafka's consumer configuration names in snake_case, with defaults.

``consumer_settings(kwargs)`` fills in defaults and rejects unknown names,
suggesting the closest known one.
"""
from __future__ import annotations

import difflib
from typing import Any, Dict, Mapping

__all__ = ["CONSUMER_DEFAULTS", "consumer_settings"]

CONSUMER_DEFAULTS: Dict[str, Any] = {
    "client_id": "kafkawire",
    "group_instance_id": None,
    "client_rack": None,
    "session_timeout_ms": 45_000,
    "heartbeat_interval_ms": 3_000,
    "max_poll_interval_ms": 300_000,
    "max_poll_records": 500,
    "partition_assignment_strategy": ("range", "cooperative-sticky"),
    "auto_offset_reset": "latest",
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5_000,
    "isolation_level": "read_uncommitted",
    "fetch_min_bytes": 1,
    "fetch_max_wait_ms": 500,
    "fetch_max_bytes": 52_428_800,
    "max_partition_fetch_bytes": 1_048_576,
    "check_crcs": False,
    "exclude_internal_topics": True,
    "allow_auto_create_topics": False,
    "key_deserializer": None,
    "value_deserializer": None,
    "request_timeout_ms": 30_000,
    "default_api_timeout_ms": 60_000,
    "socket_connection_setup_timeout_ms": 10_000,
    "metadata_max_age_ms": 300_000,
    "retry_backoff_ms": 100,
    "max_frame_size": 104_857_600,
}


def consumer_settings(given: Mapping[str, Any]) -> Dict[str, Any]:
    """Defaults overlaid with ``given``; an unknown setting raises ``TypeError`` naming it."""
    out = dict(CONSUMER_DEFAULTS)
    for name, value in given.items():
        if name not in CONSUMER_DEFAULTS:
            close = difflib.get_close_matches(name, list(CONSUMER_DEFAULTS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"unknown consumer setting {name!r}{hint}")
        out[name] = value
    out["_connection"] = {}
    return out
