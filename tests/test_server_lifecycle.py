"""The broker's log lifecycle while clients use it: retention deletes old segments under a
reading confluent-kafka consumer (which only meets OFFSET_OUT_OF_RANGE for offsets really
gone), a config altered through IncrementalAlterConfigs applies at the next pass, the cleaner
compacts a topic down to the latest value per key, and ``kafkawire verify`` is clean after."""
from __future__ import annotations

import glob
import os
import time

import pytest

from kafkawire.log.checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offset_checkpoint
from kafkawire.log.compact import CLEANER_CHECKPOINT
from kafkawire.testing import running_broker
from broker_support import verify_clean as _verify, wait_until as _wait

pytestmark = pytest.mark.one_backend
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, NewTopic)

FAST = {"log.retention.check.interval.ms": "50", "log.cleaner.backoff.ms": "50"}




def _segments(log_dir, topic):
    return sorted(glob.glob(os.path.join(log_dir, f"{topic}-0", "*.log")))




def _produce(bs, topic, items, value_size=200):
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 1})
    for key, value in items:
        p.produce(topic, key=key, value=None if value is None else value.ljust(value_size, b"."))
        p.poll(0)
    assert p.flush(20) == 0


def test_retention_while_a_consumer_reads(tmp_path):
    d = str(tmp_path / "logs")
    with running_broker(d, config=FAST) as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        a.create_topics([NewTopic("ret", 1, 1, config={"segment.bytes": "1024",
                                                        "file.delete.delay.ms": "0"})]
                        )["ret"].result(10)
        _produce(b.bootstrap_servers, "ret", [(b"k", b"a%d" % i) for i in range(60)])
        before = _segments(d, "ret")
        assert len(before) > 5
        time.sleep(0.3)
        assert _segments(d, "ret") == before          # the default retention keeps them

        c = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "r",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 1024, "message.max.bytes": 1024, "max.partition.fetch.bytes": 512,
                         "queued.max.messages.kbytes": 1, "enable.partition.eof": True})
        c.assign([ck.TopicPartition("ret", 0, 0)])
        seen, errors = [], []

        def drain(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                m = c.poll(0.05)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() != ck.KafkaError._PARTITION_EOF:
                        errors.append(m.error())
                    continue
                seen.append(m.offset())
                time.sleep(0.005)       # a slow reader, so deletion overtakes it

        drain(0.3)
        # retention.ms altered while the consumer reads: the next pass applies it.
        res = ConfigResource(ConfigResource.Type.TOPIC, "ret", incremental_configs=[
            ConfigEntry("retention.ms", "200", incremental_operation=AlterConfigOpType.SET)])
        a.incremental_alter_configs([res])[res].result(10)
        for i in range(3):                # keep producing while segments expire
            _produce(b.bootstrap_servers, "ret", [(b"k", b"b%d-%d" % (i, j)) for j in range(20)])
            drain(0.3)
        assert _wait(lambda: b.call(lambda: b.partitions.partition("ret", 0).log_start_offset) > 60)
        part = b.partitions.partition("ret", 0)
        start, end = b.call(lambda: (part.log_start_offset, part.log_end_offset))
        drain(1.0)
        assert _wait(lambda: (drain(0.2), seen and seen[-1] == end - 1)[1]), (seen[-5:], end)
        assert not errors, errors
        assert seen == sorted(set(seen))
        missing = set(range(end)) - set(seen)
        assert missing and max(missing) < start     # gaps only where the offsets are gone
        assert len(_segments(d, "ret")) < len(before)

        # A fetch of a deleted offset: OFFSET_OUT_OF_RANGE, reset to the log start.
        low, high = c.get_watermark_offsets(ck.TopicPartition("ret", 0), timeout=10)
        assert (low, high) == (start, end)
        c.assign([ck.TopicPartition("ret", 0, 0)])
        m = None
        while m is None or m.error():
            m = c.poll(5)
        assert m.offset() == start
        c.close()
    cp = read_offset_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT))
    assert cp[("ret", 0)] == start
    _verify(d)
    with running_broker(d, config={"log.retention.check.interval.ms": "600000"}) as b:
        assert b.call(lambda: b.partitions.partition("ret", 0).log_start_offset) == start


def test_compaction_keeps_the_latest_value_per_key(tmp_path):
    d = str(tmp_path / "logs")
    with running_broker(d, config=FAST) as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        a.create_topics([NewTopic("comp", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "1024", "file.delete.delay.ms": "0",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})])["comp"].result(10)
        latest = {}
        items = []
        for rnd in range(8):
            for k in range(10):
                key, value = b"key%d" % k, b"v%d-%d" % (rnd, k)
                items.append((key, value))
                latest[key] = value
        _produce(b.bootstrap_servers, "comp", items)
        # A record larger than segment.bytes rolls: the last round leaves the active segment
        # (the cleaner never cleans that one, as Kafka's).
        _produce(b.bootstrap_servers, "comp", [(b"end", b"end")], value_size=2000)
        latest[b"end"] = b"end"
        cp = os.path.join(d, CLEANER_CHECKPOINT)
        part = b.partitions.partition("comp", 0)
        active = b.call(lambda: part.writer.active_segment_base)
        assert active > 0
        assert _wait(lambda: os.path.exists(cp)
                     and read_offset_checkpoint(cp).get(("comp", 0), 0) >= active)
        assert b.partitions.topic_config(b.partitions.topics["comp"], "cleanup.policy") == "compact"

        c = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "c",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
        c.assign([ck.TopicPartition("comp", 0, 0)])
        got = []
        while True:
            m = c.poll(10)
            assert m is not None
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                break
            got.append((m.key(), m.value().rstrip(b".")))
        c.close()
        assert sorted(got) == sorted(latest.items())
        assert len(got) == len(latest)
        # The coordinators' topics are compacted, as Kafka creates them.
        b.call(lambda: b.partitions.ensure_topic("__consumer_offsets", 1, internal=True))
        t = b.partitions.topics["__consumer_offsets"]
        assert b.partitions.topic_config(t, "cleanup.policy") == "compact"
    _verify(d)
