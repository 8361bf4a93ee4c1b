"""Decode ``__transaction_state`` keys and values (``kafka-dump-log.sh --transaction-log-decoder``).

Key version 0 holds the transactional id; values are ``TransactionLogValue``
v0 and v1 (v1 is flexible and may carry tagged fields: previous and next
producer id, client transaction version).  Output follows the same shape as
the offsets decoder: ``{"type":"0","data":{"transactionalId":...}}`` and
``{"version":"N","data":{...}}``; a tombstone prints ``<DELETE>``.
``transactionStatus`` is Kafka's state byte; :data:`TXN_STATES` names it.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Optional, Tuple

from kafkawire.cli._wire import DecodeError, Reader
from kafkawire.cli.offsets_decoder import dumps
from kafkawire.protocol.coordinator_records import (TRANSACTION_LOG_KEY_VERSION, TXN_STATES,
                                                    VALUE_VERSIONS)

__all__ = ["decode_key", "decode_value", "parse_record", "TXN_STATES"]


def decode_key(key: bytes) -> Tuple[int, Dict[str, Any]]:
    r = Reader(key)
    version = r.int16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise _Unknown(version)
    return version, {"transactionalId": r.string()}


class _Unknown(DecodeError):
    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(f"unknown record type {version}")


def _partitions(r: Reader) -> Dict[str, Any]:
    out = {"topic": r.string(), "partitionIds": r.array(lambda rr: rr.int32())}
    r.tagged_fields()  # each struct of a flexible version ends with its own tagged fields
    return out


def decode_value(value: bytes) -> Tuple[int, Dict[str, Any]]:
    version = Reader(value).int16()
    lo, hi = VALUE_VERSIONS["TransactionLogValue"]
    if version < lo or version > hi:
        raise DecodeError(f"Can't read version {version} of TransactionLogValue")
    r = Reader(value, 2, flexible=version >= 1)
    producer_id = r.int64()
    epoch = r.int16()
    timeout = r.int32()
    status = r.int8()
    parts = r.nullable_array(_partitions)
    last_update = r.int64()
    start = r.int64()
    tags = r.tagged_fields()
    out: Dict[str, Any] = {"producerId": producer_id}
    if version >= 1:
        for tag, name in ((0, "previousProducerId"), (1, "nextProducerId")):
            if tag in tags and len(tags[tag]) == 8:
                v = struct.unpack(">q", tags[tag])[0]
                if v != -1:
                    out[name] = v
    out.update({"producerEpoch": epoch, "transactionTimeoutMs": timeout,
                "transactionStatus": status, "transactionPartitions": parts,
                "transactionLastUpdateTimestampMs": last_update,
                "transactionStartTimestampMs": start})
    if version >= 1 and 2 in tags and len(tags[2]) == 2:
        v = struct.unpack(">h", tags[2])[0]
        if v != 0:
            out["clientTransactionVersion"] = v
    return version, out


def parse_record(key: Optional[bytes], value: Optional[bytes], offset: int
                 ) -> Tuple[Optional[str], Optional[str]]:
    """The ``(key, payload)`` strings kafka-dump-log prints for one record."""
    if key is None:
        return (f"Error at offset {offset}, skipping. Failed to decode message at offset "
                f"{offset} using transaction log decoder (message had a missing key)", None)
    try:
        kversion, kdata = decode_key(key)
        key_text = dumps({"type": str(kversion), "data": kdata})
        if value is None:
            return key_text, "<DELETE>"
        vversion, vdata = decode_value(value)
        return key_text, dumps({"version": str(vversion), "data": vdata})
    except _Unknown as e:
        return f"Unknown record type {e.version} at offset {offset}, skipping.", None
    except DecodeError as e:
        return f"Error at offset {offset}, skipping. {e}", None
