"""JSON objects of ``kafkawire dump --json``: one per batch and, deep, one per record."""
from __future__ import annotations

import base64
from typing import Any, Dict, Optional

from kafkawire.cli.text import timestamp_type_name


def b64(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def batch_obj(batch: Any, position: int, valid: bool) -> Dict[str, Any]:
    return {
        "type": "batch",
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "magic": batch.magic,
        "compresscodec": batch.compression,
        "isTransactional": bool(batch.is_transactional),
        "isControl": bool(batch.is_control),
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "position": position,
        "size": batch.size,
        "crc": batch.crc,
        "isvalid": bool(valid),
    }


def record_obj(batch: Any, record: Any) -> Dict[str, Any]:
    return {
        "type": "record",
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestampType": getattr(record, "timestamp_type", None) or timestamp_type_name(batch),
        "key": b64(record.key),
        "value": b64(record.value),
        "headers": [[k, b64(v)] for k, v in record.headers],
    }
