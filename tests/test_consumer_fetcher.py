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
        [types.SimpleNamespace() for _ in range(fetcher.max_buffered)])


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


def _answer(base, n, compression="none", fetch_offset=None, read_committed=False, tp=P0):
    from kafkawire.client.fetcher import CompletedFetch
    from kafkawire.records.builder import BatchBuilder
    b = BatchBuilder(compression=compression, base_offset=base)
    for i in range(base, base + n):
        b.append(b"v%d" % i, key=b"k%d" % i, timestamp=1_700_000_000_000 + i)
    return CompletedFetch(tp, base if fetch_offset is None else fetch_offset, b.build(), [],
                          read_committed)


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


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_answer_reads_what_the_generic_decoder_reads(version):
    import random
    import uuid

    from kafkawire import protocol as P
    from kafkawire.client import _api as A
    from kafkawire.client.fetcher import fetch_answer
    rnd = random.Random(version)
    by_id = version >= 13
    for trial in range(20):
        topics = []
        for t in range(rnd.randrange(0, 4)):
            parts = []
            for _ in range(rnd.randrange(0, 5)):
                part = {"partition_index": rnd.randrange(0, 300), "error_code": rnd.randrange(-1, 5),
                        "high_watermark": rnd.randrange(-1, 1 << 62),
                        "last_stable_offset": rnd.randrange(-1, 1 << 40),
                        "log_start_offset": rnd.randrange(-1, 1 << 40),
                        "aborted_transactions": rnd.choice([None, [], [
                            {"producer_id": rnd.randrange(0, 1 << 40),
                             "first_offset": rnd.randrange(0, 1 << 40)}
                            for _ in range(rnd.randrange(1, 4))]]),
                        "preferred_read_replica": rnd.randrange(-1, 3),
                        "records": rnd.choice([None, b"", bytes(rnd.randrange(256)
                                                                for _ in range(rnd.randrange(300)))])}
                if version >= 12 and rnd.random() < 0.5:   # tagged fields the consumer skips
                    part["current_leader"] = {"leader_id": 2, "leader_epoch": 7}
                    part["diverging_epoch"] = {"epoch": 3, "end_offset": 99}
                parts.append(part)
            topic = {"partitions": parts}
            if by_id:
                topic["topic_id"] = uuid.UUID(int=rnd.getrandbits(128))
            else:
                topic["topic"] = "topic-\u00e9" + "t" * rnd.randrange(0, 150) + str(t)
            topics.append(topic)
        resp = P.FetchResponse(throttle_time_ms=rnd.randrange(0, 100),
                               error_code=rnd.randrange(0, 3) if version >= 7 else 0,
                               session_id=rnd.randrange(0, 1 << 30) if version >= 7 else 0,
                               responses=topics)
        frame = P.encode_response(resp, version, 7)[4:]
        for payload in (frame, frame + b"\0"):   # librdkafka's mock adds a stray byte
            want = A.decode_response(A.FETCH, version, payload)
            got = fetch_answer(version, bytearray(payload))
            assert (got.throttle_time_ms, got.error_code, got.session_id) == \
                (want.throttle_time_ms, want.error_code, want.session_id)
            assert len(got.responses) == len(want.responses)
            for gt, wt in zip(got.responses, want.responses):
                assert (gt.topic, gt.topic_id) == (wt.topic, wt.topic_id if by_id else None)
                assert len(gt.partitions) == len(wt.partitions)
                for gp, wp in zip(gt.partitions, wt.partitions):
                    for name in ("partition_index", "error_code", "high_watermark",
                                 "last_stable_offset", "log_start_offset"):
                        assert getattr(gp, name) == getattr(wp, name), name
                    assert gp.aborted_transactions == (
                        None if wp.aborted_transactions is None else
                        [(a.producer_id, a.first_offset) for a in wp.aborted_transactions])
                    assert (None if gp.records is None else bytes(gp.records)) == \
                        (None if wp.records is None else bytes(wp.records))
        for cut in sorted({rnd.randrange(4, len(frame)) for _ in range(10)} if len(frame) > 4
                          else ()):
            try:
                fetch_answer(version, frame[:cut])
            except P.MessageDecodeError as exc:
                assert exc.position is not None


def test_answers_of_several_partitions_make_one_batch():
    pytest.importorskip("pyarrow")
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1, ("u", 0): 2})
    fetcher.completed[P0] = collections.deque([_answer(0, 5), _answer(5, 3, compression="gzip")])
    fetcher.completed[P1] = collections.deque([_answer(10, 4, tp=P1)])
    fetcher.completed[Q0] = collections.deque([_answer(0, 6, fetch_offset=2, tp=Q0)])
    got = fetcher.take_columns(100, False)
    rows = [(r["topic"], r["partition"], r["offset"], r["value"])
            for rb in got for r in rb.to_pylist()]
    # every partition's rows in offset order; the gzip answer and the one starting inside its
    # batch are decoded on their own
    for tp in (P0, P1, Q0):
        offsets = [o for t, p, o, _ in rows if (t, p) == tp]
        assert offsets == sorted(offsets)
    assert sorted((t, p, o) for t, p, o, _ in rows) == sorted(
        [("t", 0, o) for o in range(8)] + [("t", 1, o) for o in range(10, 14)]
        + [("u", 0, o) for o in range(2, 6)])
    assert all(v == b"v%d" % o for _, _, o, v in rows)
    assert len(got) == 3          # P0's first answer and P1's in one batch; then gzip; then Q0
    assert (states[P0].position, states[P1].position, states[Q0].position) == (8, 14, 6)
    assert not fetcher.completed


