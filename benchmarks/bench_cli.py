"""``kafkawire dump`` speed against Kafka's Java reader, in one run on the same file.

Usage: ``python benchmarks/bench_cli.py [--quick] [--backend fast|pure]``

Builds one segment of W1-shaped batches (16-byte keys, 100-byte values, ~16 KiB
uncompressed batches) and measures, to a null sink:

* ``dump`` (shallow: one line per batch, CRC validated as ``isvalid`` needs);
* ``dump --deep-iteration`` (text, Kafka's format) and ``--deep-iteration --json``;
* Kafka's side (``benchmarks/java/BenchDumpLog.java``, after JIT warm-up):
  ``FileRecords`` deep iteration touching every record field, and the same
  loop also printing DumpLogSegments' lines.

It prints records/s and the ratio of each kafkawire mode to both Java numbers.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def build_file(path: Path, mib: int) -> int:
    from kafkawire.records import BatchBuilder
    out = bytearray()
    offset = 0
    target = mib << 20
    while len(out) < target:
        b = BatchBuilder(base_offset=offset)
        for i in range(130):
            b.append(b"v" * 100, key=b"%016d" % (offset + i), timestamp=1_700_000_000_000 + offset + i)
        out += b.build()
        offset += 130
    path.write_bytes(bytes(out))
    return offset


def time_dump(path: Path, flags, repeat: int) -> float:
    from kafkawire.cli import main
    best = float("inf")
    with open(os.devnull, "w") as sink:
        for _ in range(repeat):
            t = time.perf_counter()
            with contextlib.redirect_stdout(sink):
                main(["dump", "--files", str(path), "--no-progress", *flags])
            best = min(best, time.perf_counter() - t)
    return best


def run_java(path: Path, seconds: float):
    from javahelper import find_kafka_jars
    jars = find_kafka_jars()
    if jars is None or shutil.which("javac") is None:
        return None, "Kafka jars or javac missing (pip install shigawire-apache-flink-libraries)"
    out = Path(tempfile.mkdtemp(prefix="kw-bench-cli-"))
    cp = os.pathsep.join([str(out)] + [str(j) for j in jars])
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", cp,
                    str(ROOT / "benchmarks" / "java" / "BenchDumpLog.java")], check=True)
    proc = subprocess.run(["java", "-Xmx1g", "-cp", cp, "BenchDumpLog", str(path), str(seconds)],
                          check=True, capture_output=True, text=True)
    vals = dict(line.split() for line in proc.stdout.splitlines() if line.count(" ") == 1)
    return {k: float(v) for k, v in vals.items()}, None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 MiB file, short Java run")
    ap.add_argument("--backend", choices=("fast", "pure"), default=None)
    args = ap.parse_args()
    from kafkawire import _kernels
    if args.backend:
        _kernels.use(args.backend)
    mib = 8 if args.quick else 64
    tmp = Path(tempfile.mkdtemp(prefix="kw-bench-cli-"))
    path = tmp / "00000000000000000000.log"
    n = build_file(path, mib)
    batches = -(-n // 130)
    repeat = 1 if args.quick else 3
    print(f"kafkawire backend: {_kernels.backend}; file: {path.stat().st_size / 1e6:.1f} MB, "
          f"{n} records in {batches} batches")
    rows = []
    for name, flags, unit in (("dump (shallow)", [], batches),
                              ("dump --deep-iteration", ["--deep-iteration"], n),
                              ("dump --deep-iteration --json", ["--deep-iteration", "--json"], n),
                              ("dump --print-data-log", ["--print-data-log"], n)):
        dt = time_dump(path, flags, repeat)
        rows.append((name, unit / dt, "batches/s" if unit == batches else "records/s",
                     path.stat().st_size / dt / 1e6))
    java, note = run_java(path, 2.0 if args.quick else 6.0)
    print(f"{'mode':34} {'rate':>14} {'MB/s':>9} {'vs Java iterate':>16} {'vs Java dump':>13}")
    for name, rate, unit, mbs in rows:
        ratios = ["", ""]
        if java and unit == "records/s":
            ratios = [f"{rate / java['iterate']:.2f}x", f"{rate / java['dump']:.2f}x"]
        print(f"{name:34} {rate:>10.0f} {unit[:3]}/s {mbs:>8.0f} {ratios[0]:>16} {ratios[1]:>13}")
    if java:
        print(f"{'Java FileRecords deep iteration':34} {java['iterate']:>10.0f} rec/s")
        print(f"{'Java + DumpLogSegments lines':34} {java['dump']:>10.0f} rec/s")
    else:
        print(f"Java: skipped ({note})")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
