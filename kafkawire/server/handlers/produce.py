"""Produce: validate each partition's batch as Kafka does, append it, answer with offsets.

Errors are Kafka's, per partition: CORRUPT_MESSAGE (CRC, sizes),
INVALID_RECORD (record count, offsets, magic below 2), MESSAGE_TOO_LARGE
(``max.message.bytes``), INVALID_TIMESTAMP (``message.timestamp.*.max.ms``),
UNKNOWN_TOPIC_OR_PARTITION; idempotent and transactional batches go through
the partition's producer state (sequence and epoch checks).
"""
from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Any, List, Optional, Tuple, Union

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire._format import (V2_ATTRIBUTES, V2_CRC, V2_CRC_START, V2_MAX_TIMESTAMP)
from kafkawire.errors import CorruptRecordError, LogError
from kafkawire.protocol import ApiKey
from kafkawire.records import iter_batches
from kafkawire.server.codes import (CORRUPT_MESSAGE, INVALID_RECORD, INVALID_REQUIRED_ACKS,
                                    INVALID_TOPIC_EXCEPTION,
                                    INVALID_TIMESTAMP, KAFKA_STORAGE_ERROR, MESSAGE_TOO_LARGE, NONE,
                                    TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION)
from kafkawire.server.dispatch import EncodedResponse, RequestContext
from kafkawire.server.partitions import Partition
from kafkawire.server.producer_state import ProducerStateError

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["register", "ProduceError", "check_batches", "encode_produce_response"]

_LONG_MAX = (1 << 63) - 1
Bytes = Union[bytes, bytearray, memoryview]
_CORRUPT_REASONS = ("crc", "length", "truncated", "size", "magic")


