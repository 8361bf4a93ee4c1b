"""Batch cases for the encoder tests: kafkawire builds them and states what Kafka must read.

Each case is ``(name, data, expected)`` where ``expected`` lists, per top-level
batch, the fields Kafka's ``RecordBatch``/``Record`` report (the JSON shape
printed by ``tests/java/RecordsReader.java``).
"""
from __future__ import annotations

import base64
import random
import struct
from typing import List, Optional

from kafkawire.records.builder import BatchBuilder, control_batch, set_base_offset

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
T0 = 1_700_000_000_000
LAT = 1_700_000_999_999
HEADERS = [("h1", b"x"), ("", b""), ("nul", None), ("\u00fcn\u00ef\U0001F600", b"\x00\xff")]


def b64(v: Optional[bytes]) -> Optional[str]:
    return None if v is None else base64.b64encode(bytes(v)).decode()


def sample_records(magic: int, n: int = 8, seed: int = 1, offsets=None):
    """(value, key, timestamp, headers, offset) tuples covering null/empty keys and values."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        if i == 0:
            key, value = None, b"v0"
        elif i == 1:
            key, value = b"", b""
        elif i == 2:
            key, value = b"k-tomb", None          # tombstone
        elif i == 3:
            key, value = None, None
        else:
            key = b"key-%d" % i
            value = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 300)))
        ts = T0 + (5 - i) * 1000 if i < 3 else T0 + i * 7   # first != min timestamp
        headers = HEADERS[: i % 5] if magic == 2 else []
        off = None if offsets is None else offsets[i]
        out.append((value, key, ts, headers, off))
    return out


def _legacy_entries(data: bytes):
    pos = 0
    while pos < len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        yield pos, offset, 12 + size
        pos += 12 + size


def _entries(data: bytes):
    return list(_legacy_entries(data))


def expected_for(builder_kwargs: dict, records, data: bytes, *, last_offset=None) -> List[dict]:
    """What Kafka's reader must report for ``data`` built from ``records``."""
    magic = builder_kwargs.get("magic", 2)
    codec = builder_kwargs.get("compression", "none")
    ts_type = builder_kwargs.get("timestamp_type", "CreateTime")
    base = builder_kwargs.get("base_offset", 0)
    lat = ts_type == "LogAppendTime"
    offsets, o = [], base
    for r in records:
        o = r[4] if r[4] is not None else (o if not offsets else offsets[-1] + 1)
        offsets.append(o)
    recs = []
    for (value, key, ts, headers, _), off in zip(records, offsets):
        if magic == 0:
            ts = -1
        elif lat:
            ts = builder_kwargs.get("log_append_time")
        recs.append({"offset": off, "timestamp": ts, "key": b64(key), "value": b64(value),
                     "headers": [[k, b64(v)] for k, v in headers]})
    common = dict(producer_id=-1, producer_epoch=-1, base_sequence=-1, last_sequence=-1,
                  partition_leader_epoch=-1, is_transactional=False, is_control=False,
                  delete_horizon=None)
    if magic == 2:
        pid = builder_kwargs.get("producer_id", -1)
        seq = builder_kwargs.get("base_sequence", -1)
        last = last_offset if last_offset is not None else (offsets[-1] if offsets else base)
        horizon = builder_kwargs.get("delete_horizon")
        first_ts = horizon if horizon is not None else (records[0][2] if records else -1)
        max_ts = LAT if lat else (max(r[2] for r in records) if records else -1)
        if lat:
            max_ts = builder_kwargs["log_append_time"]
        return [dict(common, base_offset=base, last_offset=last, magic=2,
                     compression=codec if records else "none", timestamp_type=ts_type,
                     max_timestamp=max_ts, producer_id=pid,
                     producer_epoch=builder_kwargs.get("producer_epoch", -1),
                     base_sequence=seq,
                     last_sequence=-1 if seq == -1 else (seq + last - base) & 0x7FFFFFFF,
                     partition_leader_epoch=builder_kwargs.get("partition_leader_epoch", -1),
                     is_transactional=builder_kwargs.get("is_transactional", False),
                     delete_horizon=horizon, crc=struct.unpack_from(">I", data, 17)[0],
                     size=len(data), record_count=len(records), first_timestamp=first_ts,
                     records=recs)]
    ts_name = "NoTimestampType" if magic == 0 else ts_type
    entries = list(_legacy_entries(data))
    if codec == "none":
        out = []
        for (pos, off, size), rec in zip(entries, recs):
            out.append(dict(common, base_offset=off, last_offset=off, magic=magic,
                            compression="none", timestamp_type=ts_name,
                            max_timestamp=rec["timestamp"],
                            crc=struct.unpack_from(">I", data, pos + 12)[0], size=size,
                            record_count=None, records=[rec]))
        return out
    (pos, off, size), = entries
    if magic == 0:
        wrapper_ts = -1
    elif lat:
        wrapper_ts = builder_kwargs["log_append_time"]
    else:
        wrapper_ts = max(r[2] for r in records)
    return [dict(common, base_offset=offsets[0], last_offset=off, magic=magic, compression=codec,
                 timestamp_type=ts_name, max_timestamp=wrapper_ts,
                 crc=struct.unpack_from(">I", data, 12)[0], size=size, record_count=None,
                 records=recs)]


