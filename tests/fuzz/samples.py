"""Hand-built Kafka record batches and messages for decode tests and fuzz seeds.

Written straight from the format description (Kafka's "Message Format" docs),
independent of kafkawire's encoders, so decoding is checked against bytes
kafkawire did not produce.
"""
from __future__ import annotations

import gzip
import struct
import zlib
from typing import List, Optional, Sequence, Tuple

try:
    import crc32c as _crc32c_lib
except ImportError:  # pragma: no cover
    _crc32c_lib = None

_T = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _T.append(_c)


def crc32c(data: bytes) -> int:
    if _crc32c_lib is not None and len(data) > 4096:   # the same sum, faster for big buffers
        return _crc32c_lib.crc32c(data)
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v: int) -> bytes:
    return uvarint((v << 1) ^ (v >> 63) if v < 0 else v << 1)


def v2_record(offset_delta: int, ts_delta: int, key: Optional[bytes], value: Optional[bytes],
              headers: Sequence[Tuple[str, Optional[bytes]]] = ()) -> bytes:
    body = bytearray(b"\x00")
    body += varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        k = hk.encode()
        body += varint(len(k)) + k
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + bytes(body)


def v2_batch(records: Sequence[bytes] = (), *, base_offset: int = 0, last_offset_delta: Optional[int] = None,
             attributes: int = 0, base_timestamp: int = 1000, max_timestamp: int = 1000,
             producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             partition_leader_epoch: int = -1, count: Optional[int] = None,
             payload: Optional[bytes] = None, crc: Optional[int] = None) -> bytes:
    """A v2 batch around already-encoded records (or a given, e.g. compressed, payload)."""
    if payload is None:
        payload = b"".join(records)
    if count is None:
        count = len(records)
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    tail = struct.pack(">hiqqqhii", attributes, last_offset_delta, base_timestamp, max_timestamp,
                       producer_id, producer_epoch, base_sequence, count) + payload
    c = crc32c(tail) if crc is None else crc
    return struct.pack(">qiibI", base_offset, 9 + len(tail), partition_leader_epoch, 2, c) + tail


def legacy_message(offset: int, value: Optional[bytes], key: Optional[bytes] = None, *,
                   magic: int = 1, attributes: int = 0, timestamp: int = 1000) -> bytes:
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def legacy_wrapper(offset: int, inner: bytes, *, magic: int = 1, codec: int = 1,
                   timestamp: int = 1000, log_append_time: bool = False) -> bytes:
    """A gzip (codec 1) compressed wrapper around an inner message set."""
    assert codec == 1
    payload = gzip.compress(inner)
    attrs = codec | (0x08 if log_append_time else 0)
    return legacy_message(offset, payload, None, magic=magic, attributes=attrs,
                          timestamp=timestamp)


def control_record(commit: bool, coordinator_epoch: int) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return v2_record(0, 0, key, value)


def seeds() -> List[bytes]:
    """Small valid buffers of every kind (fuzz seeds and flip/truncation bases)."""
    recs = [v2_record(0, 0, b"key0", b"value0", [("h1", b"x"), ("h2", None)]),
            v2_record(1, 5, None, b""), v2_record(3, -2, b"", None)]
    out = [
        v2_batch(recs, base_offset=100, last_offset_delta=3, producer_id=7, producer_epoch=1,
                 base_sequence=10, attributes=0x10),
        v2_batch([], base_offset=5, last_offset_delta=2, base_timestamp=-1, max_timestamp=-1),
        v2_batch(recs, attributes=0x01, last_offset_delta=3, payload=gzip.compress(b"".join(recs)),
                 count=3),
        v2_batch([control_record(True, 3)], attributes=0x30, producer_id=9, producer_epoch=0),
        legacy_message(7, b"hello", b"k", magic=0),
        legacy_message(8, b"world", None, magic=1, timestamp=1234),
        legacy_wrapper(12, legacy_message(0, b"a", magic=1) + legacy_message(2, b"b", magic=1),
                       magic=1, log_append_time=True, timestamp=999),
        legacy_wrapper(4, legacy_message(3, b"a", magic=0) + legacy_message(4, b"b", magic=0),
                       magic=0),
    ]
    out.append(b"".join(out))
    return out


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def snappy_literal(data: bytes) -> bytes:
    """A raw snappy block holding ``data`` as one literal (up to 64 KiB)."""
    n = len(data)
    head = uvarint(n)
    if n == 0:
        return head
    if n <= 60:
        return head + bytes([(n - 1) << 2]) + data
    if n <= 256:
        return head + bytes([60 << 2, n - 1]) + data
    return head + bytes([61 << 2]) + struct.pack("<H", n - 1) + data


