"""JSON objects of ``kafkawire dump --json``: one per batch and, deep, one per record."""
from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Dict, List, Optional

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


def _b64_json(data: Optional[bytes]) -> str:
    if data is None:
        return "null"
    return '"' + binascii.b2a_base64(data, newline=False).decode("ascii") + '"'


def _str_json(s: str) -> str:
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    return json.dumps(s, ensure_ascii=False)


def record_json_lines(batch: Any, records: Any) -> List[str]:
    """``record_obj`` of each record, already serialised (the hot loop of ``dump --json``)."""
    fallback = timestamp_type_name(batch)
    out: List[str] = []
    append = out.append
    for rec in records:
        tst = getattr(rec, "timestamp_type", None) or fallback
        hdrs = rec.headers
        if hdrs:
            h = "[" + ",".join(f"[{_str_json(hk)},{_b64_json(hv)}]" for hk, hv in hdrs) + "]"
        else:
            h = "[]"
        append(f'{{"type":"record","offset":{rec.offset},"timestamp":{rec.timestamp},'
               f'"timestampType":"{tst}","key":{_b64_json(rec.key)},'
               f'"value":{_b64_json(rec.value)},"headers":{h}}}')
    return out
