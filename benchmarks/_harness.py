"""What every benchmark script shares: timers, workload builders, peer loaders, JSON results.

A script (``benchmarks/bench_<area>.py``) keeps what it measures (its loops and
its peers); the harness gives it the rest::

    import _harness as H

    results = H.Results("producer", quick=args.quick)        # machine, versions, date
    best, n = H.best_per_call(lambda: decode(data), repeat=5)
    results.add("W1", "kafkawire", "records/s", n / best)
    results.add("W1", "confluent-kafka", "records/s", n / peer_best)
    results.set_ratios(reference="confluent-kafka")          # value / the reference's value
    results.write(args.results)                              # benchmarks/results/producer.json

``python benchmarks/charts.py`` draws the charts of ``docs/performance.md`` from
those files.  Every result file has the same shape::

    {"benchmark": "records", "command": "...", "quick": true, "date": "2026-...Z",
     "machine": {"cpu": "...", "cores": 2, "platform": "...", "memory_gb": 8.0},
     "versions": {"python": "3.11.2", "kafkawire": "0.1.0", "kafkawire backend": "fast",
                  "aiokafka": "0.12.0", ...},
     "rows": [{"workload": "W1", "implementation": "kafkawire fast",
               "metric": "full decode", "unit": "records/s", "value": 9.1e6,
               "ratio": 2.3, "reference": "aiokafka Cython", "note": ""}, ...]}

``ratio`` is ``value`` divided by the reference implementation's value for the
same workload and metric (None when there is no reference), so for rates a
ratio above 1 means faster than the reference.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: First timestamp of every generated workload (ms).
T0 = 1_700_000_000_000
#: Target batch size of the workloads: what a producer with batch.size=16384 writes.
BATCH_BYTES = 16 * 1024

#: The record workloads every script refers to by name:
#: name -> (records, key bytes, value bytes, headers per record, codec).
WORKLOADS: Dict[str, Tuple[int, int, int, int, str]] = {
    "W1": (1_000_000, 16, 100, 0, "none"),
    "W2": (1_000_000, 16, 100, 0, "lz4"),
    "W3": (1_000_000, 16, 100, 0, "zstd"),
    "W4": (1_000_000, 16, 100, 0, "snappy"),
    "W5": (1_000_000, 16, 100, 0, "gzip"),
    "W6": (2_000_000, 0, 10, 0, "none"),
    "W7": (20_000, 16, 10 * 1024, 0, "none"),
    "W8": (1_000_000, 16, 100, 3, "none"),
}


# ---------------------------------------------------------------------------- timers

def best_of(fn: Callable[[], Any], repeat: int = 3, clock: Callable[[], float] = time.perf_counter) -> float:
    """Best time of ``repeat`` single calls of ``fn`` (for passes long enough to time alone)."""
    best = float("inf")
    for _ in range(repeat):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def best_per_call(fn: Callable[[], Any], repeat: int, min_time: float = 0.0,
                  min_sample: float = 0.05,
                  clock: Callable[[], float] = time.process_time) -> Tuple[float, Any]:
    """``(best seconds per call, fn's last result)``: at least ``repeat`` samples and
    ``min_time`` seconds in all.

    A sample calls ``fn`` enough times to last ``min_sample`` seconds, so a pass
    that takes a few ms (header-only iteration, CRC checks) is not timed alone,
    where scheduler and timer noise would swamp it.  The default clock is this
    process's CPU time: benchmark machines are shared, and waiting for a core is
    not work.
    """
    t = clock()
    result = fn()
    first = clock() - t
    calls = max(1, int(min_sample / max(first, 1e-6)))
    best = first if calls == 1 else float("inf")
    spent = first
    samples = 1 if calls == 1 else 0
    while samples < repeat or spent < min_time:
        t = clock()
        for _ in range(calls):
            result = fn()
        dt = clock() - t
        spent += dt
        best = min(best, dt / calls)
        samples += 1
    return best, result


def alternate(loops: Dict[str, Callable[[], Any]], repeat: int, min_time: float,
              min_sample: float = 0.05,
              clock: Callable[[], float] = time.process_time) -> Dict[str, Tuple[float, Any]]:
    """Best per-call time of each loop, sampling them in turn (same moment, same buffer):
    ``{name: (seconds per call, the loop's result)}``."""
    calls, best, counts = {}, {}, {}
    for name, fn in loops.items():
        fn()
        t = clock()
        counts[name] = fn()
        calls[name] = max(1, int(min_sample / max(clock() - t, 1e-6)))
        best[name] = float("inf")
    spent = 0.0
    samples = 0
    while samples < repeat or spent < len(loops) * min_time:
        for name, fn in loops.items():
            t = clock()
            for _ in range(calls[name]):
                fn()
            dt = clock() - t
            spent += dt
            best[name] = min(best[name], dt / calls[name])
        samples += 1
    return {name: (best[name], counts[name]) for name in loops}


def best_doubling(fn: Callable[[], Any], seconds: float,
                  clock: Callable[[], float] = time.process_time) -> float:
    """Seconds per call: calls doubled until a round lasts ``seconds / 5``, then the best
    of five such rounds (CPU time by default)."""
    fn()
    n = 1
    while True:
        t0 = clock()
        for _ in range(n):
            fn()
        dt = clock() - t0
        if dt > seconds / 5:
            break
        n *= 2
    best = dt / n
    for _ in range(4):
        t0 = clock()
        for _ in range(n):
            fn()
        best = min(best, (clock() - t0) / n)
    return best


def cpu_and_wall(fn: Callable[[], Any]) -> Tuple[float, float, Any]:
    """``(process CPU seconds, wall seconds, result)`` of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    result = fn()
    return time.process_time() - c0, time.perf_counter() - t0, result


# ------------------------------------------------------------------ workload builders

def v2_batches(n: int, per_batch: int, value: Callable[[int], Optional[bytes]], *,
               key: Callable[[int], Optional[bytes]] = lambda i: None,
               headers: Callable[[int], Sequence[Tuple[str, Optional[bytes]]]] = lambda i: (),
               timestamp: Callable[[int], int] = lambda i: T0 + i, codec: str = "none",
               start: int = 0, **batch_kwargs: Any) -> Iterable[bytes]:
    """v2 batches of records ``start`` .. ``n - 1`` (``per_batch`` records each), written
    with kafkawire's ``BatchBuilder``; ``value``/``key``/``headers``/``timestamp`` map a
    record's offset to its fields (called in that order: headers, value, key, timestamp),
    ``batch_kwargs`` go to the builder (a callable value is called with the batch's base
    offset)."""
    from kafkawire.records import BatchBuilder
    offset = start
    while offset < n:
        kwargs = {k: (v(offset) if callable(v) else v) for k, v in batch_kwargs.items()}
        b = BatchBuilder(2, codec, base_offset=offset, **kwargs)
        for i in range(offset, min(n, offset + per_batch)):
            hs = headers(i)       # first: generators drawing from one random stream rely on it
            b.append(value(i), key=key(i), timestamp=timestamp(i), headers=hs)
        yield b.build()
        offset += len(b)


def text_values(size: int, rnd: random.Random) -> Callable[[int], bytes]:
    """Text-like values (JSON-ish, varying digits, drawn from ``rnd``) so codecs see
    realistic ratios."""
    words = [b"alpha", b"beta", b"gamma", b"delta", b"user", b"order", b"click", b"view"]

    def make(i: int) -> bytes:
        parts = [b'{"id":%d,"t":"%s","u":%d,"r":"' % (i, words[i % 8], rnd.randrange(10**6))]
        length = sum(map(len, parts))
        while length < size:
            w = words[rnd.randrange(8)] if rnd.random() < 0.6 else b"%x" % rnd.getrandbits(32)
            parts.append(w)
            length += len(w)
        return b"".join(parts)[:size]
    return make


def aiokafka_v2_batches(n: int, per_batch: int, codec_id: int, key: bytes,
                        value: Callable[[int], bytes],
                        headers: Sequence[Tuple[str, bytes]] = ()) -> bytes:
    """v2 batches written with aiokafka's (Cython) builder, for a file no kafkawire code wrote."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    out = []
    offset = 0
    hs = list(headers)
    while offset < n:
        b = DefaultRecordBatchBuilder(2, codec_id, 0, -1, -1, -1, 1 << 24)
        for i in range(min(per_batch, n - offset)):
            b.append(i, T0 + offset + i, key, value(offset + i), hs)
        raw = bytearray(b.build())
        raw[0:8] = offset.to_bytes(8, "big")
        out.append(bytes(raw))
        offset += per_batch
    return b"".join(out)


def _batch_ends(data: bytes) -> Iterable[Tuple[int, int]]:
    """``(end position, records)`` of each batch of a buffer of v2 batches."""
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        count = int.from_bytes(data[pos + 57:pos + 61], "big") if pos + 61 <= len(data) else 0
        pos += 12 + length
        yield pos, count


def prefix_by_share(data: bytes, share: float) -> int:
    """Bytes of the first ``share`` of ``data``, cut at a batch boundary."""
    if share >= 1:
        return len(data)
    want = int(len(data) * share)
    if want <= 0:
        return 0
    pos = 0
    for pos, _ in _batch_ends(data):
        if pos >= want:
            break
    return pos


def prefix_by_records(data: bytes, records: int) -> bytes:
    """The leading whole batches holding about ``records`` records."""
    pos = count = 0
    for end, n in _batch_ends(data):
        if count >= records:
            break
        pos, count = end, count + n
    return data[:pos]


def cached_file(name: str, build: Callable[[Path], None], folder: str = "kafkawire-bench") -> Path:
    """``$TMPDIR/<folder>/<name>``, built once with ``build(tmp_path)`` and reused."""
    path = Path(tempfile.gettempdir()) / folder / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".building")
        t = time.perf_counter()
        build(tmp)
        tmp.rename(path)
        print(f"  generated {path} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    return path


# ----------------------------------------------------------------------- peer loaders

def use_backend(name: Optional[str]) -> str:
    """Switch kafkawire's kernels to ``name`` ("fast"/"pure"; None keeps the default)."""
    from kafkawire import _kernels
    if name:
        _kernels.use(name)
    return _kernels.backend


def require_fast() -> None:
    """Exit unless the compiled kernels load (timing the pure twins by mistake is worse)."""
    from kafkawire import _kernels
    if not _kernels.fast_available():
        sys.exit(f"the compiled kernels are not built: {_kernels.fast_error}")


def aiokafka_memory_records(cython: bool = True) -> Any:
    """aiokafka's ``MemoryRecords``, checking which implementation is in use."""
    from aiokafka.record import default_records, memory_records
    in_use = "_crecords" in default_records.DefaultRecordBatch.__module__
    if in_use != cython:
        raise SystemExit(f"aiokafka extensions in use: {in_use}, wanted {cython} "
                         f"({default_records.DefaultRecordBatch!r})")
    if cython:
        assert "_crecords" in memory_records.MemoryRecords.__module__, memory_records.MemoryRecords
    return memory_records.MemoryRecords


def kafka_python_memory_records() -> Any:
    from kafka.record.memory_records import MemoryRecords
    return MemoryRecords


def kafka_jars() -> Optional[List[Path]]:
    """Kafka 3.9.1's jars (the ``shigawire-apache-flink-libraries`` wheel), or None
    when they or a JDK are missing."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from javahelper import find_kafka_jars
    finally:
        sys.path.remove(str(ROOT / "tests"))
    return find_kafka_jars()


JAVA_MISSING = "Kafka jars or javac missing (pip install shigawire-apache-flink-libraries)"


def compile_java(source: Path, jars: Sequence[Path]) -> Tuple[Path, str]:
    """javac ``source`` against ``jars``: ``(class folder, classpath)``."""
    out = Path(tempfile.mkdtemp(prefix="kafkawire-bench-java-"))
    cp = os.pathsep.join([str(out)] + [str(j) for j in jars])
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", cp, str(source)], check=True)
    return out, cp


# ---------------------------------------------------------------------------- results

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> Optional[float]:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine() -> Dict[str, Any]:
    """The machine a result comes from."""
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
            "memory_gb": _memory_gb()}


#: Distribution names of the peers (and the libraries kafkawire leans on).
PEER_DISTS = ("aiokafka", "kafka-python", "confluent-kafka", "pyspark", "pyarrow", "numpy",
              "zstandard", "lz4", "python-snappy")


def versions(extra: Iterable[str] = ()) -> Dict[str, str]:
    """Versions of Python, kafkawire (and its active backend) and the peers installed."""
    from importlib import metadata

    import kafkawire
    out = {"python": platform.python_version(), "kafkawire": kafkawire.__version__,
           "kafkawire backend": kafkawire.backend}
    for dist in (*PEER_DISTS, *extra):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        import confluent_kafka
        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    return out


def java_version() -> Optional[str]:
    """``java -version``'s first line, or None without a JDK."""
    if shutil.which("java") is None:
        return None
    proc = subprocess.run(["java", "-version"], capture_output=True, text=True)
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[0] if lines else None


class Results:
    """The rows a benchmark measured, with where and with what; written as JSON."""

    def __init__(self, benchmark: str, *, quick: bool = False) -> None:
        self.benchmark = benchmark
        self.quick = quick
        self.rows: List[Dict[str, Any]] = []
        self.meta: Dict[str, Any] = {
            "benchmark": benchmark,
            "command": " ".join(["python", os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
            if sys.argv and sys.argv[0] else benchmark,
            "quick": quick,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": machine(),
            "versions": versions(),
        }

    def version(self, name: str, value: Optional[str]) -> None:
        """Record a peer's version that is not a Python distribution (Java, Kafka's jars)."""
        if value:
            self.meta["versions"][name] = value

    def add(self, workload: str, implementation: str, metric: str, value: Optional[float],
            unit: str = "", *, ratio: Optional[float] = None, note: str = "") -> None:
        """One measurement (``value`` None: not measured, e.g. a peer that failed)."""
        self.rows.append({"workload": workload, "implementation": implementation,
                          "metric": metric, "unit": unit,
                          "value": None if value is None else float(value),
                          "ratio": ratio, "reference": None, "note": note})

    def set_ratios(self, reference: str, *, metrics: Optional[Iterable[str]] = None) -> None:
        """Fill ``ratio`` = value / ``reference``'s value of the same workload and metric."""
        wanted = None if metrics is None else set(metrics)
        ref = {(r["workload"], r["metric"]): r["value"] for r in self.rows
               if r["implementation"] == reference and r["value"]}
        for r in self.rows:
            key = (r["workload"], r["metric"])
            if (wanted is None or r["metric"] in wanted) and key in ref and r["value"] is not None \
                    and r["ratio"] is None:
                r["ratio"] = r["value"] / ref[key]
                r["reference"] = reference

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.meta, rows=self.rows)

    def default_path(self) -> Path:
        return RESULTS_DIR / f"{self.benchmark}{'-quick' if self.quick else ''}.json"

    def write(self, path: Optional[str] = None) -> Path:
        """Write the JSON (to ``path``, default ``benchmarks/results/<benchmark>[-quick].json``)."""
        out = Path(path) if path else self.default_path()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"results: {out}", file=sys.stderr)
        return out


def add_results_option(ap: Any) -> None:
    """The ``--results PATH`` option every script takes."""
    ap.add_argument("--results", metavar="PATH", default=None,
                    help="write the results as JSON here (default "
                         "benchmarks/results/<benchmark>[-quick].json)")
