"""Encoders: v2 record batches, v0/v1 message sets, control batches, re-basing.

What these write is what Kafka's own ``MemoryRecordsBuilder`` writes, so a
broker or a Java consumer reads it back unchanged (the test suite checks that
with Kafka's jar).  Layouts, for the reader of this code:

* v2 batch: ``baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
  magic i8 = 2, crc u32 (CRC-32C of attributes..end), attributes i16,
  lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64, producerId i64,
  producerEpoch i16, baseSequence i32, recordCount i32`` then the records
  (compressed as one payload when a codec is set).
* v0/v1 message: ``offset i64, size i32, crc u32 (CRC-32 of magic..end),
  magic i8, attributes i8, [timestamp i64 (v1)], key bytes, value bytes``.
  A compressed message set is one *wrapper* message whose value is the
  compressed inner message set: inner offsets are absolute under magic 0 and
  relative to the first under magic 1, where the wrapper carries the last
  inner offset and (CreateTime) the largest inner timestamp.
"""
from __future__ import annotations

import operator
import struct
import time
from typing import Any, Iterable, List, Optional, Sequence, SupportsIndex, Tuple, Union, cast

from kafkawire import _kernels as K
from kafkawire import compression as _compression
from kafkawire.errors import CorruptRecordError, UnsupportedCodecError, UnsupportedVersionError

__all__ = ["BatchBuilder", "control_batch", "set_base_offset"]

Bytes = Union[bytes, bytearray, memoryview]
Header = Tuple[Union[str, bytes], Optional[Bytes]]

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")   # the 61-byte v2 batch header
_V2_HEADER_SIZE = 61
_V2_CRC_START = 21
_LEGACY_PREFIX = struct.Struct(">qiIbb")        # offset, size, crc, magic, attributes
_TS_TYPES = {"CreateTime": 0, "LogAppendTime": 1}

_INT32_MAX = 0x7FFFFFFF
_CONTROL_TYPES = {"abort": 0, "commit": 1}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _encode_records_v2(offset_deltas: Sequence[int], timestamp_deltas: Sequence[int],
                       keys: Sequence[Optional[Bytes]], values: Sequence[Optional[Bytes]],
                       headers: Sequence[Optional[List[Header]]]) -> bytes:
    encode: Any = K.encode_records_v2   # its stub types bytes; both kernels take any buffer
    encoded: bytes = encode(offset_deltas, timestamp_deltas, keys, values, headers)
    return encoded


def _crc32c(buf: Bytes, start: int) -> int:
    crc: int = K.crc32c(buf, start, -1, 0)
    return crc


def _crc32(buf: Bytes, start: int) -> int:
    crc: int = K.crc32(buf, start, -1, 0)
    return crc


def _check_bytes(v: Any, what: str) -> Any:
    if v is None or isinstance(v, (bytes, bytearray, memoryview)):
        return v
    if isinstance(v, str):
        raise TypeError(f"{what} must be bytes-like or None, not str: encode it first "
                        f"(e.g. {what}.encode())")
    try:
        memoryview(v)
    except TypeError:
        raise TypeError(f"{what} must be bytes-like or None, not {type(v).__name__}") from None
    return v


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _check_int(v: object, what: str) -> int:
    """``v`` as an int if it is one (or has ``__index__``, like numpy's integers; a bool is
    not), in int64 range; else a TypeError or ValueError naming ``what``."""
    if isinstance(v, bool):
        raise TypeError(f"{what} must be an int, not bool ({v!r})")
    if isinstance(v, int):
        n = int(v)
    else:
        try:
            n = operator.index(cast(SupportsIndex, v))
        except TypeError:
            raise TypeError(f"{what} must be an int, not {type(v).__name__} ({v!r})") from None
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"{what} {n} does not fit a signed 64-bit integer")
    return n


