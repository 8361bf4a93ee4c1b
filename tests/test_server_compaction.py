"""The cleaner's smaller rules, in the log package and in the broker: a segment nothing is
left of is removed, not left as an empty file; ``max.compaction.lag.ms`` forces a cleaning
whatever the dirty ratio; the broker cleans the logs past that lag, then the dirtiest,
first; ``segment.jitter.ms`` reaches the partition's writer; and a consumer reading while
the cleaner rewrites the partition under it sees no gap and no error."""
from __future__ import annotations

import glob
import importlib
import os
import threading

import pytest

from broker_support import WAIT, fill_keyed, verify_clean, wait_until
from kafkawire import Log, LogWriter
from kafkawire.log.checkpoints import write_offset_checkpoint
from kafkawire.testing import running_broker

pytestmark = pytest.mark.one_backend
compact_mod = importlib.import_module("kafkawire.log.compact")   # (the package exports a function of that name)
TS = 1_700_000_000_000
DAY = 86_400_000


def _write(folder: str, rounds) -> None:
    """One segment per entry of ``rounds`` (a list of keys), then an active segment."""
    with LogWriter(folder, segment_bytes=1 << 20) as w:
        for n, keys in enumerate(rounds):
            w.append_records([{"key": k, "value": b"%s@%d" % (k, n), "timestamp": TS + n}
                              for k in keys])
            w.roll()
        w.append_records([{"key": b"tail", "value": b"tail", "timestamp": TS + 99}])


def test_a_segment_nothing_is_left_of_is_removed(tmp_path):
    folder = str(tmp_path / "t-0")
    keys_a = [b"a%d" % i for i in range(5)]
    keys_b = [b"b%d" % i for i in range(5)]
    _write(folder, [keys_a, keys_b, keys_a + keys_b])
    before = sorted(glob.glob(os.path.join(folder, "*.log")))
    assert len(before) == 4
    plan = compact_mod.Cleaner(min_cleanable_dirty_ratio=0.0, segment_bytes=64).clean(
        folder, now_ms=TS + 1000)
    assert plan.segments_removed == 1
    after = sorted(glob.glob(os.path.join(folder, "*.log")))
    # the second segment is gone; the first stays (it holds the log start offset)
    assert after == [before[0], before[2], before[3]]
    with Log.open(folder) as lg:
        got = [(bytes(r.key), bytes(r.value)) for r in lg.records()]
        assert got == [(k, k + b"@2") for k in keys_a + keys_b] + [(b"tail", b"tail")]
        # an offset in the gap reads on from the next record there is
        assert next(iter(lg.records(7))).offset == 10
    assert not [p for p in after[1:] if os.path.getsize(p) == 0]
    verify_clean(str(tmp_path))


def test_max_compaction_lag_forces_a_cleaning(tmp_path):
    folder = str(tmp_path / "t-0")
    _write(folder, [[b"k"]] * 3 + [[b"k%d" % i for i in range(60)]])
    lazy = dict(min_cleanable_dirty_ratio=1.0, segment_bytes=64)   # never by the ratio
    assert not compact_mod.Cleaner(**lazy).survey(folder, now_ms=TS + 2 * DAY).cleanable
    young = compact_mod.Cleaner(max_compaction_lag_ms=3 * DAY, **lazy)
    assert not young.survey(folder, now_ms=TS + 2 * DAY).cleanable
    old = compact_mod.Cleaner(max_compaction_lag_ms=DAY, **lazy)
    survey = old.survey(folder, now_ms=TS + 2 * DAY)
    assert survey.must_clean and survey.cleanable
    assert old.clean(folder, now_ms=TS + 2 * DAY).groups


def _fill(broker, topic: str, rounds: int, keys: int) -> None:
    fill_keyed(broker, topic, rounds, keys, lambda rnd: b"r%d" % rnd + b"." * 60, lambda k: b"k%d" % k)


def test_the_broker_cleans_past_the_max_lag_then_dirtiest_first(tmp_path):
    d = str(tmp_path / "logs")
    common = {"cleanup.policy": "compact", "segment.bytes": "2048",
              "min.cleanable.dirty.ratio": "0.01"}
    with running_broker(d, config={"log.cleaner.enable": "false"}) as b:
        b.create_topic("few-dups", 1, common)
        b.create_topic("many-dups", 1, common)
        b.create_topic("lagging", 1, dict(common, **{"min.cleanable.dirty.ratio": "0.99",
                                                     "max.compaction.lag.ms": "1"}))
        b.create_topic("plain", 1, {"segment.bytes": "2048"})
        write_offset_checkpoint(os.path.join(d, compact_mod.CLEANER_CHECKPOINT), {})
        _fill(b, "few-dups", 10, 20)
        _fill(b, "many-dups", 10, 20)
        for name in ("few-dups", "many-dups"):      # cleaned once: their dirty sections start
            assert b.lifecycle.clean(b.partitions.partition(name, 0)) == 1
        _fill(b, "few-dups", 3, 20)                 # a little new data
        _fill(b, "many-dups", 30, 20)               # a lot
        _fill(b, "lagging", 3, 20)
        _fill(b, "plain", 30, 4)
        parts = b.call(b.partitions.partitions)
        order = [p.topic.name for p in b.lifecycle.cleaning_order(parts)]
        assert order == ["lagging", "many-dups", "few-dups"], order


