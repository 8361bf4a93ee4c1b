"""``df.write.format("kafkawire")``: Kafka's own reader accepts the output; reading it back gives
the same rows; a failed task or job leaves nothing half-written."""
from __future__ import annotations

import os

import pytest

from spark_fixtures import logdirs, spark  # noqa: F401

from kafkawire.log import Log

pytestmark = [pytest.mark.one_backend, pytest.mark.spark]

COLS = ("topic", "partition", "key", "value", "timestamp", "headers")
HELPER = "LogFolderHelper"


def _rows(df):
    return [tuple(r) for r in df.orderBy("topic", "partition", "offset").select(*COLS).collect()]


def test_written_folders_pass_kafkas_reader_and_read_back_the_same(spark, logdirs, tmp_path, java_runner):
    src = spark.read.format("kafkawire").option("includeHeaders", "true").load(logdirs)
    out = str(tmp_path / "out")
    (src.select("key", "value", "topic", "partition", "headers", "timestamp").write.format("kafkawire")
        .mode("append").option("compression", "zstd").option("segmentBytes", "64k")
        .option("batchSize", "16k").save(out))
    back = spark.read.format("kafkawire").option("includeHeaders", "true").load(out)
    assert _rows(back) == _rows(src)
    names = sorted(os.listdir(out))
    assert "_kafkawire_temporary" not in names
    for name in names:
        with Log.open(os.path.join(out, name)) as log:
            assert log.verify().ok
        r = java_runner.run(HELPER, "read", os.path.join(out, name))
        assert r.stdout.decode().rstrip().endswith("OK"), (name, r)
    # appending again continues the offsets; overwrite starts over
    src.filter("topic = 'orders'").select("value", "topic", "partition").write.format("kafkawire") \
        .mode("append").save(out)
    n = src.filter("topic = 'orders'").count()
    assert spark.read.format("kafkawire").load(out).filter("topic = 'orders'").count() == 2 * n
    src.filter("topic = 'orders'").select("value", "topic", "partition").write.format("kafkawire") \
        .mode("overwrite").save(out)
    assert spark.read.format("kafkawire").load(out).filter("topic = 'orders'").count() == n


def test_rows_without_a_partition_go_where_kafkas_partitioner_puts_them(spark, tmp_path):
    from kafkawire.client.partitioner import partition_for_key
    rows = [(b"k%d" % i, b"v%d" % i) for i in range(300)]
    out = str(tmp_path / "keyed")
    spark.createDataFrame(rows, "key binary, value binary").write.format("kafkawire") \
        .mode("append").option("topic", "events").option("partitions", "3").save(out)
    got = spark.read.format("kafkawire").load(out).select("partition", "key").collect()
    assert len(got) == 300
    assert all(r["partition"] == partition_for_key(bytes(r["key"]), 3) for r in got)


def test_a_failed_job_leaves_nothing(spark, tmp_path):
    out = tmp_path / "failed"
    df = spark.createDataFrame([("t", i, b"v") for i in (0, 1, 2, -1)], "topic string, partition int, value binary")
    with pytest.raises(Exception, match="negative"):
        df.repartition(2).write.format("kafkawire").mode("append").save(str(out))
    assert not out.exists() or os.listdir(out) == []
    with pytest.raises(Exception, match="needs a value column"):
        df.select("topic").write.format("kafkawire").mode("append").save(str(out))


def test_only_committed_task_attempts_are_appended(tmp_path, monkeypatch):
    """A task attempt that failed half-way, then its retry: the job commit takes the retry only."""
    import pyarrow as pa
    import pyspark
    from kafkawire.spark.sink import KafkaWireWriter, parse_write_options

    class Ctx:
        def __init__(self, attempt):
            self.attempt = attempt

        def partitionId(self):  # noqa: N802
            return 0

        def attemptNumber(self):  # noqa: N802
            return self.attempt

    writer = KafkaWireWriter(parse_write_options({"path": str(tmp_path), "topic": "t"}), False)
    batch = pa.RecordBatch.from_pydict({"value": [b"a", b"b", b"c"], "partition": [0, 0, 1]})

    def failing():
        yield batch
        raise RuntimeError("executor lost")

    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: Ctx(0)))
    with pytest.raises(RuntimeError):
        writer.write(failing())
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: Ctx(1)))
    msg = writer.write(iter([batch]))
    assert not os.path.exists(tmp_path / "t-0")          # nothing visible before the job commit
    writer.commit([msg])
    with Log.open(str(tmp_path / "t-0")) as log:
        assert [r.value for r in log.records()] == [b"a", b"b"]
    assert sorted(os.listdir(tmp_path)) == ["t-0", "t-1"]


