"""The log lifecycle runs off the broker's event loop: while a compaction of a large
partition is in progress (held mid-round here, so the order of events is certain), clients
still produce and fetch, on other partitions and on the one being cleaned; afterwards the
partition holds the latest value per key and ``kafkawire verify`` is clean."""
from __future__ import annotations

import importlib
import os
import threading

import pytest

from kafkawire.testing import running_broker
from broker_support import WAIT, fill_keyed, verify_clean, wait_until as _wait

pytestmark = pytest.mark.one_backend
ck = pytest.importorskip("confluent_kafka")

compact_mod = importlib.import_module("kafkawire.log.compact")   # (the package exports a function of that name)
FAST = {"log.retention.check.interval.ms": "50", "log.cleaner.backoff.ms": "50"}


def _fill(broker, topic: str, rounds: int, keys: int) -> None:
    fill_keyed(broker, topic, rounds, keys, lambda rnd: b"r%03d-" % rnd + b"x" * 100,
               lambda k: b"key%03d" % k)


def _consume(bs: str, topic: str, start: int, count: int, last: int = -1):
    """``count`` records from ``start`` (or, with ``last``, until that offset)."""
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "g-" + topic,
                     "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([ck.TopicPartition(topic, 0, start)])
        got = []
        deadline = 0
        while (len(got) < count if last < 0 else not got or got[-1][0] < last) and deadline < 600:   # at most ~WAIT seconds of empty polls
            m = c.poll(0.2)
            if m is None or m.error():
                deadline += 1
                continue
            got.append((m.offset(), m.key(), m.value()))
        return got
    finally:
        c.close()


def test_fetch_and_produce_go_on_while_a_compaction_runs(tmp_path, monkeypatch):
    events = []
    entered, release = threading.Event(), threading.Event()
    original = compact_mod.Cleaner._clean_group

    def held(self, lg, group, *args, **kwargs):
        if os.path.basename(lg.path) == "big-0" and not release.is_set():
            events.append("compaction started")
            entered.set()
            release.wait(WAIT)
        return original(self, lg, group, *args, **kwargs)

    monkeypatch.setattr(compact_mod.Cleaner, "_clean_group", held)
    d = str(tmp_path / "logs")
    with running_broker(d, config=FAST) as b:
        b.create_topic("live", 1)
        b.create_topic("big", 1, {"cleanup.policy": "compact", "segment.bytes": "65536",
                                   "min.cleanable.dirty.ratio": "0.01",
                                   "file.delete.delay.ms": "0"})
        _fill(b, "big", 40, 100)      # 4000 records over 100 keys, ~8 segments
        assert entered.wait(WAIT), "the cleaner never started"
        part = b.partitions.partition("big", 0)
        end_before = b.call(lambda: part.log_end_offset)

        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "acks": "all",
                         "linger.ms": 0})
        for i in range(5):
            p.produce("live", key=b"l%d" % i, value=b"live %d" % i)
            p.produce("big", key=b"key000", value=b"new %d" % i)
        assert p.flush(WAIT) == 0
        events.append("produced")
        assert [v for _o, _k, v in _consume(b.bootstrap_servers, "live", 0, 5)] == [
            b"live %d" % i for i in range(5)]
        # The partition being cleaned serves fetches too (its old segments, unchanged yet).
        got = _consume(b.bootstrap_servers, "big", 0, 150)
        assert [o for o, _k, _v in got[:150]] == list(range(150))
        events.append("fetched")
        assert not release.is_set()
        release.set()

        cp = os.path.join(d, compact_mod.CLEANER_CHECKPOINT)

        def cleaned() -> bool:
            from kafkawire.log.checkpoints import read_offset_checkpoint
            return os.path.exists(cp) and read_offset_checkpoint(cp).get(("big", 0), 0) > 0

        assert _wait(cleaned), "the compaction never finished"
        events.append("compaction finished")
        end = b.call(lambda: part.log_end_offset)
        got = _consume(b.bootstrap_servers, "big", 0, 0, last=end - 1)
        latest = {}
        for _o, k, v in got:
            latest[k] = v
        assert latest[b"key000"] == b"new 4", (end, got[-8:], end_before)
        assert latest[b"key099"].startswith(b"r039-")
        assert len(got) < end_before       # the old values are gone
    assert events == ["compaction started", "produced", "fetched", "compaction finished"]
    verify_clean(d)