def _check_headers(headers: object, what: str = "headers") -> List["Header"]:
    """Headers as a list of (key, value) pairs: key str or bytes, value bytes-like or None."""
    if isinstance(headers, (str, bytes, bytearray, memoryview, dict)):
        raise TypeError(f"{what} must be an iterable of (key, value) pairs, "
                        f"not {type(headers).__name__}")
    try:
        out = list(cast(Iterable[Any], headers))
    except TypeError:
        raise TypeError(f"{what} must be an iterable of (key, value) pairs, "
                        f"not {type(headers).__name__}") from None
    for i, h in enumerate(out):
        if not isinstance(h, (tuple, list)) or len(h) != 2:
            raise TypeError(f"{what}[{i}] must be a (key, value) pair, not {h!r}")
        hk, hv = h
        if not isinstance(hk, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"{what}[{i}] key must be str, not {type(hk).__name__}")
        if hv is not None and type(hv) is not bytes:
            _check_bytes(hv, f"{what}[{i}] value")
    return out


class BatchBuilder:
    """Accumulates records and encodes them as one batch (v2) or message set (v0/v1).

    ``append`` returns the offset each record gets (the next one, or an
    explicit larger ``offset``: gaps are how compacted data looks).  ``build``
    returns the bytes.  For magic 0/1 an uncompressed builder writes one
    message per record; a compressed one writes a single wrapper message.
    ``LogAppendTime`` stamps the batch (or each v1 message / the wrapper) with
    ``log_append_time`` (now when None); v2 records keep their own deltas, as
    a broker leaves them.  ``delete_horizon`` (ms) sets v2 attribute bit 6 and
    becomes the base timestamp, as Kafka's log cleaner writes it.
    """

    def __init__(self, magic: int = 2, compression: Union[str, int] = "none", *,
                 base_offset: int = 0, timestamp_type: str = "CreateTime",
                 log_append_time: Optional[int] = None, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 is_transactional: bool = False, partition_leader_epoch: int = -1,
                 delete_horizon: Optional[int] = None,
                 compression_level: Optional[int] = None) -> None:
        if magic not in (0, 1, 2):
            raise UnsupportedVersionError(f"magic {magic} is not a Kafka record format; use 0, 1 or 2")
        self.magic = magic
        self.codec = _compression.codec_id(compression)
        if self.codec == 4 and magic < 2:
            raise UnsupportedCodecError(
                f"zstd needs magic 2 record batches; magic {magic} cannot carry it")
        if timestamp_type not in _TS_TYPES:
            raise ValueError(f"timestamp_type must be 'CreateTime' or 'LogAppendTime', "
                             f"not {timestamp_type!r}")
        if magic == 0 and timestamp_type != "CreateTime":
            raise ValueError("magic 0 messages have no timestamps; use magic 1 or 2 for LogAppendTime")
        if magic < 2 and (producer_id != -1 or producer_epoch != -1 or base_sequence != -1
                          or is_transactional or partition_leader_epoch != -1
                          or delete_horizon is not None):
            raise ValueError(f"magic {magic} messages have no producer id/epoch/sequence, "
                             "transactions, leader epoch or delete horizon; use magic 2")
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = bool(is_transactional)
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon = delete_horizon
        self.compression_level = compression_level
        self.is_control = False
        self._offsets: List[int] = []
        self._timestamps: List[int] = []
        self._keys: List[Optional[Bytes]] = []
        self._values: List[Optional[Bytes]] = []
        self._headers: List[Optional[List[Header]]] = []

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def last_offset(self) -> Optional[int]:
        """The offset of the last appended record, or None."""
        return self._offsets[-1] if self._offsets else None

    def append(self, value: Optional[Bytes], key: Optional[Bytes] = None,
               timestamp: Optional[int] = None, headers: Iterable[Header] = (),
               offset: Optional[int] = None) -> int:
        """Add a record; returns its offset.  ``value=None`` is a tombstone."""
        offsets = self._offsets
        if offset is None:
            offset = offsets[-1] + 1 if offsets else self.base_offset
        elif type(offset) is not int:
            offset = _check_int(offset, "offset")
        if offset < self.base_offset or (offsets and offset <= offsets[-1]):
            raise ValueError(f"offset {offset} must be >= base offset {self.base_offset} and above "
                             f"the previous offset {offsets[-1] if offsets else None} "
                             "(offsets increase monotonically)")
        if offset - self.base_offset > _INT32_MAX and self.magic == 2:
            raise ValueError(f"offset {offset} is more than 2^31-1 past base offset "
                             f"{self.base_offset}; start a new batch")
        if value is not None and type(value) is not bytes:
            _check_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            _check_bytes(key, "key")
        header_list: Optional[List[Header]] = _check_headers(headers) if headers else None
        if header_list and self.magic < 2:
            raise ValueError(f"magic {self.magic} messages cannot carry headers; use magic 2")
        if timestamp is None:
            timestamp = -1 if self.magic == 0 else _now_ms()
        elif type(timestamp) is not int or not _INT64_MIN <= timestamp <= _INT64_MAX:
            timestamp = _check_int(timestamp, "timestamp")
        offsets.append(offset)
        self._timestamps.append(timestamp)
        self._keys.append(key)
        self._values.append(value)
        self._headers.append(header_list or None)
        return offset

    def build(self, *, last_offset: Optional[int] = None) -> bytes:
        """Encode the records appended so far.

        ``last_offset`` (v2 only) may lie past the last record, as in batches
        the log cleaner has thinned; an empty v2 batch is then legal too.
        An empty v0/v1 builder yields ``b""``.
        """
        if self.magic == 2:
            return self._build_v2(last_offset)
        if last_offset is not None:
            raise ValueError("last_offset is only meaningful for magic 2 batches")
        return self._build_legacy()

    # ----------------------------------------------------------------------- v2

    def _attributes(self) -> int:
        attrs = self.codec
        if self.timestamp_type == "LogAppendTime":
            attrs |= 0x08
        if self.is_transactional:
            attrs |= 0x10
        if self.is_control:
            attrs |= 0x20
        if self.delete_horizon is not None:
            attrs |= 0x40
        return attrs

    def _build_v2(self, last_offset: Optional[int]) -> bytes:
        offsets, timestamps = self._offsets, self._timestamps
        n = len(offsets)
        base = self.base_offset
        if last_offset is None:
            last_delta = offsets[-1] - base if n else 0
        else:
            if (n and last_offset < offsets[-1]) or last_offset < base \
                    or last_offset - base > _INT32_MAX:
                raise ValueError(f"last_offset {last_offset} must lie between the last record's "
                                 f"offset and base offset + 2^31-1")
            last_delta = last_offset - base
        if n:
            first_ts = timestamps[0]
            max_ts = max(timestamps)
        else:
            first_ts = max_ts = -1
        base_ts = self.delete_horizon if self.delete_horizon is not None else first_ts
        if self.timestamp_type == "LogAppendTime":
            max_ts = self.log_append_time if self.log_append_time is not None else _now_ms()
        records = _encode_records_v2([o - base for o in offsets],
                                     [t - base_ts for t in timestamps],
                                     self._keys, self._values, self._headers) if n else b""
        if self.codec:
            records = _compression.compress(self.codec, records, magic=2,
                                            level=self.compression_level)
        out = bytearray(_V2_HEADER_SIZE + len(records))
        _V2_HEADER.pack_into(out, 0, base, len(out) - 12, self.partition_leader_epoch, 2, 0,
                             self._attributes(), last_delta, base_ts, max_ts, self.producer_id,
                             self.producer_epoch, self.base_sequence, n)
        out[_V2_HEADER_SIZE:] = records
        struct.pack_into(">I", out, 17, _crc32c(out, _V2_CRC_START))
        return bytes(out)

    # ------------------------------------------------------------------- v0/v1

    def _build_legacy(self) -> bytes:
        n = len(self._offsets)
        if not n:
            return b""
        magic = self.magic
        lat = self.timestamp_type == "LogAppendTime"
        lat_time = -1     # the batch's timestamp under LogAppendTime (unused otherwise)
        if lat:
            lat_time = self.log_append_time if self.log_append_time is not None else _now_ms()
        if not self.codec:
            out = bytearray()
            for i in range(n):
                ts = lat_time if lat else self._timestamps[i]
                _append_message(out, self._offsets[i], magic, 0x08 if lat else 0, ts,
                                self._keys[i], self._values[i])
            return bytes(out)
        # Inner messages keep CreateTime, as a broker's LogAppendTime stamping leaves
        # them; readers take the wrapper's type and timestamp.
        inner = bytearray()
        first = self._offsets[0]
        for i in range(n):
            inner_offset = self._offsets[i] - first if magic == 1 else self._offsets[i]
            _append_message(inner, inner_offset, magic, 0, self._timestamps[i],
                            self._keys[i], self._values[i])
        payload = _compression.compress(self.codec, inner, magic=magic,
                                        level=self.compression_level)
        if magic == 0:
            wrapper_ts = -1
        elif lat:
            wrapper_ts = lat_time
        else:
            wrapper_ts = max(self._timestamps)
        out = bytearray()
        _append_message(out, self._offsets[-1], magic, self.codec | (0x08 if lat else 0),
                        wrapper_ts, None, payload)
        return bytes(out)


