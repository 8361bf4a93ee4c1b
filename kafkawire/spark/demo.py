"""The demo pipeline: sample log.dirs -> Spark -> per-partition summary + Parquet.

    python -m kafkawire.spark.demo [--master local[2] | spark://host:7077] [--out DIR]

Writes a sample ``log.dirs`` folder with :class:`kafkawire.LogWriter` (or
reads ``--logs DIR``), reads it with the ``kafkawire`` format, prints one line
per topic-partition (records, bytes of keys+values, time range, distinct
keys) and writes every record to Parquet under ``DIR/parquet`` (partitioned by
topic).  Against a cluster, ``DIR`` must be a path the executors see too (the
same machine or a shared file system) and kafkawire must be installed there.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import kafkawire
from kafkawire.spark.sample import build_sample
from kafkawire.spark.session import make_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def summarize(spark: SparkSession, logs: str, out: str, *,
              isolation: str = "read_uncommitted") -> List[Dict[str, Any]]:
    """The pipeline itself: returns the summary rows and writes ``out/parquet``."""
    from pyspark.sql import functions as F
    df = (spark.read.format("kafkawire").option("includeHeaders", "true")
          .option("isolation", isolation).load(logs))
    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    summary = (df.groupBy("topic", "partition")
               .agg(F.count(F.lit(1)).alias("records"), F.sum(size).alias("bytes"),
                    F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                    # magic-0 records have no timestamp (-1, timestampType -1): leave them out
                    F.min(F.when(F.col("timestampType") >= 0, F.col("timestamp"))).alias("first_time"),
                    F.max(F.when(F.col("timestampType") >= 0, F.col("timestamp"))).alias("last_time"),
                    F.countDistinct("key").alias("keys"),
                    F.sum(F.when(F.col("headers").isNotNull(), 1).otherwise(0)).alias("with_headers"))
               .orderBy("topic", "partition"))
    rows = [r.asDict() for r in summary.collect()]
    # Kafka keys and values rarely repeat, so Parquet's dictionary attempt only costs time
    (df.write.mode("overwrite").option("parquet.enable.dictionary", "false")
     .partitionBy("topic").parquet(os.path.join(out, "parquet")))
    return rows


def format_summary(rows: List[Dict[str, Any]]) -> str:
    head = (f"{'topic-partition':<16} {'records':>8} {'bytes':>10} {'offsets':>15} "
            f"{'keys':>6} {'hdrs':>6}  time range (UTC)")
    lines = [head, "-" * len(head)]
    for r in rows:
        t0 = r["first_time"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if r["first_time"] else "-"
        t1 = r["last_time"].strftime("%H:%M:%S.%f")[:-3] if r["last_time"] else "-"
        lines.append(f"{r['topic'] + '-' + str(r['partition']):<16} {r['records']:>8} {r['bytes']:>10} "
                     f"{str(r['first_offset']) + '..' + str(r['last_offset']):>15} {r['keys']:>6} "
                     f"{r['with_headers']:>6}  {t0} .. {t1}")
    lines.append(f"{'total':<16} {sum(r['records'] for r in rows):>8} {sum(r['bytes'] for r in rows):>10}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafkawire.spark.demo",
                                 description="Kafka log.dirs -> Spark -> summary + Parquet")
    ap.add_argument("--master", default="local[2]", help="local[N] (default local[2]) or spark://host:port")
    ap.add_argument("--out", default="kafkawire-demo", help="output folder (default ./kafkawire-demo)")
    ap.add_argument("--logs", help="read this log.dirs folder instead of writing the sample")
    ap.add_argument("--scale", type=int, default=20_000, help="sample records per partition (default 20000)")
    ap.add_argument("--isolation", default="read_uncommitted", choices=["read_uncommitted", "read_committed"])
    a = ap.parse_args(argv)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    logs = os.path.abspath(a.logs) if a.logs else os.path.join(out, "logs")
    if not a.logs:
        shutil.rmtree(logs, ignore_errors=True)
        t = time.time()
        counts = build_sample(logs, a.scale)
        print(f"sample log.dirs: {logs} ({len(counts)} partitions, {sum(counts.values())} records, "
              f"{time.time() - t:.1f}s)", flush=True)
    t = time.time()
    # the sample is small: a few shuffle partitions, not Spark's 200, on a cluster too
    spark = make_session(a.master, "kafkawire-demo", {"spark.sql.shuffle.partitions": "8"})
    print(f"spark {spark.version} master={a.master} ({time.time() - t:.1f}s to start), "
          f"kafkawire {kafkawire.__version__} backend={kafkawire.backend}", flush=True)
    try:
        t = time.time()
        rows = summarize(spark, logs, out, isolation=a.isolation)
        took = time.time() - t
    finally:
        spark.stop()
    print(format_summary(rows))
    print(f"parquet: {os.path.join(out, 'parquet')}  ({took:.1f}s for summary + Parquet export)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