def build(records, *, last_offset=None, **kwargs) -> bytes:
    b = BatchBuilder(**kwargs)
    for value, key, ts, headers, off in records:
        b.append(value, key=key, timestamp=ts, headers=headers, offset=off)
    return b.build(last_offset=last_offset) if last_offset is not None else b.build()


def encoder_cases():
    """Every magic x codec and the special v2 batches, as (name, data, expected)."""
    cases = []

    def add(name, records, last_offset=None, **kwargs):
        data = build(records, last_offset=last_offset, **kwargs)
        cases.append((name, data, expected_for(kwargs, records, data, last_offset=last_offset)))

    big = bytes(random.Random(5).getrandbits(8) for _ in range(1 << 12)) * 256   # 1 MiB
    for magic in (0, 1, 2):
        for codec in CODECS:
            if codec == "zstd" and magic < 2:
                continue
            tag = f"m{magic}_{codec}"
            add(f"{tag}_basic", sample_records(magic), magic=magic, compression=codec,
                base_offset=100)
            add(f"{tag}_gaps", sample_records(magic, 5, offsets=[1000, 1003, 1004, 1010, 1042]),
                magic=magic, compression=codec, base_offset=1000)
            add(f"{tag}_large", [(big, b"big", T0, [], None)], magic=magic, compression=codec,
                base_offset=7)
            if magic > 0:
                add(f"{tag}_lat", sample_records(magic, 6), magic=magic, compression=codec,
                    timestamp_type="LogAppendTime", log_append_time=LAT, base_offset=50)
        if magic == 2:
            for codec in ("none", "lz4"):
                add(f"m2_{codec}_idempotent", sample_records(2, 5), compression=codec,
                    base_offset=20, producer_id=42, producer_epoch=3, base_sequence=7)
                add(f"m2_{codec}_transactional", sample_records(2, 5), compression=codec,
                    base_offset=30, producer_id=43, producer_epoch=1, base_sequence=0,
                    is_transactional=True, partition_leader_epoch=17)
                add(f"m2_{codec}_horizon", sample_records(2, 4), compression=codec,
                    base_offset=40, delete_horizon=T0 + 10_000_000)
                add(f"m2_{codec}_thinned", sample_records(2, 3, offsets=[60, 61, 65]),
                    last_offset=70, compression=codec, base_offset=60)
            add("m2_seq_wrap", sample_records(2, 3), base_offset=0, producer_id=1,
                producer_epoch=0, base_sequence=0x7FFFFFFF)
            add("m2_empty", [], last_offset=99, base_offset=90, producer_id=5, producer_epoch=0,
                base_sequence=3)
    # re-based copies (what a broker does when it assigns offsets to a produce request)
    for name in ("m0_lz4_basic", "m0_gzip_gaps", "m0_none_basic", "m1_snappy_gaps", "m1_none_lat",
                 "m2_zstd_basic", "m2_none_transactional", "m2_empty"):
        _, data, exp = next(c for c in cases if c[0] == name)
        first = exp[0]["base_offset"]
        moved = set_base_offset(data, 5_000_000_000)
        delta = 5_000_000_000 - first
        new_exp = []
        for e, (pos, _o, size) in zip(exp, _entries(moved)):
            e = dict(e, base_offset=e["base_offset"] + delta, last_offset=e["last_offset"] + delta,
                     records=[dict(r, offset=r["offset"] + delta) for r in e["records"]])
            if e["magic"] == 2:
                e["crc"] = struct.unpack_from(">I", moved, pos + 17)[0]
            else:
                e["crc"] = struct.unpack_from(">I", moved, pos + 12)[0]
                e["size"] = size
            new_exp.append(e)
        cases.append((f"rebased_{name}", moved, new_exp))
    for marker, epoch in (("commit", 4), ("abort", 9)):
        data = control_batch(marker, base_offset=200, producer_id=43, producer_epoch=1,
                             coordinator_epoch=epoch, timestamp=T0, partition_leader_epoch=2)
        rec = {"offset": 200, "timestamp": T0,
               "key": b64(struct.pack(">hh", 0, 1 if marker == "commit" else 0)),
               "value": b64(struct.pack(">hi", 0, epoch)), "headers": []}
        cases.append((f"control_{marker}", data, [dict(
            base_offset=200, last_offset=200, magic=2, compression="none",
            timestamp_type="CreateTime", max_timestamp=T0, producer_id=43, producer_epoch=1,
            base_sequence=-1, last_sequence=-1, partition_leader_epoch=2, is_transactional=True,
            is_control=True, delete_horizon=None, crc=struct.unpack_from(">I", data, 17)[0],
            size=len(data), record_count=1, first_timestamp=T0, records=[rec],
            control_type=marker, coordinator_epoch=epoch)]))
    return cases