def _append_message(out: bytearray, offset: int, magic: int, attributes: int, timestamp: int,
                    key: Optional[Bytes], value: Optional[Bytes]) -> None:
    start = len(out)
    klen = -1 if key is None else memoryview(key).nbytes
    vlen = -1 if value is None else memoryview(value).nbytes
    size = 14 + (8 if magic == 1 else 0) + max(klen, 0) + max(vlen, 0)
    out += _LEGACY_PREFIX.pack(offset, size, 0, magic, attributes)
    if magic == 1:
        out += struct.pack(">q", timestamp)
    out += struct.pack(">i", klen)
    if key is not None:
        out += key
    out += struct.pack(">i", vlen)
    if value is not None:
        out += value
    struct.pack_into(">I", out, start + 12, K.crc32(out, start + 16, -1, 0))


# ------------------------------------------------------------------ control batches

def control_batch(marker: str, *, base_offset: int = 0, producer_id: int,
                  producer_epoch: int, coordinator_epoch: int = 0,
                  timestamp: Optional[int] = None, partition_leader_epoch: int = -1) -> bytes:
    """An end-transaction marker batch (``"commit"`` or ``"abort"``), as a coordinator writes it.

    A transactional control batch holding one record: key = version 0 + the
    marker type (int16s), value = version 0 + ``coordinator_epoch`` (int16, int32).
    """
    try:
        ctype = _CONTROL_TYPES[marker]
    except KeyError:
        raise ValueError(f"marker must be 'commit' or 'abort', not {marker!r}") from None
    b = BatchBuilder(2, "none", base_offset=base_offset, producer_id=producer_id,
                     producer_epoch=producer_epoch, is_transactional=True,
                     partition_leader_epoch=partition_leader_epoch)
    b.is_control = True
    b.append(struct.pack(">hi", 0, coordinator_epoch), key=struct.pack(">hh", 0, ctype),
             timestamp=_now_ms() if timestamp is None else timestamp)
    return b.build()


