"""Quick decode benchmark: kafkawire (fast, pure) vs aiokafka's Cython record codecs.

For tuning the record kernels; the full comparison (all peers, Java) is
``benchmarks/bench_records.py``.  Run: ``python benchmarks/bench_decode_quick.py [--quick]``.
Workloads (uncompressed, ~16 KiB batches): W1 1M records of 16-byte key/100-byte
value; W6 2M 10-byte values; W8 W1 with 3 headers.  Measures full decode
touching every field, header-only iteration, and CRC validation.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafkawire import _kernels  # noqa: E402
from kafkawire import _pure  # noqa: E402,F401

BATCH_BYTES = 16 * 1024


def build(n, key_size, value_size, nheaders):
    from kafkawire._pure.records import encode_records_v2
    from kafkawire._pure.crc import crc32c
    import struct
    key = b"k" * key_size if key_size else None
    value = b"v" * value_size
    headers = [(f"header-{i}", b"h" * 8) for i in range(nheaders)]
    rec = encode_records_v2([0], [0], [key], [value], [headers])
    per_batch = max(1, (BATCH_BYTES - 61) // len(rec))
    parts = []
    offset = 0
    ts = 1_700_000_000_000
    while offset < n:
        count = min(per_batch, n - offset)
        body = encode_records_v2(list(range(count)), list(range(count)), [key] * count,
                                 [value] * count, [headers] * count)
        tail = struct.pack(">hiqqqhii", 0, count - 1, ts, ts + count - 1, -1, -1, -1, count) + body
        parts.append(struct.pack(">qiibI", offset, 49 + len(tail) - 40, -1, 2, crc32c(tail)) + tail)
        offset += count
    return b"".join(parts)


CLOCK = time.perf_counter


def timeit(fn, repeat, min_sample=0.05, min_total=0.3):
    """Best per-call time over at least ``repeat`` samples and ``min_total`` seconds.

    A sample repeats ``fn`` until it lasts ``min_sample`` (a header-only pass
    takes a few ms: timed alone it is mostly noise).  ``--cpu``: process CPU
    time, steadier on a busy machine.
    """
    t = CLOCK()
    fn()
    first = CLOCK() - t
    calls = max(1, int(min_sample / max(first, 1e-6)))
    best = first if calls == 1 else float("inf")
    spent, samples = first, (1 if calls == 1 else 0)
    while samples < repeat or spent < min_total:
        t = CLOCK()
        for _ in range(calls):
            fn()
        dt = CLOCK() - t
        spent += dt
        best = min(best, dt / calls)
        samples += 1
    return best


def kw_decode(data):
    import kafkawire
    n = 0
    for batch in kafkawire.iter_batches(data):
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def kw_headers(data):
    import kafkawire
    n = 0
    for batch in kafkawire.iter_batches(data):
        # the same five header fields as aio_headers (last_offset ~ next_offset)
        batch.base_offset, batch.last_offset, batch.max_timestamp, batch.producer_id, batch.compression
        n += 1
    return n


def kw_crc(data):
    import kafkawire
    for batch in kafkawire.iter_batches(data, verify_crc=True):
        pass


def _memory_records_decode(MemoryRecords, data):
    """Full decode through aiokafka's or kafka-python's MemoryRecords (they share that API)."""
    mr = MemoryRecords(data)
    n = 0
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def aio_decode(data):
    from aiokafka.record.memory_records import MemoryRecords
    return _memory_records_decode(MemoryRecords, data)


def kp_decode(data):
    from kafka.record.memory_records import MemoryRecords
    return _memory_records_decode(MemoryRecords, data)


def aio_headers(data):
    from aiokafka.record.memory_records import MemoryRecords
    mr = MemoryRecords(data)
    n = 0
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        batch.base_offset, batch.next_offset, batch.max_timestamp, batch.producer_id, batch.compression_type
        n += 1
    return n


def aio_crc(data):
    from aiokafka.record.memory_records import MemoryRecords
    mr = MemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        batch.validate_crc()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pure", action="store_true", help="also time the pure backend")
    ap.add_argument("--cpu", action="store_true", help="time with process CPU time")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W6")
    args = ap.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time
    scale = 10 if args.quick else 1
    from aiokafka.record import memory_records
    from aiokafka.record import _crecords
    assert memory_records.MemoryRecords is _crecords.MemoryRecords, "aiokafka Cython not in use"
    workloads = {"W1": (1_000_000 // scale, 16, 100, 0), "W6": (2_000_000 // scale, 0, 10, 0),
                 "W8": (1_000_000 // scale, 16, 100, 3)}
    repeat = args.repeat
    if args.only:
        workloads = {k: v for k, v in workloads.items() if k in args.only.split(",")}
    print(f"crc32c impl: {_kernels._load('fast')['crc'].crc32c_impl()}")
    print(f"{'work':4} {'what':8} {'kw fast':>14} {'aiokafka':>14} {'ratio':>6}")
    for name, spec in workloads.items():
        data = build(*spec)
        n = spec[0]
        mb = len(data) / 1e6
        _kernels.use("fast")
        assert kw_decode(data) == aio_decode(data) == n
        for what, kw, aio, unit in (("decode", kw_decode, aio_decode, "rec"),
                                    ("headers", kw_headers, aio_headers, "rec"),
                                    ("crc", kw_crc, aio_crc, "MB")):
            tk = timeit(lambda: kw(data), repeat)
            ta = timeit(lambda: aio(data), repeat)
            if unit == "rec":
                fk, fa = f"{n / tk / 1e6:8.2f} Mrec/s", f"{n / ta / 1e6:8.2f} Mrec/s"
            else:
                fk, fa = f"{mb / tk / 1e3:8.2f} GB/s", f"{mb / ta / 1e3:8.2f} GB/s"
            print(f"{name:4} {what:8} {fk:>14} {fa:>14} {ta / tk:6.2f}x", flush=True)
        if args.pure:
            _kernels.use("pure")
            tp = timeit(lambda: kw_decode(data), 1)
            tkp = timeit(lambda: kp_decode(data), 1)
            print(f"{name:4} {'pure':8} {n / tp / 1e6:8.2f} Mrec/s {n / tkp / 1e6:8.2f} Mrec/s "
                  f"{tkp / tp:6.2f}x  (kafkawire pure vs kafka-python)", flush=True)
            _kernels.use("fast")


if __name__ == "__main__":
    main()
