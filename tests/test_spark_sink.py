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
