"""kafkawire.Consumer against a real peer: librdkafka's mock cluster (confluent-kafka) on loopback.

A kafkawire consumer and a confluent-kafka consumer share one group: they
split the partitions, every record is read exactly once across the two, and
members leaving and joining rebalance the group (range, roundrobin,
cooperative-sticky).  A confluent-kafka transactional producer's aborted
records never reach kafkawire's read_committed consumer, in either the record
or the Arrow path, where the broker lists aborted transactions (the mock does not).
"""
from __future__ import annotations

import collections
import re
import threading
import time

import pytest

import kafkawire
from kafkawire.client import Client
from kafkawire.client.config import ConfigError

ck = pytest.importorskip("confluent_kafka")

from fake_brokers import wait_for  # noqa: E402
from mock_cluster import unique_name  # noqa: E402

pytestmark = pytest.mark.one_backend

@pytest.fixture(scope="module")
def client(mock):
    with Client(mock, allow_auto_create_topics=True) as c:
        yield c


def _fill(client, topic: str, per_partition: int, start: int = 0, partitions: int = 4):
    client.metadata([topic], allow_auto_topic_creation=True)
    want = set()
    for p in range(partitions):
        vals = [f"{topic}/{p}/{i}".encode() for i in range(start, start + per_partition)]
        client.produce(topic, vals, partition=p)
        want.update(vals)
    return want


def _consumer(bootstrap, group=None, **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("session_timeout_ms", 6000)
    kw.setdefault("heartbeat_interval_ms", 300)
    return kafkawire.Consumer(bootstrap, group, **kw)


def _drain(consumer, want_count: int, timeout: float = 20.0):
    got = []
    end = time.monotonic() + timeout
    while len(got) < want_count and time.monotonic() < end:
        got.extend(consumer.poll(200))
    return got


def test_subscribe_reads_every_record_once_and_commits(mock, client):
    topic = unique_name("sub")
    want = _fill(client, topic, 50)
    with _consumer(mock, unique_name("g"), enable_auto_commit=False) as c:
        c.subscribe([topic])
        got = _drain(c, len(want))
        assert sorted(r.value for r in got) == sorted(want)
        by_p = collections.defaultdict(list)
        for r in got:
            assert r.topic == topic and r.timestamp_type == "CreateTime" and r.leader_epoch >= -1
            by_p[r.partition].append(r.offset)
        assert all(offs == list(range(50)) for offs in by_p.values()) and len(by_p) == 4
        c.commit()
        assert c.committed(c.assignment()) == {(topic, p): 50 for p in range(4)}
        assert c.poll(300) == []
        group = c.group_id
    # A new member of the same group starts where the group committed.
    more = _fill(client, topic, 5, start=50)
    with _consumer(mock, group) as c2:
        c2.subscribe([topic])
        got = _drain(c2, len(more))
        assert sorted(r.value for r in got) == sorted(more)


def test_assign_seek_pause_positions(mock, client):
    topic = unique_name("assign")
    _fill(client, topic, 30)
    with _consumer(mock) as c:
        tp0, tp1 = (topic, 0), (topic, 1)
        c.assign([tp0, tp1])
        assert c.position(tp0) == 0
        c.seek(tp0, 25)
        c.pause([tp1])
        got = _drain(c, 5, timeout=5)
        assert [(r.partition, r.offset) for r in got] == [(0, o) for o in range(25, 30)]
        assert c.paused() == {tp1}
        c.resume([tp1])
        got = _drain(c, 30, timeout=5)
        assert [r.offset for r in got] == list(range(30))
        c.seek_to_beginning([tp0])
        assert c.position(tp0) == 0
        c.seek_to_end()
        assert c.position(tp0) == 30 and c.position(tp1) == 30
        assert c.end_offsets([tp0]) == {tp0: 30}
        assert c.beginning_offsets([tp0]) == {tp0: 0}
        # (the mock answers timestamp lookups with "none": the fake broker tests check them)
        rec = client.fetch(topic, 0, 10).records()[0]
        assert c.offsets_for_times({tp0: rec.timestamp + 10**9}) == {tp0: None}


def test_unknown_setting_is_named(mock):
    with pytest.raises(ConfigError, match="auto_offset_rest"):
        kafkawire.Consumer(mock, "g", auto_offset_rest="earliest")
    with pytest.raises(ConfigError, match="partition_assignment_strategy"):
        kafkawire.Consumer(mock, "g", partition_assignment_strategy="sticky-ish")


def test_auto_offset_reset_latest_and_none(mock, client):
    topic = unique_name("reset")
    _fill(client, topic, 10)
    with _consumer(mock, auto_offset_reset="latest") as c:
        c.assign([(topic, 0)])
        assert c.position((topic, 0)) == 10
    with _consumer(mock, unique_name("g"), auto_offset_reset="none") as c:
        c.assign([(topic, 0)])
        with pytest.raises(kafkawire.client.consumer.NoOffsetForPartitionError):
            c.poll(100)


def test_pattern_subscription_follows_new_topics(mock, client):
    prefix = unique_name("pat")
    first = _fill(client, f"{prefix}-a", 5)
    with _consumer(mock, unique_name("g"), metadata_max_age_ms=500) as c:
        c.subscribe(pattern=re.escape(prefix) + r"-.*")
        got = _drain(c, len(first))
        assert sorted(r.value for r in got) == sorted(first)
        second = _fill(client, f"{prefix}-b", 5)
        got = _drain(c, len(second))
        assert sorted(r.value for r in got) == sorted(second)
        assert c.subscription() == {f"{prefix}-a", f"{prefix}-b"}


class _KWMember(threading.Thread):
    """A kafkawire group member on its own thread: poll, record, commit, until told to stop."""

    def __init__(self, bootstrap, group, topic, strategy):
        super().__init__(daemon=True)
        self.c = _consumer(bootstrap, group, enable_auto_commit=False,
                           partition_assignment_strategy=strategy)
        self.c.subscribe([topic], on_revoke=lambda c, tps: c.commit(
            {tp: c.position(tp) for tp in tps}))
        self.records = []
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                recs = self.c.poll(100)
                if recs:
                    self.records.extend(recs)
                    self.c.commit()
            self.c.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


def _ck_consumer(bootstrap, group, topic, strategy):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "partition.assignment.strategy": strategy,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                     "log_level": 0})
    c.subscribe([topic])
    return c


