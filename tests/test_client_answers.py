"""Odd or hostile broker answers become typed errors; read_committed fetches drop aborted data.

Scripted brokers on loopback (``FakeCluster``) send what a real broker would
not: answers for partitions nobody asked about, missing answers, empty
coordinator lists.  The client must raise a ``kafkawire.errors`` exception,
never leak a ``KeyError`` or return a made-up broker.
"""
from __future__ import annotations

import pytest

from kafkawire import protocol as P
from kafkawire.client import Client
from kafkawire.errors import KafkaWireError, ProtocolError
from kafkawire.records.builder import BatchBuilder, control_batch
from fake_brokers import TOPIC_ID, FakeCluster

pytestmark = pytest.mark.one_backend


@pytest.fixture
def fake():
    cluster = FakeCluster(1)
    yield cluster
    cluster.close()


def _txn_batch(base, values, pid, txn=True):
    b = BatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=base,
                     is_transactional=txn)
    for v in values:
        b.append(v, timestamp=1)
    return b.build()


def test_read_committed_fetch_drops_aborted_transactions(fake):
    # Offsets: 0-1 pid 7 (aborted), 2-3 pid 8 (committed), 4 abort marker pid 7,
    # 5 commit marker pid 8, 6-7 pid 7 again (a later, committed transaction),
    # 8 commit marker pid 7, 9 non-transactional.
    log = b"".join([
        _txn_batch(0, [b"a0", b"a1"], 7),
        _txn_batch(2, [b"c2", b"c3"], 8),
        control_batch("abort", base_offset=4, producer_id=7, producer_epoch=0),
        control_batch("commit", base_offset=5, producer_id=8, producer_epoch=0),
        _txn_batch(6, [b"c6", b"c7"], 7),
        control_batch("commit", base_offset=8, producer_id=7, producer_epoch=0),
        _txn_batch(9, [b"plain"], -1, txn=False),
    ])

    def fetch(node, req):
        level = req.message.isolation_level
        return P.FetchResponse(responses=[{"topic_id": TOPIC_ID, "topic": "t", "partitions": [{
            "partition_index": 0, "high_watermark": 10, "last_stable_offset": 10,
            "aborted_transactions": [{"producer_id": 7, "first_offset": 0}] if level else None,
            "records": log}]}])

    fake.handlers[1] = fetch
    with Client(fake.bootstrap) as c:
        committed = c.fetch("t", 0, 0, isolation_level=1)
        uncommitted = c.fetch("t", 0, 0, isolation_level=0)
        from_middle = c.fetch("t", 0, 1, isolation_level=1)
    assert [(r.offset, r.value) for r in committed.records()] == \
        [(2, b"c2"), (3, b"c3"), (6, b"c6"), (7, b"c7"), (9, b"plain")]
    assert [r.offset for r in uncommitted.records()] == [0, 1, 2, 3, 6, 7, 9]
    assert [r.offset for r in from_middle.records()] == [2, 3, 6, 7, 9]
    assert committed.next_offset == 10


def _produce_answer(partitions):
    return lambda node, req: P.ProduceResponse(responses=[{"name": "t", "partition_responses": [
        {"index": p, "error_code": 0, "base_offset": 5} for p in partitions]}])


@pytest.mark.parametrize("answered, match", [
    ([0, 1], "did not write"),       # an unrequested partition
    ([], "no answer for t partition"),  # the requested one left out
    ([0, 0], "twice"),
])
def test_produce_answers_must_match_the_request(fake, answered, match):
    fake.handlers[0] = _produce_answer(answered)
    with Client(fake.bootstrap, retries=0) as c:
        with pytest.raises(ProtocolError, match=match):
            c.produce("t", [b"x"], partition=0)


def test_find_coordinator_v4_with_no_coordinator_is_an_error(fake):
    fake.handlers[10] = lambda node, req: P.FindCoordinatorResponse(coordinators=[])
    with Client(fake.bootstrap, retries=0) as c:
        with pytest.raises(ProtocolError, match="no coordinator for 'g'"):
            c.find_coordinator("g")


def test_empty_create_and_delete_topics_answers_are_errors(fake):
    fake.handlers[19] = lambda node, req: P.CreateTopicsResponse(topics=[])
    fake.handlers[20] = lambda node, req: P.DeleteTopicsResponse(responses=[])
    with Client(fake.bootstrap, retries=0) as c:
        with pytest.raises(KafkaWireError, match=r"no answer for topic\(s\) \['new'\]"):
            c.create_topics("new")
        with pytest.raises(KafkaWireError, match=r"no answer for topic\(s\) \['old'\]"):
            c.delete_topics("old")
