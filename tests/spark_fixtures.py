"""Shared helpers for the Spark tests: one local SparkSession, sample data, expected rows.

``spark`` is session-scoped (a session takes ~10 s to start); the tests
import these fixtures with ``from spark_fixtures import *``.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Tuple

import pytest

TRACE = None  # path of the slice trace file the session's workers append to


@pytest.fixture(scope="session")
def logdirs(tmp_path_factory):
    """A log.dirs folder: LogWriter's sample topics plus partitions written by Kafka's Java code."""
    from kafkawire.spark.sample import build_sample
    root = tmp_path_factory.mktemp("logdirs")
    build_sample(str(root), scale=3000, segment_bytes=64 << 10)
    try:
        from javahelper import JavaRunner, find_kafka_jars
        jars = find_kafka_jars()
    except Exception:  # pragma: no cover - Java interop unavailable
        jars = None
    if jars is not None:
        jr = JavaRunner(jars, tmp_path_factory.mktemp("java-classes-spark"))
        specs = {"jplain-0": ["codec=zstd", "records=20"], "jtxn-0": ["txn=1", "codec=lz4"],
                 "jgaps-0": ["gaps=1", "codec=gzip"], "jold-0": ["magic=1", "codec=snappy"],
                 "jmulti-0": ["batchesPerAppend=3", "codec=snappy", "interval=1024"]}
        for name, args in specs.items():
            r = jr.run("LogFolderHelper", "write", str(root / name), "segmentBytes=32768", *args)
            assert r.returncode == 0, r
    return str(root)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    global TRACE
    if TRACE is None:
        # one file for the whole run: each test module that imports this fixture gets its own
        # instance, but the session (and its workers' environment) is the first one's
        TRACE = str(tmp_path_factory.mktemp("trace") / "slices.txt")
    os.environ["KAFKAWIRE_SPARK_TRACE"] = TRACE
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from kafkawire.spark.session import make_session
    session = make_session("local[2]", "kafkawire-tests",
                           {"spark.sql.python.filterPushdown.enabled": "true"})
    yield session
    session.stop()


def trace_bytes() -> int:
    """Bytes of .log files the Spark tasks read since the last call."""
    total = 0
    if TRACE and os.path.exists(TRACE):
        with open(TRACE) as f:
            for line in f:
                _p, a, b = line.rsplit(" ", 2)
                total += int(b) - int(a)
        os.remove(TRACE)
    return total


def partition_dirs(logdirs: str) -> List[str]:
    return sorted(d for d in os.listdir(logdirs) if os.path.isdir(os.path.join(logdirs, d)))


def expected_rows(logdirs: str, *, topics=None, ranges: Dict[Tuple[str, int], Tuple[int, int]] = None,
                  isolation: str = "read_uncommitted", headers: bool = True,
                  ts_lo=None, ts_hi=None) -> List[tuple]:
    """What kafkawire's log reader returns, as comparable tuples sorted by (topic, partition, offset).

    The reference runs on the pure-Python kernels: the Arrow path under test
    uses the active backend's columnar kernels, so the two share no decoding code.
    """
    from kafkawire import _kernels
    previous = _kernels.backend
    _kernels.use("pure")
    try:
        return _expected_rows(logdirs, topics=topics, ranges=ranges, isolation=isolation,
                              headers=headers, ts_lo=ts_lo, ts_hi=ts_hi)
    finally:
        _kernels.use(previous)


def _expected_rows(logdirs, *, topics, ranges, isolation, headers, ts_lo, ts_hi):
    from kafkawire.log import Log
    out = []
    for d in partition_dirs(logdirs):
        topic, p = d.rsplit("-", 1)
        tp = (topic, int(p))
        if topics is not None and topic not in topics:
            continue
        if ranges is not None and tp not in ranges:
            continue
        log = Log.open(os.path.join(logdirs, d))
        s, e = ranges[tp] if ranges is not None else (None, None)
        for r in log.records(start_offset=s, end_offset=e, isolation=isolation):
            if ts_lo is not None and r.timestamp < ts_lo or ts_hi is not None and r.timestamp >= ts_hi:
                continue
            tt = {"CreateTime": 0, "LogAppendTime": 1}.get(r.timestamp_type, -1)
            hdrs = [(k, v) for k, v in r.headers] if headers else None
            out.append((topic, int(p), r.offset, r.key, r.value, r.timestamp, tt,
                        (hdrs or None) if headers else None))
    return sorted(out, key=lambda t: t[:3])


def rows_of_table(table, headers: bool = True) -> List[tuple]:
    """Arrow table rows (kafkawire schema) as the same tuples as :func:`expected_rows`."""
    import pyarrow as pa
    cols = table.to_pydict()
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    out = []
    for i in range(table.num_rows):
        h = None
        if headers and cols["headers"][i] is not None:
            h = [(x["key"], x["value"]) for x in cols["headers"][i]] or None
        out.append((cols["topic"][i], cols["partition"][i], cols["offset"][i], cols["key"][i],
                    cols["value"][i], micros[i] // 1000, cols["timestampType"][i], h))
    return sorted(out, key=lambda t: t[:3])


def rows_of_spark(rows, headers: bool = True) -> List[tuple]:
    import calendar
    out = []
    for r in rows:
        ts = r["timestamp"]
        ms = calendar.timegm(ts.utctimetuple()) * 1000 + ts.microsecond // 1000
        h = None
        if headers and r["headers"] is not None:
            h = [(x["key"], None if x["value"] is None else bytes(x["value"])) for x in r["headers"]] or None
        out.append((r["topic"], r["partition"], r["offset"],
                    None if r["key"] is None else bytes(r["key"]),
                    None if r["value"] is None else bytes(r["value"]), ms, r["timestampType"], h))
    return sorted(out, key=lambda t: t[:3])


def read_in_process(options: dict, filters=None):
    """Plan and read through the data source classes without Spark: (tasks, pyarrow.Table)."""
    import pyarrow as pa
    from kafkawire.spark.options import parse_options
    from kafkawire.spark.reader import make_reader
    from kafkawire.spark.schema import arrow_schema
    ro = parse_options(options)
    reader = make_reader(ro)
    if filters is not None:
        list(reader.pushFilters(filters))
    tasks = reader.partitions()
    batches = [b for t in tasks for b in reader.read(t)]
    return tasks, pa.Table.from_batches(batches, schema=arrow_schema(ro.include_headers))