def hostile() -> List[Tuple[str, bytes]]:
    """Small buffers built to hurt (named): Kafka's legacy-wrapper corner cases, nested
    wrappers, payloads of many empty compressed members.  Seeds for the hostile
    hypothesis cases and the atheris targets; see also :func:`bombs`."""
    inner3 = b"".join(legacy_message(i, b"v%d" % i) for i in range(3))
    recs = [v2_record(i, i, b"k", b"v%d" % i) for i in range(3)]
    empty_gz = gzip.compress(b"", mtime=0)
    empty_snappy_block = struct.pack(">i", 1) + b"\x00"      # raw snappy of b""
    return [
        ("wrapper_offset0", legacy_wrapper(0, inner3)),
        ("wrapper_below_last", legacy_wrapper(1, inner3)),
        ("wrapper_nested", legacy_wrapper(30, legacy_wrapper(0, inner3))),
        ("wrapper_nested_deep", legacy_wrapper(30, legacy_wrapper(0, legacy_wrapper(0, inner3)))),
        ("wrapper_empty", legacy_message(4, gzip.compress(b"", mtime=0), attributes=1)),
        ("wrapper_null_value", legacy_message(4, None, attributes=1)),
        ("gzip_members", v2_batch(recs, attributes=1, count=3,
                                  payload=gzip.compress(b"".join(recs), mtime=0) + empty_gz * 300)),
        ("gzip_only_empty_members", v2_batch(recs, attributes=1, count=3, payload=empty_gz * 50)),
        ("snappy_empty_blocks", v2_batch(recs, attributes=2, count=3, payload=(
            XERIAL_HEADER + struct.pack(">i", len(snappy_literal(b"".join(recs))))
            + snappy_literal(b"".join(recs)) + empty_snappy_block * 300))),
        ("count_past_records", v2_batch(recs, count=1 << 30)),
        ("count_negative", v2_batch(recs, count=-5)),
    ]


def bombs() -> List[Tuple[str, bytes]]:
    """Compressed batches that inflate far past the default 256 MiB bound (a few hundred KB
    to a few MB each) and a nested legacy bomb; for the memory-bound check."""
    gz = gzip.compress(bytes(1 << 20), mtime=0) * 300    # 300 members of 1 MiB of zeros
    inner_bomb = legacy_wrapper(0, legacy_message(0, bytes(900_000)))  # inflates 900 KB
    # followed level by level (each level under the bound) this would be 300 * 300 * 900 KB
    middle = legacy_wrapper(299, inner_bomb * 300)
    empty_gz = gzip.compress(b"", mtime=0)
    return [
        ("gzip_bomb_v2", v2_batch([], attributes=1, count=1, payload=gz)),
        ("gzip_bomb_v1", legacy_message(9, gz, attributes=1)),
        ("nested_bomb_v1", legacy_wrapper(40, inner_bomb * 300)),
        ("nested_bomb_deep_v1", legacy_wrapper(299, middle * 300)),
        ("gzip_members_2mb", v2_batch([], attributes=1, count=1,
                                      payload=empty_gz * ((2 << 20) // len(empty_gz)))),
    ]
