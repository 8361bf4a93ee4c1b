"""Drive every decoding path over a buffer; shared by the tests and the atheris target."""
from __future__ import annotations

import kafkawire
from kafkawire.errors import KafkaWireError

ATTRS = ("base_offset", "last_offset", "magic", "compression", "timestamp_type",
         "first_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
         "last_sequence", "partition_leader_epoch", "is_transactional", "is_control",
         "delete_horizon", "crc", "size", "position", "record_count", "attributes",
         "control_type", "coordinator_epoch")


def exercise(data, verify_crc: bool = False):
    """Decode everything in ``data``; return a comparable summary or the error raised.

    Any exception that is not a ``KafkaWireError`` propagates (that is a bug).
    """
    out = []
    it = kafkawire.iter_batches(data, verify_crc=verify_crc, max_decompressed_size=1 << 20)
    try:
        for b in it:
            row = []
            for a in ATTRS:
                try:
                    row.append(getattr(b, a))
                except KafkaWireError as exc:
                    row.append(("error", type(exc).__name__))
            try:
                recs = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
                        for r in b]
                row.append(recs)
                assert [(r.offset, r.key, r.value) for r in b.records()] == \
                    [(r[0], r[3], r[4]) for r in recs]
            except KafkaWireError as exc:
                row.append(("error", type(exc).__name__))
            try:
                b.validate()
                row.append("valid")
            except KafkaWireError as exc:
                row.append(("invalid", type(exc).__name__))
            bytes(b.raw)
            out.append(row)
    except KafkaWireError as exc:
        out.append(("stop", type(exc).__name__, exc.position))
    out.append(("tail", it.partial_tail, it.stop_position))
    return out
