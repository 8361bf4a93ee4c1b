"""Columnar decode throughput vs the record-object path and aiokafka, same files, same run.

Workloads (as in the records benchmark): W1 1M records of 16-byte key /
100-byte value in ~16 KiB v2 batches, uncompressed; W2 the same with lz4,
W3 zstd; W8 W1 with 3 headers per record.  Contenders, each decoding the
same bytes and touching every field:

* ``columnar``: :func:`kafkawire.records.columnar.iter_column_chunks` with the
  default chunking (65,536 records / 64 MiB) on the fast kernel; ``+arrow``
  also turns every chunk into a Spark-schema ``pyarrow.RecordBatch``.
* ``columnar pure``: the same on the pure-Python kernel (smaller slice).
* ``records``: ``kafkawire.iter_batches`` → ``Record`` objects (fast kernel).
* ``aiokafka``: aiokafka's Cython ``MemoryRecords`` → records (its extension
  classes are asserted to be the ones in use).

Each rate is the best of ``--repeat`` runs, interleaved so that load from
other processes hits every contender alike; both wall-clock and process CPU
time are measured (on a shared machine the CPU-time rates are the steadier
ones; the ratios use CPU time, the wall-clock ratio is shown beside them).

Run: ``python benchmarks/bench_columnar.py [--quick] [--repeat N]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafkawire import _kernels  # noqa: E402
import kafkawire  # noqa: E402
from kafkawire.records.columnar import iter_column_chunks  # noqa: E402

KEY = b"k" * 16
BATCH_BYTES = 16 * 1024


def build(n: int, codec: int, headers: bool) -> bytes:
    """W1-like data written with aiokafka's Cython builder (a batch per ~16 KiB)."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    hs = [("trace-id", b"0123456789abcdef"), ("source", b"bench"), ("n", b"1")] if headers else []
    per = max(1, BATCH_BYTES // (16 + 100 + 8 + (45 if headers else 0)))
    out = []
    offset = 0
    ts = 1_700_000_000_000
    while offset < n:
        b = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 24)
        for i in range(min(per, n - offset)):
            value = (b"value-%012d-" % (offset + i)).ljust(100, b"x")
            b.append(i, ts + offset + i, KEY, value, hs)
        raw = bytearray(b.build())
        raw[0:8] = offset.to_bytes(8, "big")
        out.append(bytes(raw))
        offset += per
    return b"".join(out)


def columnar(data: bytes) -> int:
    n = 0
    for chunk in iter_column_chunks(data, include_headers=True):
        n += len(chunk)
    return n


def columnar_arrow(data: bytes) -> int:
    n = 0
    for chunk in iter_column_chunks(data, include_headers=True):
        n += chunk.to_arrow(topic="bench", partition=0).num_rows
    return n


def records(data: bytes) -> int:
    n = 0
    for batch in kafkawire.iter_batches(data):
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def aiokafka_records(data: bytes) -> int:
    from aiokafka.record.memory_records import MemoryRecords

    n = 0
    mr = MemoryRecords(data)
    while mr.has_next():
        for r in mr.next_batch():
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def check_aiokafka_is_cython() -> None:
    from aiokafka.record import memory_records, default_records

    assert "_crecords" in memory_records.MemoryRecords.__module__, memory_records.MemoryRecords
    assert "_crecords" in default_records.DefaultRecordBatch.__module__


def with_backend(name: str, fn):
    def run(data: bytes) -> int:
        previous = _kernels.backend
        _kernels.use(name)
        try:
            return fn(data)
        finally:
            _kernels.use(previous)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100k records instead of 1M")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workloads", default="W1,W2,W3,W8")
    args = ap.parse_args()
    if not _kernels.fast_available():
        sys.exit(f"the compiled kernels are not built: {_kernels.fast_error}")
    check_aiokafka_is_cython()
    n = 100_000 if args.quick else 1_000_000
    workloads = {"W1": (0, False), "W2": (3, False), "W3": (4, False), "W8": (0, True)}
    contenders = [
        ("columnar", with_backend("fast", columnar), 1),
        ("columnar+arrow", with_backend("fast", columnar_arrow), 1),
        ("columnar pure", with_backend("pure", columnar), 10),
        ("records (kafkawire)", with_backend("fast", records), 1),
        ("aiokafka (Cython)", aiokafka_records, 1),
    ]
    print(f"kafkawire {kafkawire.__version__}, {n:,} records per workload, best of {args.repeat}")
    print(f"| workload | contender | records/s (CPU) | MB/s (CPU) | records/s (wall) "
          f"| vs aiokafka (CPU) | vs aiokafka (wall) | vs records (CPU) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for wl in args.workloads.split(","):
        codec, headers = workloads[wl]
        data = build(n, codec, headers)
        best = {}
        for _ in range(args.repeat):
            for name, fn, shrink in contenders:
                if shrink > 1 and name in best and args.repeat > 2 and _ > 1:
                    continue  # the pure kernel is slow; two runs are enough
                sub = data if shrink == 1 else _prefix(data, n // shrink)
                c0, t0 = time.process_time(), time.perf_counter()
                got = fn(sub)
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                expect = n if shrink == 1 else n // shrink
                assert abs(got - expect) <= BATCH_BYTES, (name, got, expect)
                old = best.get(name, (0, 0, 0))
                best[name] = (max(old[0], got / cpu), max(old[1], len(sub) / cpu / 1e6),
                              max(old[2], got / wall))
        aio = best["aiokafka (Cython)"]
        rec = best["records (kafkawire)"]
        for name, _fn, _s in contenders:
            cpu_rate, mbs, wall_rate = best[name]
            print(f"| {wl} | {name} | {cpu_rate:,.0f} | {mbs:,.0f} | {wall_rate:,.0f} "
                  f"| {cpu_rate / aio[0]:.1f}x | {wall_rate / aio[2]:.1f}x | {cpu_rate / rec[0]:.1f}x |")
        sys.stdout.flush()


def _prefix(data: bytes, records: int) -> bytes:
    """The leading whole batches holding about ``records`` records."""
    pos = 0
    count = 0
    while pos < len(data) and count < records:
        size = int.from_bytes(data[pos + 8:pos + 12], "big")
        count += int.from_bytes(data[pos + 57:pos + 61], "big")
        pos += 12 + size
    return data[:pos]


if __name__ == "__main__":
    main()
