"""Batch header scan kernel (pure twin of ``kafkawire/_fast/scan.pyx``).

Contract (both backends)::

    scan_batches(buf, start, end, max_count, check_crc) -> (headers, stop_position, status)

* ``buf``: any bytes-like buffer (bytes, bytearray, memoryview, mmap) of
  concatenated v2 record batches and/or v0/v1 messages (a ``.log`` file, a
  Fetch response's records).  ``start``/``end`` are byte positions in ``buf``
  (``end=-1`` means ``len(buf)``); ``max_count`` caps the number of batches
  read (``-1``: no cap); ``check_crc`` also verifies each batch's CRC
  (CRC-32C over bytes 21.. for v2, CRC-32 over bytes 16.. for v0/v1).
* ``headers``: a numpy ``int64`` array of shape ``(n, NFIELDS)``, one row per
  good batch (v2) or top-level message (v0/v1, Kafka's shallow model), with
  columns named in :mod:`kafkawire._scan_common` (``POSITION``, ``SIZE`` incl.
  the 12-byte offset+length prefix, ``BASE_OFFSET``, ``LAST_OFFSET``, ``MAGIC``,
  ``ATTRIBUTES``, ``CRC`` (stored, unsigned), ``PARTITION_LEADER_EPOCH``,
  ``FIRST_TIMESTAMP``, ``MAX_TIMESTAMP``, ``PRODUCER_ID``, ``PRODUCER_EPOCH``,
  ``BASE_SEQUENCE``, ``RECORD_COUNT``).  Positions are positions in ``buf``.
  For v0/v1 the message's offset fills both BASE_OFFSET and LAST_OFFSET (for a
  compressed wrapper that is the offset of its last inner message), the v2-only
  columns are -1, FIRST/MAX_TIMESTAMP hold the v1 timestamp (-1 for v0), and
  RECORD_COUNT is 1 (uncompressed) or -1 (compressed wrapper: unknown).
  Only the header is read: no payload is copied or decompressed.
* ``stop_position``: where scanning stopped: ``end``, the position after the
  ``max_count``-th batch, or the position of the first batch that is not OK.
* ``status`` (why it stopped; the rows hold only the good batches before it):
  ``OK`` (reached end or max_count), ``PARTIAL`` (trailing partial batch at
  stop_position: fewer than 12 bytes left, or its length points past ``end``),
  ``CORRUPT_LENGTH`` (length field smaller than the minimum header for its
  magic; a length of 0 is a zero-filled tail: Kafka's "record size 0 smaller
  than minimum record overhead"), ``BAD_MAGIC`` (magic not 0/1/2),
  ``CRC_MISMATCH`` (only when ``check_crc``).

Checks are made in Kafka's order: fewer than 12 bytes -> PARTIAL; length < 14
-> CORRUPT_LENGTH; batch past ``end`` -> PARTIAL; magic -> BAD_MAGIC; length
below the magic's minimum (49 for v2, 22 for v1) -> CORRUPT_LENGTH; CRC.
The scan holds no policy: the caller decides what a status means.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

from kafkawire import _scan_common as C
from kafkawire._pure.crc import crc32c
from kafkawire._pure.wire import flat, wrap64

__all__ = ["scan_batches", "scan_batch_objects", "BatchHeader"]

_V2 = struct.Struct(">qiiBIhiqqqhii")  # offset .. record count (61 bytes)
_V1 = struct.Struct(">qiIbbq")         # offset, length, crc, magic, attributes, timestamp
_V0 = struct.Struct(">qiIbb")
_LENGTH = struct.Struct(">i").unpack_from


def scan_batches(buf, start: int = 0, end: int = -1, max_count: int = -1,
                 check_crc: bool = False):
    """Read batch headers of ``buf[start:end]``; see the module docstring."""
    rows, pos, status, _ = _scan(buf, start, end, max_count, check_crc, None, 0, None)
    headers = np.array(rows, dtype=np.int64).reshape(len(rows), C.NFIELDS)
    return headers, pos, status


def _scan(buf, start, end, max_count, check_crc, v2_type, base_position, max_size, hooks=None):
    """The scan loop behind both kernels -> ``(items, stop, status, n_legacy)``.

    Items are row tuples, except that with a ``v2_type`` a v2 batch becomes an
    instance of it directly (no row in between).
    """
    mv = flat(buf)
    n = len(mv)
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    if max_count < 0:
        max_count = n  # more than there can be batches
    rows = []
    append = rows.append
    new = object.__new__
    n_legacy = 0
    pos = start
    status = C.OK
    unpack_v2 = _V2.unpack_from
    unpack_v1 = _V1.unpack_from
    unpack_v0 = _V0.unpack_from
    length_at = _LENGTH
    while pos < end:
        if len(rows) >= max_count:
            break
        if end - pos < 12:  # C.LOG_OVERHEAD
            status = C.PARTIAL
            break
        length = length_at(mv, pos + 8)[0]
        if length < 14:  # C.MIN_LENGTH
            status = C.CORRUPT_LENGTH
            break
        size = length + 12
        if size > end - pos:
            status = C.PARTIAL
            break
        magic = mv[pos + 16]
        if magic == 2:
            if length < 49:  # C.V2_MIN_LENGTH
                status = C.CORRUPT_LENGTH
                break
            (base_offset, _, ple, _, crc, attrs, last_delta, first_ts, max_ts, pid, pepoch,
             base_seq, count) = unpack_v2(mv, pos)
            if check_crc and crc32c(mv, pos + 21, pos + size) != crc:
                status = C.CRC_MISMATCH
                break
            if v2_type is None:
                append((pos, size, base_offset, wrap64(base_offset + last_delta), 2, attrs & 0xFFFF, crc,
                        ple, first_ts, max_ts, pid, pepoch, base_seq, count))
            else:
                b = new(v2_type)
                b._pos = pos
                b.size = size
                b.base_offset = base_offset
                b.last_offset = wrap64(base_offset + last_delta)
                b.attributes = attrs & 0xFFFF
                b.crc = crc
                b.partition_leader_epoch = ple
                b.first_timestamp = first_ts
                b.max_timestamp = max_ts
                b.producer_id = pid
                b.producer_epoch = pepoch
                b.base_sequence = base_seq
                b.record_count = count
                b._buf = buf
                b._base_position = base_position
                b._max_size = max_size
                b._control = None
                b._hooks = hooks
                append(b)
        elif magic == 1 or magic == 0:
            if magic == 1:
                if length < 22:  # C.V1_MIN_LENGTH
                    status = C.CORRUPT_LENGTH
                    break
                offset, _, crc, _, attrs, ts = unpack_v1(mv, pos)
            else:
                offset, _, crc, _, attrs = unpack_v0(mv, pos)
                ts = -1
            if check_crc and zlib.crc32(mv[pos + 16:pos + size]) != crc:  # from the magic on
                status = C.CRC_MISMATCH
                break
            attrs &= 0xFF
            count = -1 if attrs & 0x07 else 1  # C.LEGACY_COMPRESSION_MASK: a wrapper
            append((pos, size, offset, offset, magic, attrs, crc, -1, ts, ts, -1, -1, -1, count))
            n_legacy += 1
        else:
            status = C.BAD_MAGIC
            break
        pos += size
    return rows, pos, status, n_legacy


class BatchHeader:
    """Storage of a v2 batch's header (the compiled twin keeps these as C fields).

    The front end subclasses it together with a mixin holding the methods;
    ``scan_batch_objects`` fills every slot.
    """

    __slots__ = ("_buf", "_base_position", "_max_size", "_control", "_hooks", "_pos", "size",
                 "base_offset", "last_offset", "attributes", "crc", "partition_leader_epoch",
                 "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "record_count")

def scan_batch_objects(buf, start: int, end: int, max_count: int, check_crc: bool, v2_type,
                       base_position, max_size, hooks=None):
    """``scan_batches``, building objects instead of an array.

    Returns ``(objects, stop_position, status, n_legacy)``: for a v2 row a new
    ``v2_type`` instance (a subclass of this backend's :class:`BatchHeader`,
    created without ``__init__``) holding the row's header fields, ``buf``,
    ``base_position``, ``max_size`` and ``hooks`` (``_control`` None); for a v0/v1
    row the row as a tuple (``n_legacy`` counts them).  It lets the front end skip
    a Python-level constructor per batch.  ``hooks`` is what iterating a batch
    needs from the front end and the kernels do not do themselves:
    ``(payload, relocate)``, with ``payload(batch) -> (buffer, start, end,
    compressed)`` (the records region, decompressed) and ``relocate(exc, batch,
    compressed) -> exception`` (a records error re-anchored to the batch).
    """
    if not issubclass(v2_type, BatchHeader):
        raise TypeError("scan_batch_objects: v2_type must subclass this backend's BatchHeader")
    return _scan(buf, start, end, max_count, check_crc, v2_type, base_position, max_size,
                 hooks)
