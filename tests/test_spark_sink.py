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