class ProduceError(Exception):
    """A partition's produce refused with a Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_batches(part: Partition, data: Bytes, now_ms: int) -> Tuple[Bytes, int, Any]:
    """Kafka's checks before an append (``ProduceRequest.validateRecords`` and the parts of
    ``LogValidator`` LogWriter does not do): one v2 batch, its size, its timestamps;
    LogAppendTime applied.  ``(data, log_append_time, header row)``."""
    log_append_time = part.config("message.timestamp.type") == "LogAppendTime"
    # The CRC is checked here only when the batch is about to be rewritten (LogAppendTime);
    # otherwise the log writer checks it, once.
    rows, stop, status = K.scan_batches(data, 0, len(data), -1, log_append_time)
    if status == C.CRC_MISMATCH:
        raise ProduceError(CORRUPT_MESSAGE, "record batch CRC mismatch")
    if status != C.OK or stop != len(data) or len(rows) == 0:
        raise ProduceError(CORRUPT_MESSAGE, f"records are not a complete batch "
                           f"({C.STATUS_NAMES[status]} at byte {stop} of {len(data)})")
    if len(rows) != 1:
        raise ProduceError(INVALID_RECORD, "Produce requests with version 3+ are only allowed to "
                           "contain exactly one record batch")
    row = rows[0].tolist()
    if row[C.MAGIC] != 2:
        raise ProduceError(INVALID_RECORD, "Produce requests with version 3+ are only allowed to "
                           "contain record batches with magic version 2")
    if row[C.ATTRIBUTES] & C.CONTROL_MASK:
        raise ProduceError(INVALID_RECORD, "clients may not write control batches")
    max_bytes = int(part.config("max.message.bytes") or 1048588)
    if row[C.SIZE] > max_bytes:
        raise ProduceError(MESSAGE_TOO_LARGE, f"the batch is {row[C.SIZE]} bytes, over the "
                           f"topic's max.message.bytes ({max_bytes})")
    append_time = -1
    if log_append_time:
        append_time = now_ms
        buf = bytearray(data)
        attrs = struct.unpack_from(">h", buf, V2_ATTRIBUTES)[0] | C.TIMESTAMP_TYPE_MASK
        struct.pack_into(">h", buf, V2_ATTRIBUTES, attrs)
        struct.pack_into(">q", buf, V2_MAX_TIMESTAMP, now_ms)
        struct.pack_into(">I", buf, V2_CRC, K.crc32c(buf, V2_CRC_START, -1, 0))
        data = bytes(buf)
    else:
        before = int(part.config("message.timestamp.before.max.ms") or _LONG_MAX)
        after = int(part.config("message.timestamp.after.max.ms") or _LONG_MAX)
        if before < _LONG_MAX or after < _LONG_MAX:
            for batch in iter_batches(data):
                for rec in batch:
                    ts = rec.timestamp
                    if ts < now_ms - before or ts > now_ms + after:
                        raise ProduceError(INVALID_TIMESTAMP, f"timestamp {ts} of offset "
                                           f"{rec.offset} is out of the allowed range")
    return data, append_time, row


#: One partition's answer: (index, error code, base offset, log append time, log start
#: offset, error message).
PartitionAnswer = Tuple[int, int, int, int, int, Optional[str]]
_PART = struct.Struct(">ihq")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def encode_produce_response(version: int, correlation_id: int,
                            topics: List[Tuple[str, List[PartitionAnswer]]]) -> bytes:
    """The ProduceResponse frame (size prefix and header included) for ``topics``, encoded
    directly: what :func:`kafkawire.protocol.encode_response` gives for the same answer
    (no record errors, no leader hints, throttle 0), without building message objects."""
    flexible = version >= 9
    uvarint = K.write_unsigned_varint
    out = bytearray(8)
    _I32.pack_into(out, 4, correlation_id)
    if flexible:
        out += b"\0"                                     # header tagged fields

    def count(n: int) -> None:
        out.extend(uvarint(n + 1) if flexible else _I32.pack(n))

    def string(text: Optional[str]) -> None:
        if text is None:
            out.extend(b"\0" if flexible else b"\xff\xff")
            return
        raw = text.encode("utf-8")
        out.extend(uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw)))
        out.extend(raw)

    count(len(topics))
    for name, parts in topics:
        string(name)
        count(len(parts))
        for index, code, base, append_time, log_start, message in parts:
            out += _PART.pack(index, code, base)
            if version >= 2:
                out += _I64.pack(append_time)
            if version >= 5:
                out += _I64.pack(log_start)
            if version >= 8:
                count(0)                                 # record errors
                string(message)
            if flexible:
                out += b"\0"
        if flexible:
            out += b"\0"
    out += b"\0\0\0\0"                                   # throttle time
    if flexible:
        out += b"\0"
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def handle_produce(ctx: RequestContext, req: Any, version: int) -> Optional[EncodedResponse]:
    """Append each partition's batch and answer (synchronous: nothing here waits)."""
    broker = ctx.broker
    pm = broker.partitions
    acks = req.acks
    now = int(time.time() * 1000)
    txn = broker.txn_coordinator
    topics: List[Tuple[str, List[PartitionAnswer]]] = []
    appended = False
    for td in req.topic_data:
        parts: List[PartitionAnswer] = []
        for pd in td.partition_data:
            base = append_time = log_start = -1
            code, message = NONE, None
            part = pm.partition(td.name, pd.index)
            try:
                if acks not in (-1, 0, 1):
                    raise ProduceError(INVALID_REQUIRED_ACKS, f"acks={acks} is not -1, 0 or 1")
                if part is None:
                    raise ProduceError(UNKNOWN_TOPIC_OR_PARTITION,
                                       f"{td.name}-{pd.index} is not on this broker")
                if part.writer is None:
                    raise ProduceError(TOPIC_AUTHORIZATION_FAILED,
                                       "this broker serves its log dirs read-only")
                if part.topic.internal:
                    raise ProduceError(INVALID_TOPIC_EXCEPTION,
                                       f"Cannot append to internal topic {td.name}")
                if pd.records is None:
                    raise ProduceError(CORRUPT_MESSAGE, "no records")
                # the records stay a view of the request: checked and written in place
                data, checked_time, row = check_batches(part, pd.records, now)
                if txn is not None and row[C.ATTRIBUTES] & C.TRANSACTIONAL_MASK:
                    code = txn.check_produce(req.transactional_id, td.name, pd.index,
                                             row[C.PRODUCER_ID], row[C.PRODUCER_EPOCH])
                    if code:
                        raise ProduceError(code, "transaction state refuses this batch")
                idempotent = row[C.PRODUCER_ID] >= 0
                dup = part.producers.check(row) if idempotent else None
                if dup is not None:       # a retried batch: answer with its offsets again
                    base, log_start = dup.first_offset, part.log_start_offset
                else:
                    first, last = part.append(data)
                    appended = True
                    if idempotent:
                        part.producers.update(row, first, last)
                    base, append_time, log_start = first, checked_time, part.log_start_offset
            except (ProduceError, ProducerStateError) as exc:
                code, message = exc.code, exc.message
            except CorruptRecordError as exc:
                code = CORRUPT_MESSAGE if exc.reason in _CORRUPT_REASONS else INVALID_RECORD
                message = str(exc)
            except LogError as exc:
                code, message = KAFKA_STORAGE_ERROR, str(exc)
            parts.append((pd.index, code, base, append_time, log_start, message))
        topics.append((td.name, parts))
    if appended:
        pm.wake()
    if acks == 0:
        return None
    return EncodedResponse(encode_produce_response(version, ctx.correlation_id, topics))


def register(broker: "Broker") -> None:
    broker.dispatcher.register_now(ApiKey.PRODUCE, handle_produce, versions=(3, 11))
