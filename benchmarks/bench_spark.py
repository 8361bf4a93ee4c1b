"""End-to-end Spark: the kafkawire source against a tuple-yielding aiokafka baseline.

    python benchmarks/bench_spark.py [--quick] [--records N[,N...]] [--partitions P] [--repeat R]
                                     [--master local[2]] [--no-ceiling] [--no-sink | --sink-only]
                                     [--results PATH]

One log.dirs folder (written with LogWriter: v2 batches of 500 records, codecs
none/lz4/zstd in turn, 16-byte keys, ~100-byte values), one SparkSession, both
sources, same files, same run:

* ``kafkawire``: this package's data source (Arrow batches from the columnar decoder);
* ``aiokafka_tuples``: a Python data source that reads the same ``.log`` files
  with aiokafka's Cython record batches and yields one Python tuple per record
  (what a data source without a columnar decoder does).

* ``arrow_ceiling``: a Python data source that decodes one 65,536-row Arrow
  batch per task and yields it over and over (same schema and row count,
  nothing else decoded): what *any* Python data source reaches at best on
  this Spark, i.e. the cost of Spark's own machinery (task, Python worker,
  Arrow stream to the JVM, rows in the JVM, the writer).

Each round runs every job of every source once, interleaved (a busy shared
machine then slows all sources alike); the table shows the median of
``--repeat`` rounds as rows/s, the ratio kafkawire/baseline (bar: >= 5x on ``count()``) and
the share of the Arrow ceiling kafkawire reaches, with the load average
before and after the rounds.  ``--records 2000000,10000000`` measures each
size in turn in the same session (one folder per size, one JSON).
On Linux with a local master it also shows the CPU seconds each query used
(median over rounds), split into the JVM (driver and executor threads) and
the Python workers (planning and tasks): where the time goes, and a
throughput measure that other processes on the machine disturb much less.
The figures also go to ``benchmarks/results/spark[-quick].json``.

After the read jobs, the decoder alone, outside Spark: the CPU ns per record it spends
on each codec's batches of one segment of the data (chunks and their Arrow batches, as a
task builds them) beside the ns per record of decompression alone (``kafkawire.compression``
on the same payloads), and the data's mix of codecs: how much of any gap to the ceiling
is decompression, which any decoder of these files pays (a few seconds).

Last, the sink: one cached DataFrame (key, value, topic, partition, timestamp) written
with ``format("kafkawire")`` and with Spark's Parquet writer, interleaved, ``--repeat``
rounds; the table shows the median rows/s of each and the ratio of the medians (bar:
kafkawire >= 1x Parquet), and the CPU seconds each write used.  Its figures go to
``benchmarks/results/spark_sink[-quick].json``.  ``--no-sink`` leaves the sink out,
``--sink-only`` runs only the sink (the read jobs are left out).
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import _harness as H


def make_data(root: str, records: int, partitions: int) -> int:
    from kafkawire.log import LogWriter
    from kafkawire.records import BatchBuilder
    rng = random.Random(1)
    codecs = ["none", "lz4", "zstd"]
    per = records // partitions
    payload = bytes(rng.randrange(32, 127) for _ in range(4096))
    ts = 1_700_000_000_000
    total = 0
    for p in range(partitions):
        with LogWriter(os.path.join(root, f"bench-{p}"), segment_bytes=64 << 20) as w:
            for b in range(per // 500):
                bb = BatchBuilder(2, codecs[b % 3], base_offset=w.next_offset)
                for i in range(500):
                    o = rng.randrange(0, 3900)
                    bb.append(payload[o:o + 80 + (i % 40)], key=b"key-%012d" % rng.randrange(10**6),
                              timestamp=ts + total)
                    total += 1
                w.append_batch(bb.build())
    return total


def baseline_source():
    """A Python data source decoding with aiokafka and yielding tuples (defined here, pickled by value)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class _Part(InputPartition):
        def __init__(self, path, topic, partition):
            super().__init__(path)
            self.path, self.topic, self.partition = path, topic, partition

    class _Reader(DataSourceReader):
        def __init__(self, root):
            self.root = root

        def partitions(self):
            out = []
            for d in sorted(os.listdir(self.root)):
                topic, p = d.rsplit("-", 1)
                for f in sorted(os.listdir(os.path.join(self.root, d))):
                    if f.endswith(".log"):
                        out.append(_Part(os.path.join(self.root, d, f), topic, int(p)))
            return out

        def read(self, part):
            import datetime as dt
            from aiokafka.record.memory_records import MemoryRecords
            utc = dt.timezone.utc
            with open(part.path, "rb") as f:
                data = f.read()
            mr = MemoryRecords(data)
            topic, partition = part.topic, part.partition
            while True:
                batch = mr.next_batch()
                if batch is None:
                    break
                if getattr(batch, "is_control_batch", False):
                    continue
                tt = batch.timestamp_type
                for r in batch:
                    yield (r.key, r.value, topic, partition, r.offset,
                           dt.datetime.fromtimestamp(r.timestamp / 1000, utc), tt)

    class AiokafkaTuples(DataSource):
        @classmethod
        def name(cls):
            return "aiokafka_tuples"

        def schema(self):
            return ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")

        def reader(self, schema):
            return _Reader(self.options["path"])

    return AiokafkaTuples


