"""Log benchmark: a partition of ~16 KiB v2 batches (1 GiB; ``--quick``: 64 MiB).

Measures, in one run on the same files:
  * header-only scan (``K.scan_batches``) in GB/s, and batch objects via ``Log.batches()``;
  * scan with CRC verification in GB/s vs the raw CRC-32C speed over the same bytes (bar >= 60%);
  * the verifying batch iteration (``iter_batches(verify_crc=True)``, batch objects) vs the
    ``crc32c`` package's raw speed over the same bytes (bar >= 90%);
  * offset and time lookup latency, median us over 10k random lookups (bar < 50 us);
  * deep record iteration (``Log.records()``, touching every field) in records/s vs Kafka's
    Java ``FileRecords`` iteration over the same files (tests/java/LogFolderHelper.java bench;
    bar >= Java).

    python benchmarks/bench_log.py [--quick] [--no-java] [--backend fast|pure] [--repeat N]
                                   [--results PATH]

The partition is built once and cached under /tmp/kafkawire-bench-log/; the figures also
go to ``benchmarks/results/log[-quick].json``.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import _harness as H
from kafkawire import _kernels as K
from kafkawire import Log, LogWriter, iter_batches

TS = H.T0
RECORDS_PER_BATCH = 140          # 16-byte key + 100-byte value: ~16 KiB batches
SEGMENT_BYTES = 256 << 20


def _template():
    rnd = random.Random(1)
    batch = next(iter(H.v2_batches(RECORDS_PER_BATCH, RECORDS_PER_BATCH,
                                   lambda i: rnd.randbytes(100), key=lambda i: b"key-%012d" % i)))
    return bytearray(batch)


def build(path: str, total_bytes: int) -> None:
    """Write the partition: one template batch re-stamped per append (fresh timestamps, CRC)."""
    tmpl = _template()
    n = total_bytes // len(tmpl)
    tmp = path + ".building"
    if os.path.exists(tmp):
        import shutil
        shutil.rmtree(tmp)
    with LogWriter(tmp, segment_bytes=SEGMENT_BYTES) as w:
        for i in range(n):
            base_ts = TS + i * RECORDS_PER_BATCH
            tmpl[27:35] = base_ts.to_bytes(8, "big")
            tmpl[35:43] = (base_ts + RECORDS_PER_BATCH - 1).to_bytes(8, "big")
            tmpl[17:21] = K.crc32c(tmpl, 21, len(tmpl)).to_bytes(4, "big")
            w.append_batch(tmpl)
    os.rename(tmp, path)


def gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9


best_of = H.best_of


def java_bench(path: str, seconds: float):
    import tempfile
    jars = H.kafka_jars()
    if jars is None:
        return None
    sys.path.insert(0, str(H.ROOT / "tests"))
    from javahelper import JavaRunner
    runner = JavaRunner(jars, tempfile.mkdtemp(prefix="kafkawire-java-"))
    out = runner.run("LogFolderHelper", "bench", path, str(seconds), timeout=1200).stdout.decode().split()
    return float(out[out.index("records_per_sec") + 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="64 MiB partition, fewer lookups")
    ap.add_argument("--no-java", action="store_true", help="skip the Java FileRecords comparison")
    ap.add_argument("--backend", default="fast", choices=("fast", "pure"))
    ap.add_argument("--repeat", type=int, default=7,
                    help="interleaved rounds of the CRC comparisons (best of each); default 7")
    H.add_results_option(ap)
    args = ap.parse_args()
    K.use(args.backend)
    out = H.Results("log", quick=args.quick)
    impl = f"kafkawire {K.backend}"
    total = (64 << 20) if args.quick else (1 << 30)
    lookups = 2000 if args.quick else 10_000
    root = "/tmp/kafkawire-bench-log"
    path = os.path.join(root, f"bench{total >> 20}m-0")
    if not os.path.exists(path):
        print(f"building {total >> 20} MiB partition in {path} ...", file=sys.stderr)
        os.makedirs(root, exist_ok=True)
        build(path, total)
    log = Log.open(path)
    size = log.size
    segs = log.segments
    print(f"partition: {path}: {len(segs)} segments, {size / 2**20:.0f} MiB, "
          f"offsets 0..{log.next_offset - 1}, backend {K.backend}")
    # warm the page cache
    for s in segs:
        K.crc32c(s.buffer, 0, s.size)
    rows = []

    wl = f"partition {size >> 20} MiB"
    t = best_of(lambda: [K.scan_batches(s.buffer, 0, s.size, -1, False) for s in segs])
    rows.append(("header-only scan (K.scan_batches)", f"{gbps(size, t):.1f} GB/s", ""))
    out.add(wl, impl, "header-only scan", gbps(size, t), "GB/s")
    t = best_of(lambda: sum(1 for _ in log.batches()), 1)
    rows.append(("header-only scan (Log.batches objects)", f"{gbps(size, t):.1f} GB/s", ""))
    out.add(wl, impl, "header-only scan, batch objects", gbps(size, t), "GB/s")
    # Interleaved, best of 7 each: the two are compared, so both see the same machine load.
    spans = [(s.buffer, r[0] + 21, r[0] + r[1]) for s in segs for r in s.headers().tolist()]
    t_crc_scan = t_crc_raw = t_crc_batches = t_pkg = t_iter = float("inf")
    try:
        import crc32c as crc_pkg
    except ImportError:
        crc_pkg = None
    views = [memoryview(s.buffer)[:s.size] for s in segs]

    def verifying_iteration():
        for s in segs:
            for _ in iter_batches(s.buffer, end=s.size, verify_crc=True):
                pass

    for _ in range(max(1, args.repeat)):
        t_crc_raw = min(t_crc_raw, best_of(lambda: [K.crc32c(s.buffer, 0, s.size) for s in segs], 1))
        t_crc_scan = min(t_crc_scan, best_of(
            lambda: [K.scan_batches(s.buffer, 0, s.size, -1, True) for s in segs], 1))
        t_crc_batches = min(t_crc_batches, best_of(lambda: [K.crc32c(*sp) for sp in spans], 1))
        t_iter = min(t_iter, best_of(verifying_iteration, 1))
        if crc_pkg is not None:
            t_pkg = min(t_pkg, best_of(lambda: [crc_pkg.crc32c(v) for v in views], 1))
    del views
    ratio = t_crc_raw / t_crc_scan
    rows.append(("raw CRC-32C over the same bytes (one call per segment)",
                 f"{gbps(size, t_crc_raw):.1f} GB/s", ""))
    rows.append(("raw CRC-32C, one call per batch (the scan's CRC work)",
                 f"{gbps(size, t_crc_batches):.1f} GB/s", ""))
    rows.append(("scan with CRC verification", f"{gbps(size, t_crc_scan):.1f} GB/s",
                 f"{ratio:.0%} of raw CRC (bar >= 60%) {'PASS' if ratio >= 0.6 else 'FAIL'}"))
    out.add(wl, impl, "scan with CRC verification", gbps(size, t_crc_scan), "GB/s")
    if crc_pkg is not None:
        r_pkg = t_pkg / t_iter
        rows.append(("crc32c package, raw over the same bytes", f"{gbps(size, t_pkg):.1f} GB/s", ""))
        rows.append(("iter_batches(verify_crc=True), batch objects", f"{gbps(size, t_iter):.1f} GB/s",
                     f"{r_pkg:.0%} of the crc32c package (bar >= 90%) "
                     f"{'PASS' if r_pkg >= 0.9 else 'FAIL'}"))
        out.add(wl, impl, "verifying batch iteration", gbps(size, t_iter), "GB/s")
        out.add(wl, "crc32c package (raw)", "verifying batch iteration", gbps(size, t_pkg), "GB/s")
    out.add(wl, "raw CRC-32C (one call per segment)", "scan with CRC verification",
                gbps(size, t_crc_raw), "GB/s")
    out.add(wl, "raw CRC-32C (one call per batch)", "scan with CRC verification",
                gbps(size, t_crc_batches), "GB/s")

    rnd = random.Random(5)
    end = log.next_offset
    lat = []
    for _ in range(lookups):
        o = rnd.randrange(end)
        t0 = time.perf_counter_ns()
        found = log.locate(o)
        lat.append(time.perf_counter_ns() - t0)
        assert found is not None
    med = statistics.median(lat) / 1000
    rows.append((f"offset lookup, median of {lookups}", f"{med:.1f} us",
                 f"bar < 50 us {'PASS' if med < 50 else 'FAIL'}"))
    out.add(wl, impl, "offset lookup (median)", med, "us")
    lat = []
    for _ in range(lookups):
        ts = TS + rnd.randrange(end)
        t0 = time.perf_counter_ns()
        found = log.find_timestamp(ts)
        lat.append(time.perf_counter_ns() - t0)
        assert found is not None and found[1] == ts
    med = statistics.median(lat) / 1000
    rows.append((f"time lookup, median of {lookups}", f"{med:.1f} us",
                 f"bar < 50 us {'PASS' if med < 50 else 'FAIL'}"))
    out.add(wl, impl, "time lookup (median)", med, "us")

    def deep_objects():
        n = sink = 0
        for r in log.records():
            sink += r.offset + r.timestamp + len(r.key) + len(r.value) + len(r.headers)
            n += 1
        return n

    def deep_objects_untouched():
        n = 0
        for _ in log.records():
            n += 1
        return n

    def deep_columns():
        n = sink = 0
        for chunk in log.column_chunks(include_headers=True):
            # every field decoded into arrays; touch each column once
            sink += int(chunk.offset[-1]) + int(chunk.timestamp[-1]) + len(chunk.key_data) \
                + len(chunk.value_data) + len(chunk.header_offsets)
            n += len(chunk)
        return n

    results = {}
    for name, fn in (("objects", deep_objects), ("objects-untouched", deep_objects_untouched),
                     ("columns", deep_columns)):
        t0 = time.perf_counter()
        n = fn()
        results[name] = n / (time.perf_counter() - t0)
        assert n == log.next_offset
    rows.append(("deep iteration, Record objects (Log.records)",
                 f"{results['objects'] / 1e6:.2f} M records/s", ""))
    rows.append(("deep iteration, Record objects, not touched",
                 f"{results['objects-untouched'] / 1e6:.2f} M records/s", ""))
    rows.append(("deep iteration, columns (Log.column_chunks)",
                 f"{results['columns'] / 1e6:.2f} M records/s", ""))
    for name, label in (("objects", "kafkawire Record objects"),
                        ("objects-untouched", "kafkawire Record objects, not touched"),
                        ("columns", "kafkawire columns")):
        out.add(wl, f"{label} ({K.backend})", "deep iteration", results[name], "records/s")
    ours = results["columns"]
    if not args.no_java:
        java = java_bench(path, 10.0 if not args.quick else 3.0)
        out.version("java", H.java_version())
        if java:
            out.add(wl, "Kafka Java (FileRecords)", "deep iteration", java, "records/s")
            rows.append(("Java FileRecords deep iteration", f"{java / 1e6:.2f} M records/s",
                         f"objects {results['objects'] / java:.2f}x, untouched "
                         f"{results['objects-untouched'] / java:.2f}x, columns "
                         f"{results['columns'] / java:.2f}x (bar >= 1) "
                         f"{'PASS' if ours >= java else 'FAIL'}"))
    log.close()
    out.set_ratios("Kafka Java (FileRecords)")
    out.write(args.results)
    w = max(len(r[0]) for r in rows)
    print(f"| {'measure'.ljust(w)} | result | vs bar |")
    print(f"|{'-' * (w + 2)}|--------|--------|")
    for name, val, note in rows:
        print(f"| {name.ljust(w)} | {val} | {note} |")


if __name__ == "__main__":
    main()
