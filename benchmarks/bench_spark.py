"""End-to-end Spark: the kafkawire source against a tuple-yielding aiokafka baseline.

    python benchmarks/bench_spark.py [--quick] [--records N] [--partitions P] [--master local[2]]

One log.dirs folder (written with LogWriter: v2 batches of 500 records, codecs
none/lz4/zstd in turn, 16-byte keys, ~100-byte values), one SparkSession, both
sources, same files, same run:

* ``kafkawire``: this package's data source (Arrow batches from the columnar decoder);
* ``aiokafka_tuples``: a Python data source that reads the same ``.log`` files
  with aiokafka's Cython record batches and yields one Python tuple per record
  (what a data source without a columnar decoder does).

For each: ``df.count()`` and a Parquet export (``df.write.parquet``), best of
``--repeat`` runs, as rows/s, and the ratio kafkawire/baseline (bar: >= 5x).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


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


def timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small data, one repeat")
    ap.add_argument("--records", type=int)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()
    records = a.records or (200_000 if a.quick else 2_000_000)
    repeat = a.repeat or (1 if a.quick else 2)
    work = tempfile.mkdtemp(prefix="kafkawire-bench-spark-")
    try:
        logs = os.path.join(work, "logs")
        t = time.time()
        n = make_data(logs, records, a.partitions)
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(logs) for f in fs if f.endswith(".log"))
        print(f"data: {n} records, {a.partitions} partitions, {size / 1e6:.1f} MB of .log "
              f"(written in {time.time() - t:.1f}s)", flush=True)
        from kafkawire.spark.session import make_session
        spark = make_session(a.master, "kafkawire-bench")
        spark.dataSource.register(baseline_source())
        par = spark.sparkContext.defaultParallelism
        import kafkawire
        print(f"spark {spark.version}, master {a.master} (parallelism {par}), kafkawire backend "
              f"{kafkawire.backend}", flush=True)
        frames = {
            "kafkawire": lambda: spark.read.format("kafkawire").option("minPartitions", par).load(logs),
            "aiokafka_tuples": lambda: spark.read.format("aiokafka_tuples").load(logs),
        }
        for name, mk in frames.items():             # warm-up (JIT, workers), and both read everything
            assert mk().count() == n, name
            mk().write.mode("overwrite").parquet(os.path.join(work, f"parquet-{name}"))
        results = {}
        for name, mk in frames.items():
            out = os.path.join(work, f"parquet-{name}")
            c = timed(lambda: mk().count(), repeat)
            w = timed(lambda: mk().write.mode("overwrite").parquet(out), repeat)
            # Kafka keys/values rarely repeat: Parquet's dictionary attempt is pure cost for both
            wn = timed(lambda: mk().write.mode("overwrite").option("parquet.enable.dictionary", "false")
                       .parquet(out), repeat)
            results[name] = (n / c, n / w, n / wn)
            print(f"  {name:<16} count {n / c:>10,.0f} rows/s ({c:.2f}s)   parquet {n / w:>10,.0f} rows/s "
                  f"({w:.2f}s)   parquet, no dictionary {n / wn:>10,.0f} rows/s ({wn:.2f}s)", flush=True)
        spark.stop()
        k = results["kafkawire"]
        b = results["aiokafka_tuples"]
        print()
        print(f"| Spark job ({a.master}, {n:,} records) | kafkawire rows/s | aiokafka tuples rows/s | ratio |")
        print("|---|---:|---:|---:|")
        for label, i in (("count()", 0), ("Parquet export (Spark defaults)", 1),
                         ("Parquet export (parquet.enable.dictionary=false)", 2)):
            print(f"| {label} | {k[i]:,.0f} | {b[i]:,.0f} | {k[i] / b[i]:.1f}x |")
        print(f"\nbar (>= 5x): count {'met' if k[0] / b[0] >= 5 else 'NOT met'}, "
              f"Parquet {'met' if max(k[1] / b[1], k[2] / b[2]) >= 5 else 'NOT met'}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
