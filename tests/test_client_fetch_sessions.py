"""Fetch sessions (Kafka's incremental fetch) against a scripted broker that keeps sessions as Kafka's does.

The broker below creates a session on a full fetch (epoch 0), expects the
epochs to follow one another, merges the partitions each incremental request
sends into the session, drops the forgotten ones, and answers only for the
partitions that have records.  It records every request's session fields so
the tests can check them, and injects ``FETCH_SESSION_ID_NOT_FOUND`` (70),
``INVALID_FETCH_SESSION_EPOCH`` (71) and a broken connection on demand.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional

import pytest

import kafkawire
from kafkawire import protocol as P

from fake_brokers import TOPIC_ID, FakeGroupCluster

pytestmark = pytest.mark.one_backend


class Seen:
    """One Fetch request as the broker saw it."""

    def __init__(self, node: int, session_id: int, epoch: int, sent: Dict[int, int],
                 forgotten: List[int], forgotten_ids: list) -> None:
        self.node, self.session_id, self.epoch = node, session_id, epoch
        self.sent, self.forgotten, self.forgotten_ids = sent, forgotten, forgotten_ids
        self.error = 0
        self.answered_session = 0
        self.answered: List[int] = []

    def __repr__(self) -> str:
        return (f"Seen(node={self.node} id={self.session_id} epoch={self.epoch} sent={self.sent} "
                f"forgotten={self.forgotten} error={self.error} -> id={self.answered_session} "
                f"answered={self.answered})")


class SessionCluster(FakeGroupCluster):
    """Topic ``t`` with 4 partitions (0, 2 led by broker 0; 1, 3 by broker 1) and fetch sessions."""

    def __init__(self) -> None:
        super().__init__(partitions=4, session_reaper=False)
        self.sessions: Dict[int, dict] = {}   # id -> {"node", "epoch" (next expected), "parts"}
        self.next_id = 1000
        self.seen: List[Seen] = []
        self.resent: List[Seen] = []          # incremental requests re-sending an unchanged partition
        self.faults: Dict[int, object] = {}   # nth incremental request -> error code or "close"
        self.incremental = 0
        self.give_sessions = True
        self.handlers[1] = self._session_fetch

    def _session_fetch(self, node, req):
        m = req.message
        sent = {p.partition: p.fetch_offset for t in m.topics for p in t.partitions}
        forgotten = [p for t in m.forgotten_topics_data for p in t.partitions]
        seen = Seen(node, m.session_id, m.session_epoch, sent, forgotten,
                    [t.topic_id for t in m.forgotten_topics_data])
        time.sleep(0.005)
        with self.cond:
            self.seen.append(seen)
            sid, epoch = m.session_id, m.session_epoch
            if epoch <= 0:
                if sid:
                    self.sessions.pop(sid, None)
                parts = dict(sent)
                new = 0
                if epoch == 0 and self.give_sessions:
                    new = self.next_id
                    self.next_id += 1
                    self.sessions[new] = {"node": node, "epoch": 1, "parts": parts}
                full = True
            else:
                self.incremental += 1
                s = self.sessions.get(sid)
                fault = self.faults.pop(self.incremental, None)
                if fault == "close":
                    return "close"
                error = 70 if s is None or s["node"] != node else \
                    71 if epoch != s["epoch"] else fault or 0
                if error:
                    if error == 70:
                        self.sessions.pop(sid, None)
                    seen.error = error
                    return P.FetchResponse(error_code=error, session_id=0, responses=[])
                if any(s["parts"].get(p) == o for p, o in sent.items()):
                    self.resent.append(seen)
                for p in forgotten:
                    s["parts"].pop(p, None)
                s["parts"].update(sent)
                s["epoch"] += 1
                parts, new, full = s["parts"], sid, False
            out = []
            for p, offset in sorted(parts.items()):
                data = self._batch(p, offset)
                if full or data:
                    seen.answered.append(p)
                    out.append({"partition_index": p, "high_watermark": len(self.logs[p]),
                                "last_stable_offset": len(self.logs[p]), "records": data or b""})
            seen.answered_session = new
        topics = [{"topic_id": TOPIC_ID, "topic": "t", "partitions": out}] if out else []
        return P.FetchResponse(session_id=new, responses=topics)

    def of(self, node: int) -> List[Seen]:
        return [s for s in self.seen if s.node == node]


@pytest.fixture
def cluster():
    c = SessionCluster()
    yield c
    c.close()


def _read(c, want: int, got: Optional[list] = None, seconds: float = 10.0) -> list:
    got = [] if got is None else got
    end = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < end:
        got += c.poll(50)
    return got


def _in_order_once(records, expected: Dict[int, int]) -> None:
    by_p: Dict[int, List[int]] = {}
    for r in records:
        by_p.setdefault(r.partition, []).append(r.offset)
    assert {p: offs for p, offs in by_p.items()} == \
        {p: list(range(n)) for p, n in expected.items() if n}


def _check_epochs(seen: List[Seen]) -> None:
    """Within one session the epochs run 1, 2, 3, ...; a full fetch (0) starts a session."""
    current, expect = 0, 0
    for s in seen:
        if s.epoch == 0:
            expect = 1
        elif s.epoch > 0:
            assert s.session_id == current and s.epoch == expect, (s, seen)
            expect += 1
        if not s.error:
            current = s.answered_session


def test_full_then_incremental_fetches(cluster):
    cluster.batch_records = 20
    for p in (0, 1, 3):
        cluster.append(p, [f"{p}-{i}".encode() for i in range(100)])
    with kafkawire.Consumer(cluster.bootstrap, auto_offset_reset="earliest",
                            fetch_max_wait_ms=50) as c:
        c.assign([("t", p) for p in range(4)])
        got = _read(c, 300)
        _in_order_once(got, {0: 100, 1: 100, 3: 100})
        for node, parts in ((0, {0, 2}), (1, {1, 3})):
            seen = cluster.of(node)
            # the first request is a full one with every partition of the broker
            assert (seen[0].session_id, seen[0].epoch) == (0, 0)
            assert set(seen[0].sent) == parts and seen[0].forgotten == []
            assert seen[0].answered_session and seen[1].session_id == seen[0].answered_session
            assert len(seen) >= 5 and all(s.epoch > 0 for s in seen[1:])
            _check_epochs(seen)
        # incremental requests send only what changed: partition 2 (no records) never again
        assert not cluster.resent
        assert all(2 not in s.sent for s in cluster.of(0)[1:])
        assert any(s.sent == {} for s in cluster.of(0)[1:]) or \
            any(set(s.sent) == {0} for s in cluster.of(0)[1:])
        # Records on partition 2 now arrive in answers to requests that do not name it: the
        # session's view (offset 0) is what they answer.
        cluster.append(2, [f"2-{i}".encode() for i in range(30)])
        got2 = _read(c, 30)
        _in_order_once(got2, {2: 30})
        answered_2 = [s for s in cluster.of(0) if 2 in s.answered and s.epoch > 0]
        assert answered_2 and 2 not in answered_2[0].sent
        # The position advanced, so the next request sends partition 2 with its new offset.
        assert _wait_for(lambda: any(s.sent.get(2) == 20 for s in cluster.of(0)))

        # Pausing forgets the partition in the session; resuming sends it again.
        c.pause([("t", 0)])
        n = len(cluster.of(0))
        assert _wait_for(lambda: c.poll(20) == [] and
                         any(0 in s.forgotten for s in cluster.of(0)[n:]))
        forgot = next(s for s in cluster.of(0)[n:] if 0 in s.forgotten)
        assert forgot.forgotten_ids == [TOPIC_ID] and 0 not in forgot.sent
        cluster.append(0, [b"more"] * 5)
        time.sleep(0.2)
        assert not [r for r in c.poll(100) if r.partition == 0]
        n = len(cluster.of(0))
        c.resume([("t", 0)])
        more = [r for r in _read(c, 5) if r.partition == 0]
        assert [r.offset for r in more] == list(range(100, 105))
        assert any(s.sent.get(0) == 100 for s in cluster.of(0)[n:])

        # Unassigning forgets too.
        n = len(cluster.of(1))
        c.assign([("t", 0), ("t", 1), ("t", 2)])
        cluster.append(1, [b"x"])
        assert _wait_for(lambda: c.poll(20) is not None and
                         any(3 in s.forgotten for s in cluster.of(1)[n:]))
        assert not cluster.resent
        _check_epochs(cluster.of(0))
        _check_epochs(cluster.of(1))
        ids = {0: cluster.of(0)[-1].session_id, 1: cluster.of(1)[-1].session_id}
    # Closing ends both sessions: epoch -1, the session's id, no partitions.
    for node in (0, 1):
        last = cluster.of(node)[-1]
        assert (last.session_id, last.epoch, last.sent, last.forgotten) == (ids[node], -1, {}, [])
    assert cluster.sessions == {}


def _wait_for(cond, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


@pytest.mark.parametrize("fault", [70, 71, "close", "ended"])
def test_a_refused_or_lost_session_restarts_with_a_full_fetch(cluster, fault):
    """70: the broker lost the session (new one, id 0); 71: wrong epoch, and a lost connection
    (the same id, epoch 0: the broker drops the old session and opens a new one); a broker that
    ends the session answers with id 0.  No record is lost or read twice."""
    cluster.batch_records = 10
    for p in (0, 2):
        cluster.append(p, [f"{p}-{i}".encode() for i in range(100)])
    if fault == "ended":
        cluster.faults[3] = 0
    else:
        cluster.faults[3] = fault
    if fault == 71:
        # the broker expects another epoch than the client sends
        cluster.faults.pop(3)
        orig = cluster._session_fetch

        def skew(node, req):
            if cluster.incremental == 2 and req.message.session_epoch > 0:
                for s in cluster.sessions.values():
                    s["epoch"] += 5
            return orig(node, req)

        cluster.handlers[1] = skew
    if fault == "ended":
        orig2 = cluster._session_fetch

        def end_session(node, req):
            resp = orig2(node, req)
            if cluster.incremental == 3 and req.message.session_epoch > 0:
                cluster.sessions.clear()
                cluster.give_sessions = False
                cluster.seen[-1].answered_session = 0
                resp.session_id = 0
            return resp

        cluster.handlers[1] = end_session
    with kafkawire.Consumer(cluster.bootstrap, auto_offset_reset="earliest",
                            fetch_max_wait_ms=50, max_poll_records=7,
                            request_timeout_ms=2000, retry_backoff_ms=10) as c:
        c.assign([("t", 0), ("t", 2)])
        got = _read(c, 200)
    _in_order_once(got, {0: 100, 2: 100})
    seen = cluster.of(0)
    bad = next(i for i, s in enumerate(seen) if s.error or (fault == "close" and s.epoch == 3)
               or (fault == "ended" and s.epoch > 0 and s.answered_session == 0))
    old_id = seen[bad].session_id
    after = seen[bad + 1]
    assert after.epoch == 0 and set(after.sent) == {0, 2}, (after, seen)
    if fault == 70:
        assert seen[bad].error == 70 and after.session_id == 0
    elif fault == 71:
        assert seen[bad].error == 71 and after.session_id == old_id
    elif fault == "close":
        assert after.session_id == old_id
    else:
        assert after.session_id == 0 and all(s.epoch == 0 for s in seen[bad + 1:-1])
    _check_epochs(seen[bad + 1:])
    assert not cluster.resent


def test_fetch_before_sessions_sends_none(cluster):
    cluster.versions[1] = (4, 6)
    cluster.append(0, [b"a", b"b"])
    with kafkawire.Consumer(cluster.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        assert [r.value for r in _read(c, 2)] == [b"a", b"b"]
    assert cluster.seen and all((s.session_id, s.epoch) == (0, -1) for s in cluster.seen)
