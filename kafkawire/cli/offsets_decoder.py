"""Decode ``__consumer_offsets`` keys and values the way ``kafka-dump-log.sh --offsets-decoder`` does.

The schemas and version tables live in
:mod:`kafkawire.protocol.coordinator_records` (the broker writes these records
with them); this module renders them as Kafka's tool does.  Key versions 0
and 1 are offset-commit keys (group, topic, partition), version 2
is a group-metadata key (group).  Values carry their own version: offset-commit
values v0–v4 and group-metadata values v0–v4 (v4 is the first flexible
version).  For groups of the ``consumer`` protocol type, each member's
subscription and assignment bytes are decoded too, as Kafka's tool does.

Output matches Kafka 3.9's ``OffsetsMessageParser``: the key as
``{"type":"<key version>","data":{...}}``, the value as
``{"version":"<value version>","data":{...}}``, a tombstone as ``<DELETE>``,
and records kafkawire cannot decode as ``Unknown record type N at offset O,
skipping.`` / ``Error at offset O, skipping. <reason>``.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional, Tuple

from kafkawire.cli._wire import DecodeError, Reader, b64
from kafkawire.protocol.coordinator_records import (CONSUMER_PROTOCOL_TYPE,
                                                    GROUP_METADATA_KEY_VERSION,
                                                    OFFSET_COMMIT_KEY_VERSIONS, VALUE_VERSIONS)

__all__ = ["decode_key", "decode_value", "parse_record", "UnknownRecordType"]


class UnknownRecordType(DecodeError):
    """A key version that names no record type kafkawire knows."""

    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(f"unknown record type {version}")


def dumps(obj: Any) -> str:
    """Compact JSON, like Jackson's ``JsonNode.toString``."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- keys

def decode_key(key: bytes) -> Tuple[int, str, Dict[str, Any]]:
    """Return ``(version, record kind, fields)`` of a ``__consumer_offsets`` key."""
    r = Reader(key)
    version = r.int16()
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        data = {"group": r.string(), "topic": r.string(), "partition": r.int32()}
        return version, "offset_commit", data
    if version == GROUP_METADATA_KEY_VERSION:
        return version, "group_metadata", {"group": r.string()}
    raise UnknownRecordType(version)


# -------------------------------------------------------------- values

def _offset_commit_value(r: Reader, version: int) -> Dict[str, Any]:
    if version > VALUE_VERSIONS["OffsetCommitValue"][1]:
        raise DecodeError(f"Can't read version {version} of OffsetCommitValue")
    out: Dict[str, Any] = {"offset": r.int64()}
    if version >= 3:
        out["leaderEpoch"] = r.int32()
    out["metadata"] = r.string()
    out["commitTimestamp"] = r.int64()
    if version == 1:
        out["expireTimestamp"] = r.int64()
    r.tagged_fields()
    return out


def _topic_partitions(r: Reader) -> Dict[str, Any]:
    return {"topic": r.string(), "partitions": r.array(lambda rr: rr.int32())}


def _subscription(data: bytes) -> Dict[str, Any]:
    r = Reader(data)
    version = r.int16()
    if version < 0 or version > 3:
        raise DecodeError(f"Can't read version {version} of ConsumerProtocolSubscription")
    out: Dict[str, Any] = {"topics": r.array(lambda rr: rr.string()),
                           "userData": b64(r.nullable_bytes())}
    if version >= 1:
        out["ownedPartitions"] = r.array(_topic_partitions)
    if version >= 2:
        out["generationId"] = r.int32()
    if version >= 3:
        out["rackId"] = r.nullable_string()
    return out


def _assignment(data: bytes) -> Dict[str, Any]:
    r = Reader(data)
    version = r.int16()
    if version < 0 or version > 3:
        raise DecodeError(f"Can't read version {version} of ConsumerProtocolAssignment")
    return {"assignedPartitions": r.array(_topic_partitions),
            "userData": b64(r.nullable_bytes())}


def _member(version: int) -> Callable[[Reader], Dict[str, Any]]:
    def read(r: Reader) -> Dict[str, Any]:
        m: Dict[str, Any] = {"memberId": r.string()}
        if version >= 3:
            m["groupInstanceId"] = r.nullable_string()
        m["clientId"] = r.string()
        m["clientHost"] = r.string()
        if version >= 1:
            m["rebalanceTimeout"] = r.int32()
        m["sessionTimeout"] = r.int32()
        m["subscription"] = r.bytes_()
        m["assignment"] = r.bytes_()
        r.tagged_fields()
        return m
    return read


def _group_metadata_value(r: Reader, version: int) -> Dict[str, Any]:
    if version > VALUE_VERSIONS["GroupMetadataValue"][1]:
        raise DecodeError(f"Can't read version {version} of GroupMetadataValue")
    out: Dict[str, Any] = {"protocolType": r.string(), "generation": r.int32(),
                           "protocol": r.nullable_string(), "leader": r.nullable_string()}
    if version >= 2:
        out["currentStateTimestamp"] = r.int64()
    members = r.array(_member(version))
    r.tagged_fields()
    consumer = out["protocolType"] == CONSUMER_PROTOCOL_TYPE
    for m in members:
        for field, decoder in (("subscription", _subscription), ("assignment", _assignment)):
            raw = m[field]
            m[field] = b64(raw)
            if consumer:
                try:
                    m[field] = decoder(raw)
                except DecodeError:
                    pass  # keep the original bytes, as Kafka's tool does
    out["members"] = members
    return out


def decode_value(kind: str, value: bytes) -> Tuple[int, Dict[str, Any]]:
    """Return ``(version, fields)`` of a value whose key decoded as ``kind``."""
    version = Reader(value).int16()
    if version < 0:
        raise DecodeError(f"negative value version {version}")
    r = Reader(value, 2, flexible=version >= 4)
    if kind == "offset_commit":
        return version, _offset_commit_value(r, version)
    return version, _group_metadata_value(r, version)


# ------------------------------------------------------------- records

def parse_record(key: Optional[bytes], value: Optional[bytes], offset: int
                 ) -> Tuple[Optional[str], Optional[str]]:
    """The ``(key, payload)`` strings kafka-dump-log prints for one record."""
    if key is None:
        return (f"Error at offset {offset}, skipping. Failed to decode message at offset "
                f"{offset} using offset topic decoder (message had a missing key)", None)
    try:
        kversion, kind, kdata = decode_key(key)
        key_text = dumps({"type": str(kversion), "data": kdata})
        if value is None:
            return key_text, "<DELETE>"
        vversion, vdata = decode_value(kind, value)
        return key_text, dumps({"version": str(vversion), "data": vdata})
    except UnknownRecordType as e:
        return f"Unknown record type {e.version} at offset {offset}, skipping.", None
    except DecodeError as e:
        return f"Error at offset {offset}, skipping. {e}", None