def ceiling_source(tasks: int):
    """Yields one pre-decoded Arrow batch over and over: the best a Python source can do here
    (options: ``path``, the log.dirs folder to take the batch from; ``records``, rows in all)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class _Reader(DataSourceReader):
        def __init__(self, logs, records):
            self.logs, self.records = logs, records

        def partitions(self):
            return [InputPartition(i) for i in range(tasks)]

        def read(self, part):
            from kafkawire.spark import layout
            from kafkawire.records.columnar import iter_column_chunks
            logs, records = self.logs, self.records
            d = os.path.join(logs, sorted(os.listdir(logs))[0])
            f = sorted(x for x in os.listdir(d) if x.endswith(".log"))[0]
            chunk = next(iter(iter_column_chunks(layout.map_file(os.path.join(d, f)), max_records=65536)))
            batch = chunk.to_arrow(topic="bench", partition=0)
            left = records // tasks + (part.value < records % tasks)
            while left > 0:
                k = min(left, batch.num_rows)
                yield batch if k == batch.num_rows else batch.slice(0, k)
                left -= k

    class ArrowCeiling(DataSource):
        @classmethod
        def name(cls):
            return "arrow_ceiling"

        def schema(self):
            return ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")

        def reader(self, schema):
            return _Reader(self.options["path"], int(self.options["records"]))

    return ArrowCeiling


def codec_costs(logs: str, repeat: int = 3) -> dict:
    """CPU ns per record of the decoder outside Spark, per codec of the folder, and of
    decompression alone: how much of the read is decompression no decoder can avoid.

    The batches of one partition's first segment are grouped by codec, each group joined
    into one buffer; the decoder (chunks and their Arrow batches, as a task builds them)
    and ``kafkawire.compression.decompress`` (one call per batch, the payloads only) run
    over it ``repeat`` times, the fastest kept.  Returns ``{codec: (records, decode ns,
    decompress ns)}`` plus ``"all"``: the folder's mix (weighted by records).  At least
    three runs after a warm-up.
    """
    from kafkawire import _kernels as K, _scan_common as SC, compression
    from kafkawire.records.columnar import iter_column_chunks
    from kafkawire.spark import layout
    d = os.path.join(logs, sorted(os.listdir(logs))[0])
    buf = layout.map_file(os.path.join(d, sorted(x for x in os.listdir(d) if x.endswith(".log"))[0]))
    rows, _stop, _status = K.scan_batches(buf, 0, -1, -1, False)
    view = memoryview(buf)
    groups: dict = {}
    for pos, size, attrs, count in rows[:, [SC.POSITION, SC.SIZE, SC.ATTRIBUTES, SC.RECORD_COUNT]].tolist():
        g = groups.setdefault(compression.CODECS[attrs & 7], ([], [], [0]))
        g[0].append(view[pos:pos + size])
        g[1].append(view[pos + 61:pos + size])      # a v2 batch's records follow its 61-byte header
        g[2][0] += count

    def best(fn) -> float:
        fn()                    # warm-up: first-touch page faults, caches
        t = []
        for _ in range(max(repeat, 3)):
            c = time.process_time()
            fn()
            t.append(time.process_time() - c)
        return min(t)

    out = {}
    for codec, (batches, payloads, (count,)) in groups.items():
        data = b"".join(batches)
        cid = compression.codec_id(codec)

        def decode():
            for chunk in iter_column_chunks(data):
                chunk.to_arrow(topic="bench", partition=0)

        def inflate():
            if cid:
                for p in payloads:
                    compression.decompress(cid, p)

        out[codec] = (count, best(decode) * 1e9 / count, best(inflate) * 1e9 / count)
    total = sum(v[0] for v in out.values())
    out["all"] = (total, sum(v[0] * v[1] for v in out.values()) / total,
                  sum(v[0] * v[2] for v in out.values()) / total)
    return out


class CpuMeter:
    """CPU seconds of the Spark JVM and of the Python processes it started (Linux /proc)."""

    def __init__(self, jvm_pid: int) -> None:
        self.jvm = jvm_pid
        self.hz = os.sysconf("SC_CLK_TCK")
        self.ok = os.path.exists(f"/proc/{jvm_pid}/stat")

    @staticmethod
    def _stat(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
        except OSError:
            return None
        fields = s[s.rfind(")") + 2:].split()
        # ppid, own utime+stime, reaped children's cutime+cstime
        return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])

    def sample(self):
        """(jvm seconds, python seconds) so far; python = every process below the JVM."""
        if not self.ok:
            return 0.0, 0.0
        kids = {}
        for path in glob.glob("/proc/[0-9]*/stat"):
            st = self._stat(path.split("/")[2])
            if st:
                kids.setdefault(st[0], []).append((path.split("/")[2], st))
        jvm = self._stat(self.jvm)
        py = 0
        todo = [str(self.jvm)]
        while todo:
            for pid, st in kids.get(int(todo.pop()), []):
                py += st[1] + st[2]
                todo.append(pid)
        return jvm[1] / self.hz, py / self.hz


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small data, one round")
    ap.add_argument("--records", help="records, or several sizes measured one after the other in "
                    "the same run and session: 2000000,10000000 (default 2M, --quick 200k)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, help="rounds (default 3, --quick 1)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-ceiling", action="store_true", help="leave out the arrow_ceiling source")
    ap.add_argument("--no-sink", action="store_true",
                    help="leave out the sink (kafkawire writer against Spark's Parquet writer)")
    ap.add_argument("--sink-only", action="store_true",
                    help="only the sink (kafkawire writer against Spark's Parquet writer)")
    H.add_results_option(ap)
    a = ap.parse_args()
    if a.sink_only and a.no_sink:
        ap.error("--sink-only and --no-sink exclude each other")
    sizes = [int(x) for x in a.records.split(",")] if a.records else [200_000 if a.quick else 2_000_000]
    repeat = a.repeat or (1 if a.quick else 3)
    work = tempfile.mkdtemp(prefix="kafkawire-bench-spark-")
    try:
        datasets = {}
        for records in sizes:
            logs = os.path.join(work, f"logs-{records}")
            t = time.time()
            n = make_data(logs, records, a.partitions)
            size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(logs) for f in fs
                       if f.endswith(".log"))
            print(f"data: {n} records, {a.partitions} partitions, {size / 1e6:.1f} MB of .log "
                  f"(written in {time.time() - t:.1f}s)", flush=True)
            datasets[n] = logs
        n, logs = next(iter(datasets.items()))       # the sink writes the first data set
        import kafkawire
        from kafkawire import _kernels
        # The Python workers inherit this: one that cannot load the compiled kernels (say, a
        # rebuild in a dev tree at that moment) fails instead of timing the pure-Python twins.
        os.environ["KAFKAWIRE_BACKEND"] = _kernels.backend
        from kafkawire.spark.session import make_session
        spark = make_session(a.master, "kafkawire-bench")
        par = spark.sparkContext.defaultParallelism
        spark.dataSource.register(baseline_source())
        spark.dataSource.register(ceiling_source(par))
        print(f"spark {spark.version}, master {a.master} (parallelism {par}), kafkawire backend "
              f"{kafkawire.backend} (workers: KAFKAWIRE_BACKEND={os.environ['KAFKAWIRE_BACKEND']})", flush=True)
        local = a.master.startswith("local")
        meter = CpuMeter(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()) if local else None

        def frames_of(logs, n):
            frames = {
                "kafkawire": lambda: spark.read.format("kafkawire").option("minPartitions", par).load(logs),
                "aiokafka_tuples": lambda: spark.read.format("aiokafka_tuples").load(logs),
            }
            if not a.no_ceiling:
                frames["arrow_ceiling"] = lambda: spark.read.format("arrow_ceiling").option(
                    "records", n).load(logs)
            return frames
        frames = frames_of(logs, n)
        out = os.path.join(work, "parquet")
        jobs = {
            "count()": lambda df: df.count(),
            "Parquet export (Spark defaults)": lambda df: df.write.mode("overwrite").parquet(out),
            # Kafka keys/values rarely repeat: Parquet's dictionary attempt is pure cost for both
            "Parquet export (parquet.enable.dictionary=false)":
                lambda df: df.write.mode("overwrite").option("parquet.enable.dictionary", "false").parquet(out),
        }
        if a.sink_only:
            jobs = {}
        measured = {}       # records -> (walls, cpus, load averages before and after)
        for dn, dlogs in datasets.items() if jobs else ():
            dframes = frames_of(dlogs, dn)
            for name, mk in dframes.items():       # warm-up (JIT, workers), and all read everything
                assert mk().count() == dn, name
                mk().write.mode("overwrite").parquet(out)
            walls = {(j, s): [] for j in jobs for s in dframes}
            cpus = {(j, s): [] for j in jobs for s in dframes}
            load0 = os.getloadavg()
            print(f"{dn:,} records: load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
            for r in range(repeat):
                for job, act in jobs.items():
                    for name, mk in dframes.items():
                        c0 = meter.sample() if meter else (0.0, 0.0)
                        t = time.perf_counter()
                        act(mk())
                        w = time.perf_counter() - t
                        c1 = meter.sample() if meter else (0.0, 0.0)
                        walls[job, name].append(w)
                        cpus[job, name].append((c1[0] - c0[0], c1[1] - c0[1]))
                        print(f"  round {r + 1}: {name:<16} {job:<50} {dn / w:>11,.0f} rows/s ({w:.2f}s)"
                              + (f"   cpu: JVM {c1[0] - c0[0]:.2f}s, Python {c1[1] - c0[1]:.2f}s"
                                 if meter else ""), flush=True)
            measured[dn] = (walls, cpus, (load0, os.getloadavg()))
        sink_med, sink_cpu, sink_load = {}, {}, ((0.0,), (0.0,))
        if not a.no_sink:
            load0 = os.getloadavg()
            # the sink against Spark's Parquet writer, on one cached DataFrame (the read is not timed)
            df = spark.read.format("kafkawire").load(logs).select("key", "value", "topic", "partition",
                                                                  "timestamp").cache()
            assert df.count() == n
            sink_out = os.path.join(work, "sink")
            sinks = {"kafkawire sink": lambda: df.write.format("kafkawire").mode("overwrite").save(sink_out),
                     "Spark Parquet writer": lambda: df.write.mode("overwrite").parquet(out)}
            for act in sinks.values():              # warm-up: Python workers, JIT
                act()
            times = {s: [] for s in sinks}
            cpu = {s: [] for s in sinks}
            for r in range(repeat):
                for s, act in sinks.items():
                    c0 = meter.sample() if meter else (0.0, 0.0)
                    t = time.perf_counter()
                    act()
                    w = time.perf_counter() - t
                    c1 = meter.sample() if meter else (0.0, 0.0)
                    times[s].append(w)
                    cpu[s].append((c1[0] - c0[0], c1[1] - c0[1]))
                    print(f"  round {r + 1}: write {s:<20} {n / w:>11,.0f} rows/s ({w:.2f}s)"
                          + (f"   cpu: JVM {c1[0] - c0[0]:.2f}s, Python {c1[1] - c0[1]:.2f}s" if meter else ""),
                          flush=True)
            with os.scandir(sink_out) as it:            # what the sink wrote reads back whole
                assert sorted(e.name for e in it) == [f"bench-{p}" for p in range(a.partitions)]
            assert spark.read.format("kafkawire").load(sink_out).count() == n
            sink_med = {s: n / statistics.median(v) for s, v in times.items()}
            sink_cpu = {s: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v))
                        for s, v in cpu.items()}
            sink_load = (load0, os.getloadavg())
            df.unpersist()
        spark_version = spark.version
        spark.stop()
        names = list(frames)
        labels = {"kafkawire": "kafkawire source", "aiokafka_tuples": "aiokafka, tuples",
                  "arrow_ceiling": "Arrow ceiling (any Python source)"}
        results = H.Results("spark", quick=a.quick)
        results.version("spark", spark_version)
        bars = []
        for dn, (walls, cpus, loads) in measured.items():
            med = {k: dn / statistics.median(v) for k, v in walls.items()}
            med_cpu = {k: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v))
                       for k, v in cpus.items()}
            print(f"\n| Spark job ({a.master}, {dn:,} records, median of {repeat}; load average "
                  f"{loads[0][0]:.1f} -> {loads[1][0]:.1f}) | "
                  + " | ".join(f"{s} rows/s" for s in names) + " | kafkawire / tuples |")
            print("|---|" + "---:|" * (len(names) + 1))
            for job in jobs:
                k, b = med[job, "kafkawire"], med[job, "aiokafka_tuples"]
                print(f"| {job} | " + " | ".join(f"{med[job, s]:,.0f}" for s in names) + f" | {k / b:.1f}x |")
            if meter and meter.ok:
                print("\nCPU seconds per query (median; JVM + Python workers), and the ratio of totals:\n")
                print("| Spark job | " + " | ".join(f"{s} JVM + Python" for s in names) + " | tuples / kafkawire |")
                print("|---|" + "---:|" * (len(names) + 1))
                for job in jobs:
                    cells = [f"{med_cpu[job, s][0]:.2f} + {med_cpu[job, s][1]:.2f}" for s in names]
                    tot = {s: sum(med_cpu[job, s]) for s in names}
                    print(f"| {job} | " + " | ".join(cells)
                          + f" | {tot['aiokafka_tuples'] / tot['kafkawire']:.1f}x |")
            dwl = f"{dn:,} records, {a.partitions} partitions, {a.master}"
            for job in jobs:
                for s in names:
                    results.add(dwl, labels[s], job, med[job, s], "rows/s (wall, median)")
                    if meter and meter.ok:
                        results.add(dwl, labels[s], f"{job}, CPU", sum(med_cpu[job, s]),
                                    "CPU seconds (JVM + Python)")
            c = med["count()", "kafkawire"] / med["count()", "aiokafka_tuples"]
            bars.append(f"{dn:,} records: count() >= 5x the tuple source: "
                        f"{'met' if c >= 5 else 'NOT met'} ({c:.1f}x)")
            if "arrow_ceiling" in frames:
                for job in jobs:
                    share = med[job, "kafkawire"] / med[job, "arrow_ceiling"]
                    line = (f"  {job}: kafkawire reaches {share:.0%} of the arrow_ceiling's rows/s "
                            f"(bar >= 95%)")
                    if meter and meter.ok:
                        line += (f", {sum(med_cpu[job, 'arrow_ceiling']) / sum(med_cpu[job, 'kafkawire']):.0%}"
                                 f" of its rows per CPU second")
                    bars.append(line)
        if jobs:
            costs = codec_costs(next(iter(datasets.values())), repeat)
            print(f"\nThe decoder outside Spark, CPU ns per record (one segment of the data, fastest of "
                  f"{max(repeat, 3)}): what decompression alone costs, which no decoder avoids\n")
            print("| codec | records | decode (chunks + Arrow batches) | decompression alone | the rest |")
            print("|---|---:|---:|---:|---:|")
            for codec, (count, dec, inf) in costs.items():
                name = "the data's mix" if codec == "all" else codec
                print(f"| {name} | {count:,} | {dec:.1f} | {inf:.1f} | {dec - inf:.1f} |")
                for impl, v in (("decode (chunks + Arrow batches)", dec), ("decompression alone", inf)):
                    results.add(name, impl, "decoder CPU outside Spark", v, "ns per record (CPU)")
            results.set_ratios(labels["aiokafka_tuples"], metrics=list(jobs))
            results.write(a.results)
        wl = f"{n:,} records, {a.partitions} partitions, {a.master}"
        if sink_med:
            sink = H.Results("spark_sink", quick=a.quick)
            sink.version("spark", spark_version)
            load = f"load average {sink_load[0][0]:.1f} -> {sink_load[1][0]:.1f}"
            for s, rate in sink_med.items():
                sink.add(wl, s, "write a cached DataFrame", rate, "rows/s (wall, median)", note=load)
                if meter and meter.ok:
                    sink.add(wl, s, "write a cached DataFrame, CPU", sum(sink_cpu[s]),
                             "CPU seconds (JVM + Python)", note=load)
            sink.set_ratios("Spark Parquet writer")
            sink.write(a.results.replace(".json", "-sink.json") if a.results else None)
            k, q = sink_med["kafkawire sink"], sink_med["Spark Parquet writer"]
            print(f"\n| write a cached DataFrame ({a.master}, {n:,} records, median of {repeat}; {load}) "
                  "| rows/s | CPU s (JVM + Python) |\n|---|---:|---:|")
            for s in sink_med:
                print(f"| {s} | {sink_med[s]:,.0f} | {sink_cpu[s][0]:.2f} + {sink_cpu[s][1]:.2f} |")
            print(f"\nbar (kafkawire sink >= 1x Spark's Parquet writer): {'met' if k >= q else 'NOT met'} "
                  f"({k / q:.2f}x)")
        if bars:
            print("\n" + "\n".join(bars))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