def _stream_once(spark, src, out, checkpoint):
    df = spark.readStream.schema("key binary, value binary, topic string, partition int") \
        .option("maxFilesPerTrigger", 1).parquet(src)
    q = (df.writeStream.format("kafkawire").option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start(out))
    q.awaitTermination()
    assert q.exception() is None


def test_write_stream_commits_each_micro_batch_once(spark, tmp_path):
    """A micro-batch replayed after a restart (its commit not in the checkpoint yet) is not
    written twice; later batches append after it."""
    src, out, ck = tmp_path / "in", str(tmp_path / "out"), str(tmp_path / "ck")
    src.mkdir()

    def add(n, part):
        rows = [(b"k%d" % i, b"v%d-%d" % (n, i), "t", i % 2) for i in range(50)]
        spark.createDataFrame(rows, "key binary, value binary, topic string, partition int") \
            .coalesce(1).write.parquet(str(src / f"f{n}"), mode="overwrite")
        return rows

    want = add(0, 0)
    # one parquet folder per file for maxFilesPerTrigger; the stream reads the files under src
    for n in (1, 2):
        want += add(n, 0)
    src_files = str(src / "*")
    _stream_once(spark, src_files, out, ck)
    batches = sorted(int(f) for f in os.listdir(os.path.join(out, "_kafkawire_metadata")))
    assert batches == [0, 1, 2]

    def rows():
        got = spark.read.format("kafkawire").load(out).select("key", "value", "topic", "partition")
        return sorted((bytes(r[0]), bytes(r[1]), r[2], r[3]) for r in got.collect())

    assert rows() == sorted(want)
    # the query stopped after the sink committed batch 2 but before the checkpoint said so:
    # the restarted query replays batch 2, which the sink does not write again
    for name in ("2", ".2.crc"):
        if os.path.exists(os.path.join(ck, "commits", name)):
            os.remove(os.path.join(ck, "commits", name))
    _stream_once(spark, src_files, out, ck)
    assert rows() == sorted(want)
    want += add(3, 0)
    _stream_once(spark, src_files, out, ck)
    assert rows() == sorted(want)
    assert os.listdir(os.path.join(out, "_kafkawire_temporary", "stream")) == []


def test_a_stream_commit_that_stopped_half_way_is_finished_once(tmp_path, monkeypatch):
    import pyarrow as pa
    import kafkawire.spark.sink as S
    wo = S.parse_write_options({"path": str(tmp_path), "topic": "t"})
    writer = S.KafkaWireStreamWriter(wo)

    def staged():
        return [writer.write(iter([pa.RecordBatch.from_pydict(
            {"value": [b"%d-%d" % (task, i) for i in range(5)], "partition": [0, 0, 1, 1, 1]})]))
            for task in range(2)]

    calls = []
    real = S._append_folder

    def crash_on_second(w, folder, **kw):
        calls.append(folder)
        if len(calls) == 2:
            raise OSError("driver lost")
        return real(w, folder, **kw)

    monkeypatch.setattr(S, "_append_folder", crash_on_second)
    with pytest.raises(OSError):
        writer.commit(staged(), 0)
    monkeypatch.setattr(S, "_append_folder", real)
    writer.commit(staged(), 0)          # Spark runs the batch again: its first commit is finished
    writer.commit(staged(), 0)          # and a third time: already committed
    writer.commit(staged(), 1)
    values = {}
    for p in (0, 1):
        with Log.open(str(tmp_path / f"t-{p}")) as log:
            values[p] = [r.value for r in log.records()]
    assert values[0] == [b"0-0", b"0-1", b"1-0", b"1-1"] * 2
    assert values[1] == [b"0-2", b"0-3", b"0-4", b"1-2", b"1-3", b"1-4"] * 2
    assert sorted(os.listdir(tmp_path / "_kafkawire_metadata")) == ["0", "1"]


