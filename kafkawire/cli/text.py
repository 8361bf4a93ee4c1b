"""Text lines in the format of Kafka 3.9's ``kafka-dump-log.sh`` (``DumpLogSegments``).

Batch line (v2)::

    baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1
    producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
    deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000002 size: 94
    magic: 2 compresscodec: none crc: 2591541364 isvalid: true

(one line), ``offset: N position: ...`` for a v0/v1 message, and per record::

    | offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 5 sequence: -1 headerKeys: [] key: k payload: hello
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from kafkawire.cli.javastr import java_utf8

INT32_MAX = 2 ** 31 - 1
RECORD_INDENT = "|"
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

#: parse(key, value, offset) -> (key text or None, payload text or None)
Parser = Callable[[Optional[bytes], Optional[bytes], int], Tuple[Optional[str], Optional[str]]]


def jbool(v: Any) -> str:
    return "true" if v else "false"


def timestamp_type_name(batch: Any) -> str:
    """Kafka's TimestampType name; magic 0 has none."""
    if batch.magic == 0:
        return "NoTimestampType"
    name: str = batch.timestamp_type
    return name


def batch_max_timestamp(batch: Any) -> int:
    return -1 if batch.magic == 0 else batch.max_timestamp


def increment_sequence(seq: int, inc: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence (wraps at Integer.MAX_VALUE)."""
    if seq > INT32_MAX - inc:
        return inc - (INT32_MAX - seq) - 1
    return seq + inc


def record_sequence(batch: Any, record: Any) -> int:
    base = batch.base_sequence
    if base is None or base < 0:
        return -1
    return increment_sequence(base, record.offset - batch.base_offset)


def delete_horizon_text(batch: Any) -> str:
    h = getattr(batch, "delete_horizon", None)
    return "OptionalLong.empty" if h is None else f"OptionalLong[{h}]"


def batch_line(batch: Any, position: int, valid: bool) -> str:
    """The batch (shallow) line; ``position`` is the byte position in the file."""
    if batch.magic >= 2:
        count = batch.record_count
        head = (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
                f"count: {'null' if count is None else count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {jbool(batch.is_transactional)} "
                f"isControl: {jbool(batch.is_control)} deleteHorizonMs: {delete_horizon_text(batch)}")
    else:
        head = f"offset: {batch.last_offset}"
    return (f"{head} position: {position} {timestamp_type_name(batch)}: {batch_max_timestamp(batch)} "
            f"size: {batch.size} magic: {batch.magic} compresscodec: {batch.compression} "
            f"crc: {batch.crc} isvalid: {jbool(valid)}")


def size_of(b: Optional[bytes]) -> int:
    return -1 if b is None else len(b)


def control_text(record: Any) -> str:
    """What Kafka prints after a control record's metadata."""
    key = record.key or b""
    type_id = int.from_bytes(key[2:4], "big", signed=True) if len(key) >= 4 else -1
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1):
        value = record.value or b""
        epoch = int.from_bytes(value[2:6], "big", signed=True) if len(value) >= 6 else -1
        return f" endTxnMarker: {name} coordinatorEpoch: {epoch}"
    return f" controlType: {name}({type_id})"


def record_line(batch: Any, record: Any, *, skip_metadata: bool = False,
                print_contents: bool = False, parser: Optional[Parser] = None,
                legacy_crc: Optional[Tuple[int, bool]] = None) -> str:
    """One ``| offset: ...`` line; ``legacy_crc`` is ``(crc, valid)`` of a v0/v1 message."""
    parts = []
    prefix = RECORD_INDENT + " "
    if not skip_metadata:
        parts.append(f"{prefix}offset: {record.offset} {timestamp_type_name(batch)}: "
                     f"{record.timestamp} keySize: {size_of(record.key)} "
                     f"valueSize: {size_of(record.value)}")
        prefix = " "
        if batch.magic >= 2:
            keys = ",".join(k for k, _ in record.headers)
            parts.append(f" sequence: {record_sequence(batch, record)} headerKeys: [{keys}]")
        else:
            crc, valid = legacy_crc if legacy_crc is not None else (batch.crc, True)
            # Kafka 3.9's DumpLogSegments prints this stray "}" too; kept for identical output
            parts.append(f" isValid: {jbool(valid)} crc: {crc}}}")
        if batch.is_control:
            parts.append(control_text(record))
    if print_contents and not batch.is_control:
        key_text, payload = (parser or string_parser)(record.key, record.value, record.offset)
        if key_text is not None:
            parts.append(f"{prefix}key: {key_text}")
            prefix = " "
        if payload is not None:
            parts.append(f" payload: {payload}")
    return "".join(parts)


def string_parser(key: Optional[bytes], value: Optional[bytes], offset: int
                  ) -> Tuple[Optional[str], Optional[str]]:
    """Kafka's default StringDecoder: UTF-8 text (malformed bytes replaced as Java does);
    null keys/values print nothing."""
    k = None if key is None else java_utf8(bytes(key))
    v = None if value is None else java_utf8(bytes(value))
    return k, v


def record_lines(batch: Any, records: Any, *, skip_metadata: bool = False,
                 print_contents: bool = False, parser: Optional[Parser] = None,
                 legacy_crcs: Optional[List[Tuple[int, bool]]] = None) -> List[str]:
    """The ``| offset: ...`` lines of a whole batch (the hot loop of ``dump --deep-iteration``).

    Same text as :func:`record_line`, with the per-batch parts computed once;
    control batches, legacy messages and custom parsers take the general path.
    """
    if (batch.magic < 2 or batch.is_control or skip_metadata
            or (print_contents and parser not in (None, string_parser))):
        out = []
        for i, rec in enumerate(records):
            legacy = legacy_crcs[i] if legacy_crcs is not None and i < len(legacy_crcs) else None
            out.append(record_line(batch, rec, skip_metadata=skip_metadata,
                                   print_contents=print_contents, parser=parser,
                                   legacy_crc=legacy))
        return out
    ts = f" {batch.timestamp_type}: "
    base_seq = batch.base_sequence
    base_off = batch.base_offset
    no_seq = base_seq is None or base_seq < 0
    out = []
    append = out.append
    for rec in records:
        k = rec.key
        v = rec.value
        hdrs = rec.headers
        if no_seq:
            seq = -1
        else:
            delta = rec.offset - base_off
            seq = (delta - (INT32_MAX - base_seq) - 1) if base_seq > INT32_MAX - delta \
                else base_seq + delta
        line = (f"| offset: {rec.offset}{ts}{rec.timestamp} keySize: {-1 if k is None else len(k)} "
                f"valueSize: {-1 if v is None else len(v)} sequence: {seq} headerKeys: "
                + (f"[{','.join([h[0] for h in hdrs])}]" if hdrs else "[]"))
        if print_contents:
            if k is not None:
                line += " key: " + java_utf8(k)
            if v is not None:
                line += " payload: " + java_utf8(v)
        append(line)
    return out