def test_a_partition_taken_in_part_keeps_its_order_in_the_joint_batch():
    pytest.importorskip("pyarrow")
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1})
    fetcher.completed[P0] = collections.deque([_answer(0, 6), _answer(6, 2)])
    fetcher.completed[P1] = collections.deque([_answer(0, 3, tp=P1)])
    first = fetcher.take_columns(4, False)           # 4 of P0's 6
    assert [r["offset"] for rb in first for r in rb.to_pylist()] == [0, 1, 2, 3]
    assert states[P0].position == 4
    rest = fetcher.take_columns(100, False)
    rows = [(r["partition"], r["offset"]) for rb in rest for r in rb.to_pylist()]
    assert [o for p, o in rows if p == 0] == [4, 5, 6, 7]
    assert [o for p, o in rows if p == 1] == [0, 1, 2]
    assert (states[P0].position, states[P1].position) == (8, 3)


def _answer_of_batches(sizes, tp=P0):
    """One answer holding consecutive batches of the given record counts."""
    from kafkawire.client.fetcher import CompletedFetch
    from kafkawire.records.builder import BatchBuilder
    data, base = b"", 0
    for n in sizes:
        b = BatchBuilder(base_offset=base)
        for i in range(base, base + n):
            b.append(b"v%d" % i, key=b"k%d" % i)
        data += b.build()
        base += n
    return CompletedFetch(tp, 0, data, [], False)


def test_a_poll_that_stops_inside_an_answer_still_gives_one_batch():
    pytest.importorskip("pyarrow")
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1})
    fetcher.completed[P0] = collections.deque([_answer_of_batches([3, 4, 2])])
    fetcher.completed[P1] = collections.deque([_answer(0, 3, tp=P1)])
    seen = []
    for limit in (2, 3, 3, 100):      # cuts inside the first and second batch, then at its end
        got = fetcher.take_columns(limit, False)
        assert len(got) == 1 and got[0].num_rows <= limit
        seen += [(r["partition"], r["offset"], r["value"]) for r in got[0].to_pylist()]
    assert [o for p, o, _ in seen if p == 0] == list(range(9))
    assert [o for p, o, _ in seen if p == 1] == [0, 1, 2]
    assert all(v == b"v%d" % o for _, o, v in seen)
    assert (states[P0].position, states[P1].position) == (9, 3)
    assert not fetcher.completed


def test_a_poll_never_gives_more_rows_than_asked():
    pytest.importorskip("pyarrow")
    fetcher, states = _fetcher({("t", 0): 1, ("t", 1): 1})
    fetcher.completed[P0] = collections.deque([_answer(0, 5, compression="gzip")])
    fetcher.completed[P1] = collections.deque([_answer_of_batches([6, 4], tp=P1)])
    offsets = {0: [], 1: []}
    for _ in range(6):
        got = fetcher.take_columns(8, False)
        assert sum(rb.num_rows for rb in got) <= 8
        for rb in got:
            for r in rb.to_pylist():
                offsets[r["partition"]].append(r["offset"])
    assert offsets == {0: list(range(5)), 1: list(range(10))}
    assert (states[P0].position, states[P1].position) == (5, 10)


def test_records_and_columns_taken_in_turn_neither_repeat_nor_skip():
    pytest.importorskip("pyarrow")
    fetcher, states = _fetcher({("t", 0): 1})
    fetcher.completed[P0] = collections.deque([_answer_of_batches([3, 4])])
    offsets = [r.offset for recs in fetcher.take_records(2) for r in recs]
    offsets += [r["offset"] for rb in fetcher.take_columns(3, False) for r in rb.to_pylist()]
    offsets += [r.offset for recs in fetcher.take_records(1) for r in recs]
    offsets += [r["offset"] for rb in fetcher.take_columns(100, False) for r in rb.to_pylist()]
    assert offsets == list(range(7))
    assert states[P0].position == 7


def test_answers_of_two_topics_share_one_batch_with_each_rows_topic():
    pytest.importorskip("pyarrow")
    fetcher, states = _fetcher({("t", 0): 1, ("u", 0): 2})
    fetcher.completed[P0] = collections.deque([_answer(0, 3)])
    fetcher.completed[Q0] = collections.deque([_answer(0, 2, tp=Q0)])
    got = fetcher.take_columns(100, False)
    assert len(got) == 1
    rb = got[0]
    assert rb.schema.field("topic").type == "string"
    assert sorted(zip(rb.column("topic").to_pylist(), rb.column("partition").to_pylist(),
                      rb.column("offset").to_pylist())) == \
        [("t", 0, 0), ("t", 0, 1), ("t", 0, 2), ("u", 0, 0), ("u", 0, 1)]
    assert (states[P0].position, states[Q0].position) == (3, 2)
