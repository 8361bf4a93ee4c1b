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

Run: ``python benchmarks/bench_columnar.py [--quick] [--repeat N] [--results PATH]`` (the
figures also go to ``benchmarks/results/columnar[-quick].json``).
"""
from __future__ import annotations

import argparse
import sys

import _harness as H
from kafkawire import _kernels
import kafkawire
from kafkawire.records.columnar import iter_column_chunks

KEY = b"k" * 16
BATCH_BYTES = H.BATCH_BYTES


def build(n: int, codec: int, headers: bool) -> bytes:
    """W1-like data written with aiokafka's Cython builder (a batch per ~16 KiB)."""
    hs = [("trace-id", b"0123456789abcdef"), ("source", b"bench"), ("n", b"1")] if headers else []
    per = max(1, BATCH_BYTES // (16 + 100 + 8 + (45 if headers else 0)))
    return H.aiokafka_v2_batches(n, per, codec, KEY,
                                 lambda i: (b"value-%012d-" % i).ljust(100, b"x"), hs)


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
    n = 0
    mr = H.aiokafka_memory_records()(data)
    while mr.has_next():
        for r in mr.next_batch():
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


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
    H.add_results_option(ap)
    args = ap.parse_args()
    H.require_fast()
    H.aiokafka_memory_records(cython=True)
    results = H.Results("columnar", quick=args.quick)
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
                sub = data if shrink == 1 else H.prefix_by_records(data, n // shrink)
                cpu, wall, got = H.cpu_and_wall(lambda: fn(sub))
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
            results.add(f"{wl} {('none', 'gzip', 'snappy', 'lz4', 'zstd')[codec]}"
                        f"{' +headers' if headers else ''}",
                        name, "full decode", cpu_rate, "records/s (CPU)")
        sys.stdout.flush()
    results.set_ratios("aiokafka (Cython)")
    results.write(args.results)


if __name__ == "__main__":
    main()