def _ck_poll(c, seconds, into):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        msgs = c.consume(num_messages=500, timeout=0.1)
        good = [m for m in msgs if m.error() is None]
        if good:
            into.extend(good)
            try:
                c.commit(asynchronous=False)
            except ck.KafkaException:
                pass  # a rebalance started; membership changes in these tests wait for quiet


def _split(kw, ckc, topic):
    kw_parts = kw.c.assignment()
    ck_parts = {(tp.topic, tp.partition) for tp in ckc.assignment()}
    return (bool(kw_parts) and bool(ck_parts) and not (kw_parts & ck_parts)
            and kw_parts | ck_parts == {(topic, p) for p in range(4)})


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_shared_group_with_confluent_kafka(mock, client, strategy):
    """Membership changes while the members are caught up: every record read exactly once."""
    topic = unique_name(f"mixed-{strategy}")
    group = unique_name("g")
    client.metadata([topic], allow_auto_topic_creation=True)
    kw = _KWMember(mock, group, topic, strategy)
    kw.start()
    ckc = _ck_consumer(mock, group, topic, strategy)
    ck_got = []
    try:
        # Both members get a share of the partitions, and read what is written once between them.
        assert wait_for(lambda: _ck_poll(ckc, 0.2, ck_got) or _split(kw, ckc, topic), 30), \
            (kw.c.assignment(), ckc.assignment(), kw.error)
        want = _fill(client, topic, 40)
        assert wait_for(lambda: _ck_poll(ckc, 0.2, ck_got) or
                     len(kw.records) + len(ck_got) >= len(want), 30)
        assert kw.records and ck_got
        values = [r.value for r in kw.records] + [m.value() for m in ck_got]
        assert sorted(values) == sorted(want)
        # The confluent member leaves: kafkawire takes over every partition.
        ckc.close()
        assert wait_for(lambda: len(kw.c.assignment()) == 4, 30), (kw.c.assignment(), kw.error)
        more = _fill(client, topic, 10, start=40)
        assert wait_for(lambda: sum(r.value in more for r in kw.records) == len(more), 30)
        # A new confluent member joins and gets a share again.
        ckc = _ck_consumer(mock, group, topic, strategy)
        assert wait_for(lambda: _ck_poll(ckc, 0.2, ck_got) or _split(kw, ckc, topic), 30), \
            (kw.c.assignment(), ckc.assignment(), kw.error)
        last = _fill(client, topic, 10, start=50)
        assert wait_for(lambda: _ck_poll(ckc, 0.2, ck_got) or
                     len(kw.records) + len(ck_got) >= len(want | more | last), 30)
        values = [r.value for r in kw.records] + [m.value() for m in ck_got]
        assert sorted(values) == sorted(want | more | last), "a record was lost or read twice"
        assert kw.error is None
    finally:
        kw.stop.set()
        kw.join(15)
        ckc.close()


