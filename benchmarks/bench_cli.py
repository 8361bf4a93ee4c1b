"""``kafkawire dump`` speed against Kafka's Java reader, in one run on the same file.

Usage: ``python benchmarks/bench_cli.py [--quick] [--mib N] [--backend fast|pure] [--general]
[--results PATH]`` (the figures also go to ``benchmarks/results/cli[-quick].json``)

Builds (once, cached under ``/tmp/kafkawire-bench-cli/``) one segment of W1-shaped
batches (16-byte keys, 100-byte values, 130 records per ~16 KiB uncompressed batch):
1 GiB by default (the issue's partition size; Kafka's default segment size, so one
segment), 64 MiB with ``--quick``.  It measures, to a null sink:

* ``dump`` (shallow: one line per batch, CRC validated as ``isvalid`` needs);
* ``dump --deep-iteration`` (text, Kafka's format), ``--deep-iteration --json`` and
  ``--print-data-log``;
* Kafka's side (``benchmarks/java/BenchDumpLog.java``, after JIT warm-up):
  ``FileRecords`` deep iteration touching every record field, and the same
  loop also printing DumpLogSegments' lines.

Rates are records/s over CPU time (kafkawire: the process, best of the runs; Java: the
measuring thread, so JIT and GC threads are not counted against it) and over wall time;
the ratios compare CPU rates with CPU rates and wall with wall (on a shared machine the
CPU ones are the steadier).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import tempfile
import time
from pathlib import Path

import _harness as H

ROOT = H.ROOT
CACHE = Path(tempfile.gettempdir()) / "kafkawire-bench-cli"
RECORDS_PER_BATCH = 130


def build_file(path: Path, mib: int) -> int:
    """Write the segment (or reuse the cached one); returns its record count."""
    target = mib << 20
    done = path.with_suffix(".count")
    if path.exists() and done.exists():
        return int(done.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    offset = 0
    written = 0
    value = b"v" * 100
    batches = H.v2_batches(1 << 62, RECORDS_PER_BATCH, lambda i: value,
                           key=lambda i: b"%016d" % i)
    with open(path.with_suffix(".tmp"), "wb") as f:
        while written < target:
            raw = next(batches)
            f.write(raw)
            written += len(raw)
            offset += RECORDS_PER_BATCH
    os.replace(path.with_suffix(".tmp"), path)
    done.write_text(str(offset))
    return offset


def time_dump(path: Path, flags, repeat: int):
    """Best (CPU seconds, wall seconds) of ``repeat`` runs of the dump command."""
    from kafkawire.cli import main
    best_cpu = best_wall = float("inf")
    with open(os.devnull, "w", encoding="utf-8") as sink:
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            with contextlib.redirect_stdout(sink):
                main(["dump", "--files", str(path), "--no-progress", *flags])
            best_cpu = min(best_cpu, time.process_time() - c)
            best_wall = min(best_wall, time.perf_counter() - t)
    return best_cpu, best_wall


def run_java(path: Path, seconds: float):
    jars = H.kafka_jars()
    if jars is None:
        return None, H.JAVA_MISSING
    _out, cp = H.compile_java(ROOT / "benchmarks" / "java" / "BenchDumpLog.java", jars)
    proc = subprocess.run(["java", "-Xmx1g", "-cp", cp, "BenchDumpLog", str(path), str(seconds)],
                          check=True, capture_output=True, text=True)
    vals = dict(line.split() for line in proc.stdout.splitlines() if line.count(" ") == 1)
    return {k: float(v) for k, v in vals.items()}, None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64 MiB file, short Java run")
    ap.add_argument("--mib", type=int, default=None, help="segment size (default 1024)")
    ap.add_argument("--backend", choices=("fast", "pure"), default=None)
    ap.add_argument("--general", action="store_true",
                    help="batch objects for every batch (no formatter kernel): the path "
                         "kafkawire took before it, for comparison")
    H.add_results_option(ap)
    args = ap.parse_args()
    if args.general:
        from kafkawire.cli import dump
        dump.FORMATTER = False
    from kafkawire import _kernels
    if args.backend:
        _kernels.use(args.backend)
    mib = args.mib or (64 if args.quick else 1024)
    path = CACHE / f"w1-{mib}mib" / "00000000000000000000.log"
    n = build_file(path, mib)
    batches = -(-n // RECORDS_PER_BATCH)
    repeat = 2 if args.quick else 3
    size = path.stat().st_size
    print(f"kafkawire backend: {_kernels.backend}"
          f"{' (general path: no formatter kernel)' if args.general else ''}; "
          f"file: {size / 2 ** 20:.0f} MiB, "
          f"{n} records in {batches} batches")
    rows = []
    for name, flags, unit in (("dump (shallow)", [], batches),
                              ("dump --deep-iteration", ["--deep-iteration"], n),
                              ("dump --deep-iteration --json", ["--deep-iteration", "--json"], n),
                              ("dump --print-data-log", ["--print-data-log"], n)):
        cpu, wall = time_dump(path, flags, repeat)
        rows.append((name, unit / cpu, unit / wall, unit == batches, size / cpu / 1e6))
    java, note = run_java(path, 2.0 if args.quick else 6.0)
    results = H.Results("cli", quick=args.quick)
    results.version("java", H.java_version())
    wl = f"segment {size >> 20} MiB"
    impl = f"kafkawire {_kernels.backend}" + (" (general path)" if args.general else "")
    for name, cpu_rate, wall_rate, per_batch, _mbs in rows:
        unit = "batches/s (CPU)" if per_batch else "records/s (CPU)"
        results.add(wl, impl, name, cpu_rate, unit)
    if java:
        for name, _c, _w, per_batch, _m in rows:
            if not per_batch:
                results.add(wl, "Kafka Java (FileRecords iteration)", name, java["iterate_cpu"],
                            "records/s (CPU)")
                results.add(wl, "Kafka Java (DumpLogSegments lines)", name, java["dump_cpu"],
                            "records/s (CPU)")
        results.set_ratios("Kafka Java (DumpLogSegments lines)")
    results.write(args.results)
    print(f"{'mode':30} {'rate (CPU)':>17} {'rate (wall)':>12} {'MB/s CPU':>9} "
          f"{'vs Java iterate':>17} {'vs Java dump':>15}")
    print(f"{'':30} {'':>17} {'':>12} {'':>9} {'CPU / wall':>17} {'CPU / wall':>15}")
    for name, cpu_rate, wall_rate, per_batch, mbs in rows:
        ratios = ["", ""]
        if java and not per_batch:
            ratios = [f"{cpu_rate / java['iterate_cpu']:.2f}x / {wall_rate / java['iterate']:.2f}x",
                      f"{cpu_rate / java['dump_cpu']:.2f}x / {wall_rate / java['dump']:.2f}x"]
        unit = "batch/s" if per_batch else "rec/s"
        print(f"{name:30} {cpu_rate:>9.0f} {unit:7} {wall_rate:>12.0f} {mbs:>9.0f} "
              f"{ratios[0]:>17} {ratios[1]:>15}")
    if java:
        print(f"{'Java FileRecords deep iteration':30} {java['iterate_cpu']:>9.0f} rec/s   "
              f"{java['iterate']:>12.0f}")
        print(f"{'Java + DumpLogSegments lines':30} {java['dump_cpu']:>9.0f} rec/s   "
              f"{java['dump']:>12.0f}")
    else:
        print(f"Java: skipped ({note})")


if __name__ == "__main__":
    main()
