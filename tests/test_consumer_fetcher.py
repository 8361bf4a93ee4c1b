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