# ------------------------------------------------------------------------ re-basing

def set_base_offset(batch: Bytes, base_offset: int) -> bytes:
    """Shift the offsets of ``batch`` so its first base offset becomes ``base_offset``.

    The base offset is Kafka's ``RecordBatch.baseOffset()``: a v2 batch's
    header field, a legacy message's offset, or a compressed wrapper's first
    inner offset.

    ``batch`` is one or more concatenated v2 batches or v0/v1 messages (a
    producer's output before a broker assigns offsets); every entry moves by
    the same amount.  Offsets in v2 headers, top-level messages and magic-1
    wrappers are outside the CRC and are patched in place; magic-0 wrappers
    hold absolute inner offsets inside the compressed payload, so those are
    decompressed, re-based and recompressed (what a broker does).
    """
    src = memoryview(batch).cast("B") if not isinstance(batch, (bytes, bytearray)) else batch
    out = bytearray(src)
    n = len(out)
    pos = 0
    delta = None
    parts: List[bytes] = []
    while pos < n:
        if n - pos < 17:
            raise CorruptRecordError("truncated batch header", position=pos, reason="truncated")
        offset, length = struct.unpack_from(">qi", out, pos)
        end = pos + 12 + length
        if length < 14 or end > n:
            raise CorruptRecordError(f"batch length {length} does not fit the buffer",
                                     position=pos, offset=offset, reason="length")
        magic = out[pos + 16]
        attrs = out[pos + 17]
        if delta is None:
            first = offset
            if magic < 2 and attrs & 0x07:
                first = _wrapper_first_offset(out[pos:end], magic, pos)
            delta = base_offset - first
        entry = out[pos:end]
        if magic == 0 and attrs & 0x07:
            entry = bytearray(_rebase_magic0_wrapper(entry, delta, pos))
        elif magic > 2:
            raise CorruptRecordError(f"invalid magic {magic}", position=pos + 16, offset=offset,
                                     reason="magic")
        struct.pack_into(">q", entry, 0, offset + delta)
        parts.append(bytes(entry))
        pos = end
    return b"".join(parts)