def test_a_stream_commit_moves_large_partitions_and_finishes_a_move_cut_short(tmp_path, monkeypatch,
                                                                             java_runner):
    """writeStream moves large staged partitions in as segments; a commit stopped inside a move
    (one segment moved, the next re-based in place but not renamed) is finished by the next
    attempt with every record once, in order."""
    import pyarrow as pa

    import kafkawire.spark.sink as S

    monkeypatch.setattr(S, "MOVE_BYTES", 20_000)
    wo = S.parse_write_options({"path": str(tmp_path), "topic": "t", "segmentBytes": "16k",
                                "batchSize": "4k", "indexIntervalBytes": "4k"})
    writer = S.KafkaWireStreamWriter(wo)
    sizes = {0: 700, 1: 20, 2: 600}           # tasks 0 and 2 are moved in, task 1 is copied

    def staged(batch):
        return [writer.write(iter([pa.RecordBatch.from_pydict(
            {"value": [b"%d-%d-%05d" % (batch, task, i) * 8 for i in range(n)],
             "partition": pa.array([0] * n, pa.int32())})])) for task, n in sizes.items()]

    real_replace = os.replace
    logs_moved = []

    def cut_short(src, dst):
        if str(src).endswith(".log") and S.TEMPORARY in str(src):
            logs_moved.append(src)
            if len(logs_moved) == 2:
                raise OSError("driver lost")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", cut_short)
    with pytest.raises(OSError):
        writer.commit(staged(0), 0)
    monkeypatch.setattr(os, "replace", real_replace)
    moved = []
    real = S.LogWriter.append_segments
    monkeypatch.setattr(S.LogWriter, "append_segments",
                        lambda self, folder: moved.append(folder) or real(self, folder))
    writer.commit(staged(0), 0)               # Spark runs the batch again: the commit is finished
    assert len(moved) == 1                    # task 2's; the rest of task 0's is copied
    writer.commit(staged(0), 0)               # already committed
    writer.commit(staged(1), 1)
    assert len(moved) == 3
    want = [b"%d-%d-%05d" % (b, t, i) * 8 for b in (0, 1) for t, n in sizes.items() for i in range(n)]
    with Log.open(str(tmp_path / "t-0")) as log:
        assert log.verify().ok
        assert [r.value for r in log.records()] == want
        assert [r.offset for r in log.records()] == list(range(len(want)))
    assert sorted(os.listdir(tmp_path)) == ["_kafkawire_metadata", "_kafkawire_temporary", "t-0"]
    assert os.listdir(tmp_path / "_kafkawire_temporary" / "stream") == []
    r = java_runner.run(HELPER, "read", str(tmp_path / "t-0"))
    assert r.stdout.decode().rstrip().endswith("OK"), r


class _Task:
    """A stand-in for Spark's TaskContext in tests that call the writer directly."""

    def __init__(self, pid=0, attempt=0):
        self.pid, self.attempt = pid, attempt

    def partitionId(self):  # noqa: N802
        return self.pid

    def attemptNumber(self):  # noqa: N802
        return self.attempt


