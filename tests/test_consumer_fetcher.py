"""Which partitions the consumer's fetcher asks a leader for, and when."""
from __future__ import annotations

import collections
import types

import pytest

from kafkawire.client.fetcher import Fetcher, PartitionState
from kafkawire.client.group_metadata import TopicPartition

pytestmark = pytest.mark.one_backend

P0, P1, Q0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


class _Cluster:
    def __init__(self, leaders):
        self.leaders = leaders

    def leader(self, topic, partition):
        return self.leaders.get((topic, partition))


class _Client:
    def __init__(self, leaders):
        self.cluster = _Cluster(leaders)


def _fetcher(leaders):
    states = {}
    for tp in leaders:
        st = states[TopicPartition(*tp)] = PartitionState()
        st.position = 0
    return Fetcher(_Client(leaders), states, fetch_min_bytes=1, fetch_max_wait_ms=500,
                   fetch_max_bytes=1 << 20, max_partition_fetch_bytes=1 << 20,
                   isolation_level=0), states


def _fill(fetcher, tp):
    # stand-ins for buffered answers, one fetch answer each
    fetcher.completed[tp] = collections.deque(
        [types.SimpleNamespace(pieces=[b""]) for _ in range(fetcher.max_buffered)])


def test_caught_up_partitions_wait_for_a_leader_whose_other_partition_is_buffered():
    # t-0 and t-1 share leader 1; t-0 has a full buffer, t-1 is at its high watermark: a
    # fetch of t-1 alone would sit at the broker for fetch_max_wait_ms and hold t-0 back
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1})
    _fill(fetcher, P0)
    states[P1].high_watermark = 0
    assert fetcher.fetchable() == {}
    fetcher.completed.clear()             # t-0's buffer drained: both go out together
    assert fetcher.fetchable() == {1: [P0, P1]}


def test_a_partition_that_may_have_data_is_fetched_beside_a_full_buffer():
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1})
    _fill(fetcher, P0)
    assert fetcher.fetchable() == {1: [P1]}             # high watermark unknown
    states[P1].high_watermark = 10
    assert fetcher.fetchable() == {1: [P1]}             # behind it


def test_caught_up_partitions_are_fetched_when_nothing_else_waits():
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1, ("u", 0): 2})
    for st in states.values():
        st.high_watermark = 0
    assert fetcher.fetchable() == {1: [P0, P1], 2: [Q0]}
    _fill(fetcher, Q0)                                    # another leader's buffer
    assert fetcher.fetchable() == {1: [P0, P1]}
    _fill(fetcher, P0)
    states[P0].paused = True                              # a paused buffer never drains
    assert fetcher.fetchable() == {1: [P1]}


def test_read_committed_counts_the_last_stable_offset():
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1})
    fetcher.isolation_level = 1
    _fill(fetcher, P0)
    states[P1].high_watermark = 10
    states[P1].last_stable_offset = 0                   # nothing committed to read yet
    assert fetcher.fetchable() == {}
    states[P1].last_stable_offset = 5
    assert fetcher.fetchable() == {1: [P1]}


def _answer(base, n, compression="none", fetch_offset=None, read_committed=False):
    from kafkawire.client.fetcher import CompletedFetch
    from kafkawire.records.builder import BatchBuilder
    b = BatchBuilder(compression=compression, base_offset=base)
    for i in range(base, base + n):
        b.append(b"v%d" % i, key=b"k%d" % i, timestamp=1_700_000_000_000 + i)
    return CompletedFetch(P0, base if fetch_offset is None else fetch_offset, b.build(), [],
                          read_committed)


def test_a_partitions_next_answer_is_decoded_with_the_buffered_one():
    pytest.importorskip("pyarrow")
    first, second = _answer(0, 5, fetch_offset=2), _answer(5, 4)
    assert first.can_absorb(second, 2)
    first.absorb(second)
    assert first.next_offset == 9 and not first.can_absorb(_answer(9, 1), 2)  # two at most
    rb = first.take_columns(100, False)
    assert rb.column("offset").to_pylist() == list(range(2, 9))
    assert rb.column("value").to_pylist() == [b"v%d" % i for i in range(2, 9)]
    assert set(rb.column("partition").to_pylist()) == {0} and first.exhausted
    again = _answer(0, 5, fetch_offset=2)
    again.absorb(_answer(5, 4))
    assert [r.offset for r in again.take(3)] + [r.offset for r in again.take(10)] == \
        list(range(2, 9))


def test_answers_that_are_not_appended():
    first = _answer(0, 5)
    assert not first.can_absorb(_answer(6, 2), 2)                      # not contiguous
    assert not first.can_absorb(_answer(5, 2, compression="gzip"), 2)  # compressed
    assert not _answer(0, 5, read_committed=True).can_absorb(_answer(5, 2, read_committed=True),
                                                             2)
    first.take(1)
    assert not first.can_absorb(_answer(5, 2), 2)                      # already handed out from


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_frame_is_what_the_generic_encoder_writes(version):
    import random
    import uuid

    from kafkawire import protocol as P
    from kafkawire.client.fetcher import fetch_frame
    rnd = random.Random(version)
    by_id = version >= 13
    for trial in range(25):
        topics, forgotten = [], []
        for t in range(rnd.randrange(0, 4)):
            name = uuid.UUID(int=rnd.getrandbits(128)) if by_id else \
                "topic-\u00e9" + "t" * rnd.randrange(0, 150) + str(t)
            topics.append((name, [(rnd.randrange(0, 300), rnd.randrange(-1, 9),
                                   rnd.randrange(-1, 1 << 62), rnd.randrange(1, 1 << 30))
                                  for _ in range(rnd.randrange(1, 140 if trial == 0 else 4))]))
        if version >= 7:
            for t in range(rnd.randrange(0, 3)):
                name = uuid.UUID(int=rnd.getrandbits(128)) if by_id else "gone-%d" % t
                forgotten.append((name, [rnd.randrange(0, 50) for _ in range(rnd.randrange(1, 5))]))
        client_id = rnd.choice([None, "", "consumer-1", "c" * 200])
        rack = rnd.choice(["", "rack-a"]) if version >= 11 else ""
        args = dict(max_wait_ms=rnd.randrange(0, 1000), min_bytes=rnd.randrange(1, 100),
                    max_bytes=rnd.randrange(1, 1 << 30), isolation_level=rnd.randrange(2),
                    session_id=rnd.randrange(0, 1 << 30) if version >= 7 else 0,
                    session_epoch=rnd.randrange(-1, 100) if version >= 7 else -1)
        key = "topic_id" if by_id else "topic"
        req = P.FetchRequest(
            **args, rack_id=rack,
            topics=[{key: name, "partitions": [
                {"partition": p, "current_leader_epoch": e, "fetch_offset": o,
                 "partition_max_bytes": m} for p, e, o, m in parts]} for name, parts in topics],
            forgotten_topics_data=[{key: name, "partitions": parts} for name, parts in forgotten])
        want = P.encode_request(req, version, 41, client_id)
        got = fetch_frame(version, 41, client_id, args["max_wait_ms"], args["min_bytes"],
                          args["max_bytes"], args["isolation_level"], args["session_id"],
                          args["session_epoch"], topics, forgotten, rack)
        assert got == want