def _wrapper_value(entry: Bytes, magic: int, pos: int) -> Tuple[int, Optional[bytes], int]:
    """``(attributes, key, value position)`` of a legacy wrapper message."""
    p = 18 + (8 if magic == 1 else 0)
    key_len = struct.unpack_from(">i", entry, p)[0]
    key = None if key_len < 0 else bytes(entry[p + 4:p + 4 + key_len])
    p += 4 + max(key_len, 0)
    vlen = struct.unpack_from(">i", entry, p)[0]
    if vlen < 0 or p + 4 + vlen != len(entry):
        raise CorruptRecordError(f"magic {magic} wrapper has an invalid value length",
                                 position=pos, reason="length")
    return entry[17], key, p + 4


def _inner_messages(entry: Bytes, magic: int, pos: int) -> Tuple[bytearray, List[Tuple[int, int]]]:
    """Decompress a wrapper: the inner message set and its ``(position, offset)`` pairs."""
    attrs, _key, vpos = _wrapper_value(entry, magic, pos)
    try:
        inner = bytearray(_compression.decompress(attrs & 0x07, entry[vpos:], magic=magic))
    except CorruptRecordError as exc:
        raise exc.at(position_delta=pos) from None
    found = []
    q = 0
    while q + 12 <= len(inner):
        o, ln = struct.unpack_from(">qi", inner, q)
        found.append((q, o))
        q += 12 + max(ln, 0)
    if not found:
        raise CorruptRecordError("compressed wrapper holds no messages", position=pos,
                                 reason="compression")
    return inner, found


def _wrapper_first_offset(entry: Bytes, magic: int, pos: int) -> int:
    _, found = _inner_messages(entry, magic, pos)
    if magic == 0:
        return found[0][1]
    wrapper_offset: int = struct.unpack_from(">q", entry, 0)[0]
    return wrapper_offset - found[-1][1] + found[0][1]


def _rebase_magic0_wrapper(entry: bytearray, delta: int, pos: int) -> bytes:
    attrs, key, _ = _wrapper_value(entry, 0, pos)
    inner, found = _inner_messages(entry, 0, pos)
    for q, o in found:
        struct.pack_into(">q", inner, q, o + delta)
    out = bytearray()
    offset = struct.unpack_from(">q", entry, 0)[0]
    _append_message(out, offset, 0, attrs, -1, key,
                    _compression.compress(attrs & 0x07, inner, magic=0))
    return bytes(out)