def test_arrow_batches_and_rows_with_headers_keep_each_partitions_order(tmp_path, monkeypatch,
                                                                       java_runner):
    """Arrow batches are encoded column-wise, batches with headers row by row: each partition
    gets its rows in order, Kafka's reader accepts the folders, and rows without a partition
    go where Kafka's partitioner (or the keyless rotation) puts them."""
    import datetime as dt

    import pyarrow as pa
    import pyspark

    from kafkawire.client.partitioner import partition_for_key
    from kafkawire.spark.sink import KafkaWireWriter, parse_write_options

    utc = dt.timezone.utc
    hdr = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

    def batch(i, n, headers=False):
        keys = [None if r % 3 == 0 else b"k%d" % r for r in range(n)]
        cols = {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array([None if r % 7 == 6 else "v%d-%d" % (i, r) for r in range(n)], pa.string()),
            "topic": pa.array([None if r % 2 else ("a" if r % 4 else "b") for r in range(n)]),
            "partition": pa.array([None if r % 5 else r % 2 for r in range(n)], pa.int32()),
            "timestamp": pa.array([None if r == 1 else dt.datetime(2024, 1, 1, 0, 0, r % 60, 1500, tzinfo=utc)
                                   for r in range(n)], pa.timestamp("us", tz="UTC")),
        }
        if headers:
            cols["headers"] = pa.array([[{"key": "h", "value": b"%d" % r}] if r % 2 else None
                                        for r in range(n)], hdr)
        return pa.RecordBatch.from_pydict(cols)

    batches = [batch(0, 400), batch(1, 50, headers=True), batch(2, 300), batch(3, 9, headers=True)]
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Task(pid=1)))
    wo = parse_write_options({"path": str(tmp_path), "topic": "d", "partitions": "3",
                              "compression": "lz4", "batchSize": "4k"})
    writer = KafkaWireWriter(wo, False)
    writer.commit([writer.write(iter(batches))])

    want = {}
    epoch = dt.datetime(1970, 1, 1, tzinfo=utc)
    turn = 1                        # the keyless rotation starts at the task's partition id
    for rb in batches:
        d = rb.to_pydict()
        for r in range(rb.num_rows):
            topic, key, p = d["topic"][r] or "d", d["key"][r], d["partition"][r]
            if p is None:
                if key is not None:
                    p = partition_for_key(key, 3)
                else:
                    p, turn = turn % 3, turn + 1
            ts = d["timestamp"][r]
            hs = [(h["key"], h["value"]) for h in d["headers"][r]] if d.get("headers") and \
                d["headers"][r] else []
            value = d["value"][r]
            ms = None if ts is None else (ts - epoch) // dt.timedelta(milliseconds=1)
            want.setdefault(f"{topic}-{p}", []).append(
                (key, None if value is None else value.encode(), ms, hs))
    assert sorted(os.listdir(tmp_path)) == sorted(want)
    for name, rows in want.items():
        with Log.open(str(tmp_path / name)) as log:
            assert log.verify().ok
            got = [(r.key, r.value, r.timestamp, list(r.headers)) for r in log.records()]
            assert [r.offset for r in log.records()] == list(range(len(rows)))
        assert [(k, v, h) for k, v, _, h in got] == [(k, v, h) for k, v, _, h in rows], name
        # a null timestamp becomes the write time; the others are kept to the millisecond
        assert [t for _, _, t, _ in got if t < 1_704_067_200_000 + 60_000] == \
            [t for _, _, t, _ in rows if t is not None], name
        r = java_runner.run(HELPER, "read", str(tmp_path / name))
        assert r.stdout.decode().rstrip().endswith("OK"), (name, r)


def test_the_trusted_append_still_checks_the_crc(tmp_path):
    """The sink appends its own batches without the per-record checks, but a batch whose bytes
    changed is still refused."""
    from kafkawire.errors import CorruptRecordError
    from kafkawire.log import LogWriter
    from kafkawire.records import BatchBuilder
    b = BatchBuilder(2)
    for i in range(10):
        b.append(b"v%d" % i)
    data = bytearray(b.build())
    data[-1] ^= 1
    with LogWriter(str(tmp_path / "t-0")) as w:
        with pytest.raises(CorruptRecordError, match="CRC"):
            w.append_batches([bytes(data)], trusted=True)
        assert w.next_offset == 0


def test_columns_of_the_wrong_type_are_refused_when_the_write_is_defined():
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    from kafkawire.spark.options import OptionError
    from kafkawire.spark.sink import check_schema, parse_write_options
    wo = parse_write_options({"path": "/tmp/x", "topic": "t"})
    check_schema(StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                             StructField("partition", IntegerType())]), wo)
    with pytest.raises(OptionError, match="column value is int; it must be binary or string"):
        check_schema(StructType([StructField("value", IntegerType())]), wo)
    with pytest.raises(OptionError, match="column partition is string"):
        check_schema(StructType([StructField("value", BinaryType()),
                                 StructField("partition", StringType())]), wo)