def _transactions(bootstrap, topic):
    """committed c0..c4, aborted a0..a4, committed c5..c9 on partition 0 (plus a stray aborted tail)."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_name("tx"),
                     "log_level": 0})
    p.init_transactions(10)
    for label, rng, commit in (("c", range(5), True), ("a", range(5), False),
                               ("c", range(5, 10), True), ("a", range(5, 8), False)):
        p.begin_transaction()
        for i in rng:
            p.produce(topic, f"{label}{i}".encode(), partition=0)
        p.flush(10)
        if commit:
            p.commit_transaction(10)
        else:
            p.abort_transaction(10)
    return [f"c{i}".encode() for i in range(10)], [f"a{i}".encode() for i in range(5)] + \
        [f"a{i}".encode() for i in range(5, 8)]


def test_read_committed_on_the_mock_matches_librdkafka(mock, client):
    """The mock keeps no aborted-transaction index (its Fetch answers list none, so librdkafka's
    own read_committed consumer shows aborted records there too); on it, kafkawire must read
    exactly what librdkafka reads.  The aborted records of these same transactions are hidden
    in tests/test_consumer_fake.py, where the broker lists them as Kafka's does."""
    topic = unique_name("txn")
    client.metadata([topic], allow_auto_topic_creation=True)
    committed, aborted = _transactions(mock, topic)
    cc = ck.Consumer({"bootstrap.servers": mock, "group.id": unique_name("g"), "log_level": 0,
                      "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    cc.assign([ck.TopicPartition(topic, 0, 0)])
    theirs = []
    end = time.monotonic() + 10
    while len(theirs) < len(committed) + len(aborted) and time.monotonic() < end:
        theirs += [m.value() for m in cc.consume(100, timeout=0.2) if m.error() is None]
    cc.close()
    with _consumer(mock, isolation_level="read_committed") as c:
        c.assign([(topic, 0)])
        got = _drain(c, len(theirs), timeout=10)
        assert [r.value for r in got] == theirs
    with _consumer(mock, isolation_level="read_committed") as c:
        c.assign([(topic, 0)])
        rows = []
        end = time.monotonic() + 10
        while len(rows) < len(theirs) and time.monotonic() < end:
            rows.extend(c.poll_arrow(200).column("value").to_pylist())
        assert rows == theirs
    assert client.fetch(topic, 0, 0, isolation_level=1).aborted_transactions == []


def test_poll_arrow_matches_poll(mock, client):
    topic = unique_name("arrow")
    want = _fill(client, topic, 100)
    with _consumer(mock) as c:
        c.assign([(topic, p) for p in range(4)])
        rows = []
        end = time.monotonic() + 10
        while len(rows) < len(want) and time.monotonic() < end:
            rb = c.poll_arrow(200, include_headers=True)
            assert rb.schema.names == ["key", "value", "topic", "partition", "offset",
                                       "timestamp", "timestampType", "headers"]
            rows.extend(zip(rb.column("partition").to_pylist(), rb.column("offset").to_pylist(),
                            rb.column("value").to_pylist()))
        assert sorted(v for _, _, v in rows) == sorted(want)
        for p in range(4):
            assert [o for q, o, _ in rows if q == p] == list(range(100))
        assert c.position((topic, 0)) == 100