class JavaRandom:
    """java.util.Random, so Python can rebuild the exact records RecordsWriter.java writes."""

    _MULT, _MASK = 0x5DEECE66D, (1 << 48) - 1

    def __init__(self, seed: int) -> None:
        self.seed = (seed ^ self._MULT) & self._MASK

    def _next(self, bits: int) -> int:
        self.seed = (self.seed * self._MULT + 0xB) & self._MASK
        v = self.seed >> (48 - bits)
        return v - (1 << 32) if v >= 1 << 31 else v

    def next_int(self, bound: Optional[int] = None) -> int:
        if bound is None:
            return self._next(32)
        if bound & -bound == bound:
            return (bound * self._next(31)) >> 31
        while True:
            bits = self._next(31)
            val = bits % bound
            if bits - val + (bound - 1) < (1 << 31):
                return val

    def next_bytes(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            r = self.next_int()
            for _ in range(min(n - len(out), 4)):
                out.append(r & 0xFF)
                r >>= 8
        return bytes(out)


def java_sample_records(magic: int, n: int, seed: int, offsets=None):
    """The records RecordsWriter.appendSample writes, as (value, key, ts, headers, offset)."""
    rnd = JavaRandom(seed)
    out = []
    for i in range(n):
        if i == 0:
            key, value = None, b"v0"
        elif i == 1:
            key, value = b"", b""
        elif i == 2:
            key, value = b"k-tomb", None
        elif i == 3:
            key, value = None, None
        else:
            key = b"key-%d" % i
            value = rnd.next_bytes(rnd.next_int(300))
        ts = -1 if magic == 0 else (T0 + (5 - i) * 1000 if i < 3 else T0 + i * 7)
        headers = HEADERS[: i % 5] if magic == 2 else []
        out.append((value, key, ts, headers, None if offsets is None else offsets[i]))
    return out


def java_big_value() -> bytes:
    return JavaRandom(5).next_bytes(4096) * 256


def java_writer_twins():
    """RecordsWriter's uncompressed cases rebuilt with kafkawire: name -> bytes.

    Uncompressed output is fully determined by the format, so these must be
    byte-identical to what Kafka's MemoryRecordsBuilder wrote.
    """
    out = {}
    for magic in (0, 1, 2):
        tag = f"m{magic}_none"
        out[f"{tag}_basic"] = build(java_sample_records(magic, 8, 1), magic=magic, base_offset=100)
        out[f"{tag}_gaps"] = build(java_sample_records(magic, 5, 2, [1000, 1003, 1004, 1010, 1042]),
                                   magic=magic, base_offset=1000)
        out[f"{tag}_large"] = build([(java_big_value(), b"big", -1 if magic == 0 else T0, [], None)],
                                    magic=magic, base_offset=7)
        if magic > 0:
            out[f"{tag}_lat"] = build(java_sample_records(magic, 6, 3), magic=magic, base_offset=50,
                                      timestamp_type="LogAppendTime", log_append_time=LAT)
            out[f"{tag}_simple"] = build([(b"1", b"a", T0, [], None), (b"2", None, T0 + 1, [], None),
                                          (None, b"c", T0 - 5, [], None)], magic=magic,
                                         base_offset=300)
        if magic == 2:
            out[f"{tag}_idempotent"] = build(java_sample_records(2, 5, 4), base_offset=20,
                                             producer_id=42, producer_epoch=3, base_sequence=7)
            out[f"{tag}_transactional"] = build(java_sample_records(2, 5, 5), base_offset=30,
                                                producer_id=43, producer_epoch=1, base_sequence=0,
                                                is_transactional=True, partition_leader_epoch=17)
            out[f"{tag}_horizon"] = build(java_sample_records(2, 4, 6), base_offset=40,
                                          delete_horizon=T0 + 10_000_000)
    out["control_commit"] = control_batch("commit", base_offset=200, producer_id=43,
                                          producer_epoch=1, coordinator_epoch=4, timestamp=T0,
                                          partition_leader_epoch=2)
    out["control_abort"] = control_batch("abort", base_offset=201, producer_id=43,
                                         producer_epoch=1, coordinator_epoch=9, timestamp=T0 + 1,
                                         partition_leader_epoch=2)
    return out


def kafkawire_view(data: bytes, *, verify_crc: bool = True) -> List[dict]:
    """kafkawire's reading of ``data`` in RecordsReader.java's JSON shape."""
    import kafkawire
    out = []
    for b in kafkawire.iter_batches(data, verify_crc=verify_crc):
        b.validate()
        recs = [{"offset": r.offset, "timestamp": r.timestamp, "key": b64(r.key),
                 "value": b64(r.value), "headers": [[k, b64(v)] for k, v in r.headers]}
                for r in b]
        d = dict(base_offset=b.base_offset, last_offset=b.last_offset, magic=b.magic,
                 compression=b.compression, timestamp_type=b.timestamp_type,
                 max_timestamp=b.max_timestamp, producer_id=b.producer_id,
                 producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
                 last_sequence=b.last_sequence, partition_leader_epoch=b.partition_leader_epoch,
                 is_transactional=b.is_transactional, is_control=b.is_control,
                 delete_horizon=b.delete_horizon, crc=b.crc, size=b.size,
                 record_count=b.record_count, records=recs)
        if b.magic == 2:
            d["first_timestamp"] = b.first_timestamp
        if b.is_control:
            d["control_type"] = b.control_type
            d["coordinator_epoch"] = b.coordinator_epoch
        out.append(d)
    return out