def test_large_staged_partitions_move_in_as_segments(tmp_path, monkeypatch, java_runner):
    """At the job commit, a task's large staged partition becomes segments of the target as it
    is (offsets re-based), a small one is copied; the log reads as if appended in task order."""
    import pyarrow as pa
    import pyspark

    import kafkawire.spark.sink as S

    monkeypatch.setattr(S, "MOVE_BYTES", 20_000)
    out = tmp_path / "out"
    with S.LogWriter(str(out / "t-0")) as w:         # the target already holds records
        w.append_records([b"old-%d" % i for i in range(5)])
    wo = S.parse_write_options({"path": str(out), "topic": "t", "segmentBytes": "16k",
                                "batchSize": "4k", "indexIntervalBytes": "4k"})
    writer = S.KafkaWireWriter(wo, False)
    sizes = {0: 900, 1: 30, 2: 700}                      # tasks 0 and 2 move, task 1 is copied
    messages = []
    for task, n in sizes.items():
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda t=task: _Task(pid=t)))
        rb = pa.RecordBatch.from_pydict({"value": [b"%d-%05d" % (task, i) * 8 for i in range(n)],
                                         "partition": pa.array([0] * n, pa.int32())})
        messages.append(writer.write(iter([rb.slice(0, n // 2), rb.slice(n // 2)])))
    moved = []
    real = S.LogWriter.append_segments
    monkeypatch.setattr(S.LogWriter, "append_segments",
                        lambda self, folder: moved.append(os.path.basename(os.path.dirname(folder)))
                        or real(self, folder))
    writer.commit(list(reversed(messages)))              # Spark's order does not matter
    assert moved == ["00000-0", "00002-0"]
    want = [b"old-%d" % i for i in range(5)] + [b"%d-%05d" % (t, i) * 8 for t, n in sizes.items()
                                                 for i in range(n)]
    with Log.open(str(out / "t-0")) as log:
        assert log.verify().ok
        assert len(log.segments) > 4
        assert [r.value for r in log.records()] == want
        assert [r.offset for r in log.records()] == list(range(len(want)))
    assert sorted(os.listdir(out)) == ["t-0"]
    r = java_runner.run(HELPER, "read", str(out / "t-0"))
    assert r.stdout.decode().rstrip().endswith("OK"), r


def test_headers_are_spliced_into_the_column_encoders_records(tmp_path):
    """Rows with headers take the columnar encoder too: every record reads back with its key,
    value, timestamp and headers, whatever the lengths (varints of one to three bytes, a
    header count growing a record's length varint), null and empty parts, and sliced columns."""
    import random

    import pyarrow as pa

    from kafkawire.spark.sinkbatch import PartitionBatches, Router

    rng = random.Random(7)
    hdr = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))

    def blob(n):
        return bytes(rng.randrange(256) for _ in range(n))

    rows = []
    for i in range(700):
        key = None if i % 5 == 0 else blob(rng.choice((0, 3, 70, 200)))
        value = None if i % 11 == 0 else blob(rng.choice((0, 1, 40, 60, 63, 64, 130, 20000)))
        if i % 4 == 0:
            headers = None
        elif i % 4 == 1:
            headers = []
        else:
            headers = [{"key": rng.choice(("", "h", "trace-" * rng.randrange(1, 30))),
                        "value": None if j % 3 == 2 else blob(rng.choice((0, 5, 100, 300)))}
                       for j in range(rng.choice((1, 2, 5, 70)))]
        rows.append((key, value, 1_700_000_000_000 + rng.randrange(-10**9, 10**9), headers))
    table = pa.table({"key": pa.array([r[0] for r in rows], pa.binary()),
                      "value": pa.array([r[1] for r in rows], pa.binary()),
                      "timestamp": pa.array([r[2] for r in rows], pa.int64()),
                      "headers": pa.array([r[3] for r in rows], hdr)})
    pb = PartitionBatches(str(tmp_path / "t-0"), "none", 16 << 10, 1 << 20, 4096)
    for a in range(0, len(rows), 97):            # sliced pieces, as the router hands them on
        pb.add_arrow(table.slice(a, 97))
    pb.close()
    assert pb.records == len(rows)
    # the router keeps the headers column (and drops one that is null throughout)
    names = [n for _, t in Router("t", 1, 0).split(table.to_batches()[0]) for n in t.column_names]
    assert names == ["value", "key", "timestamp", "headers"]
    with Log.open(str(tmp_path / "t-0")) as log:
        assert log.verify().ok
        got = [(r.key, r.value, r.timestamp, list(r.headers)) for r in log.records()]
    want = [(k, v, t, [(h["key"], h["value"]) for h in hs] if hs else []) for k, v, t, hs in rows]
    assert got == want


def test_a_header_without_a_key_is_refused(tmp_path):
    import pyarrow as pa

    from kafkawire.spark.options import OptionError
    from kafkawire.spark.sinkbatch import PartitionBatches

    hdr = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = pa.table({"value": pa.array([b"a", b"b"]),
                      "headers": pa.array([[{"key": "k", "value": b"1"}], [{"key": None, "value": b"2"}]],
                                          hdr)})
    pb = PartitionBatches(str(tmp_path / "t-0"), "none", 1 << 20, 1 << 20, 4096)
    pb.add_arrow(table)
    with pytest.raises(OptionError, match="null key"):
        pb.close()