def test_segment_jitter_reaches_the_writer(tmp_path):
    with running_broker(str(tmp_path / "logs"), config={"log.roll.jitter.ms": "7000"}) as b:
        b.create_topic("j", 1, {"segment.jitter.ms": "5000"})
        b.create_topic("k", 1)
        assert b.partitions.partition("j", 0).writer.segment_jitter_ms == 5000
        assert b.partitions.partition("k", 0).writer.segment_jitter_ms == 7000


def test_a_consumer_reading_while_the_cleaner_runs_sees_no_gap_and_no_error(tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    d = str(tmp_path / "logs")
    fast = {"log.retention.check.interval.ms": "50", "log.cleaner.backoff.ms": "50"}
    with running_broker(d, config=fast) as b:
        b.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1024",
                                "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0",
                                "delete.retention.ms": "0"})
        produced = {}
        done = threading.Event()

        def produce():
            p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "acks": "all",
                             "linger.ms": 0, "batch.num.messages": 1})

            def on_delivery(err, msg):
                if err is None:
                    produced[msg.offset()] = (msg.key(), msg.value())
            for i in range(400):
                p.produce("c", key=b"k%d" % (i % 10), value=b"v%d" % i + b"." * 100,
                          on_delivery=on_delivery)
                p.poll(0)
                if i % 40 == 39:
                    p.flush(WAIT)
            p.flush(WAIT)
            done.set()

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        c = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "slow",
                         "enable.auto.commit": False, "auto.offset.reset": "error",
                         "fetch.max.bytes": 1024, "message.max.bytes": 1024,
                         "max.partition.fetch.bytes": 512,
                         "queued.max.messages.kbytes": 1})
        c.assign([ck.TopicPartition("c", 0, 0)])
        seen, errors = [], []
        part = b.partitions.partition("c", 0)
        cp = os.path.join(d, compact_mod.CLEANER_CHECKPOINT)

        def cleaned_to() -> int:
            from kafkawire.log.checkpoints import read_offset_checkpoint
            return read_offset_checkpoint(cp).get(("c", 0), 0) if os.path.exists(cp) else 0

        def reached_end() -> bool:
            m = c.poll(0.05)
            if m is not None:
                if m.error():
                    errors.append(m.error())
                else:
                    seen.append((m.offset(), m.key(), m.value()))
            end = b.call(lambda: part.log_end_offset)
            return done.is_set() and bool(seen) and seen[-1][0] == end - 1
        try:
            assert wait_until(reached_end, 4 * WAIT), (seen[-3:], errors)
        finally:
            t.join(WAIT)
            c.close()
        assert cleaned_to() > 0                         # the cleaner ran meanwhile
        assert not errors, errors
        offsets = [o for o, _k, _v in seen]
        assert offsets == sorted(set(offsets))
        assert all(produced[o] == (k, v) for o, k, v in seen)
        latest = {}
        for o, (k, v) in sorted(produced.items()):
            latest[k] = v
        assert {k: v for _o, k, v in seen} == latest    # every key's last value was read
    verify_clean(d)


def test_max_compaction_lag_rolls_the_active_segment(tmp_path):
    """A compacted topic's active segment rolls once its records are max.compaction.lag.ms
    old (Kafka's LogConfig.maxSegmentMs), so the cleaner can reach them; a topic that is not
    compacted keeps segment.ms; the limit follows IncrementalAlterConfigs."""
    from kafkawire.records import BatchBuilder

    def batch(ts):
        bb = BatchBuilder()
        bb.append(b"v", key=b"k", timestamp=ts)
        return bb.build()

    def segments(name):
        return len(glob.glob(os.path.join(d, f"{name}-0", "*.log")))

    d = str(tmp_path / "logs")
    lag = {"max.compaction.lag.ms": "60000"}
    with running_broker(d, config={"log.cleaner.enable": "false"}) as b:
        b.create_topic("lag", 1, dict(lag, **{"cleanup.policy": "compact"}))
        b.create_topic("plain", 1, lag)
        for name in ("lag", "plain"):
            for ts in (TS, TS + 30_000, TS + 61_000, TS + 90_000):
                b.call(lambda: b.partitions.append(name, 0, batch(ts)))
        assert segments("lag") == 2 and segments("plain") == 1
        b.call(lambda: b.partitions.alter_topic_configs("lag", {"max.compaction.lag.ms": None}))
        b.call(lambda: b.partitions.append("lag", 0, batch(TS + 10 * DAY // 10)))
        assert segments("lag") == 2
        b.call(lambda: b.partitions.alter_topic_configs("lag", {"max.compaction.lag.ms": "1000"}))
        b.call(lambda: b.partitions.append("lag", 0, batch(TS + 10 * DAY // 10 + 2000)))
        assert segments("lag") == 3
