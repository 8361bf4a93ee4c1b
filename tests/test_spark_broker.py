"""Spark reads the folders a running broker writes: ``spark.read.format("kafkawire")`` on the
broker's log dir gives the rows its clients consumed, while producers are still writing
(a prefix of each partition, every row equal to what a consumer gets at that offset) and
once they stopped (exactly the same rows)."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
ck = pytest.importorskip("confluent_kafka")

from broker_support import WAIT, consume_all  # noqa: E402
from spark_fixtures import spark  # noqa: E402,F401  (the session fixture)
from kafkawire.testing import running_broker  # noqa: E402

pytestmark = pytest.mark.one_backend
TOPIC = "events"
PARTITIONS = 3


def _produce(bs: str, first: int, count: int) -> None:
    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
    for i in range(first, first + count):
        p.produce(TOPIC, key=b"k%d" % (i % 17), value=b"event %d" % i, partition=i % PARTITIONS,
                  headers=[("n", b"%d" % i)])
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(WAIT) == 0


def _consume(bs: str) -> dict:
    """Every record of the topic, as a consumer gets it: {(partition, offset): (key, value)}."""
    return consume_all(bs, TOPIC, PARTITIONS)


def _spark_rows(spark, log_dir: str) -> dict:   # noqa: F811
    df = spark.read.format("kafkawire").option("subscribe", TOPIC).load(log_dir)
    return {(r.partition, r.offset): (bytes(r.key), bytes(r.value))
            for r in df.select("partition", "offset", "key", "value").collect()}


def test_spark_reads_the_folders_a_running_broker_writes(spark, tmp_path):  # noqa: F811
    d = str(tmp_path / "logs")
    with running_broker(d) as b:
        b.create_topic(TOPIC, PARTITIONS, {"segment.bytes": "4096"})
        _produce(b.bootstrap_servers, 0, 600)
        before = _consume(b.bootstrap_servers)
        assert len(before) == 600

        writer = threading.Thread(target=_produce, args=(b.bootstrap_servers, 600, 1500))
        writer.start()
        try:
            during = _spark_rows(spark, d)        # while the broker appends
        finally:
            writer.join(WAIT)
        after = _consume(b.bootstrap_servers)
        assert len(after) == 2100
        # A consistent prefix of each partition, every row as the consumer got it.
        assert set(before) <= set(during)
        assert all(after[k] == v for k, v in during.items())
        for p in range(PARTITIONS):
            offsets = sorted(o for q, o in during if q == p)
            assert offsets == list(range(len(offsets)))

        assert _spark_rows(spark, d) == after     # the producers stopped: the same rows
    assert _spark_rows(spark, d) == after         # and after the broker stopped
