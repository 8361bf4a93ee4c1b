"""kafkawire.Consumer against scripted brokers: group faults a real peer won't show on demand.

A small group coordinator is scripted on top of the fake brokers of
``test_client_fake``: JoinGroup rounds that wait for every member,
SyncGroup, heartbeats that expire members whose session ran out, offsets, and
partitions served from in-memory logs.  The tests move the coordinator, cut a
member off until its session expires, and check that no record is handed to
two live members (and, where every commit succeeds, that each is read once).
"""
from __future__ import annotations

import threading
import time
from typing import Dict, List, Optional, Tuple

import pytest

import kafkawire
from kafkawire import protocol as P
from kafkawire.client.assignors import (CooperativeStickyAssignor, RangeAssignor,
                                        RoundRobinAssignor)
from kafkawire.client.group_metadata import (Assignment, Subscription, TopicPartition,
                                             decode_assignment, decode_subscription,
                                             encode_assignment, encode_subscription)
from kafkawire.errors import ProtocolError
from kafkawire.records.builder import BatchBuilder

from test_client_fake import TOPIC_ID, FakeCluster

pytestmark = pytest.mark.one_backend

TS0 = 1_700_000_000_000


class FakeGroupCluster(FakeCluster):
    """Two brokers, topic ``t`` (4 partitions, leaders split), one scripted consumer group."""

    def __init__(self, partitions: int = 4, session_reaper: bool = True) -> None:
        super().__init__(2)
        self.partitions = {"t": partitions}
        for p in range(partitions):
            self.leaders[("t", p)] = p % 2
        self.logs: Dict[int, List[bytes]] = {p: [] for p in range(partitions)}
        self.raw: Dict[int, Tuple[bytes, List[Tuple[int, int]]]] = {}
        self.coordinator = 0
        self.batch_records = 50                  # records per fetched batch
        self.cond = threading.Condition()
        self.members: Dict[str, dict] = {}      # member id -> {metadata, last_seen, session}
        self.generation = 0
        self.round_open = False
        self.joined: Dict[str, bytes] = {}
        self.assignments: Optional[Dict[str, bytes]] = None
        self.committed: Dict[Tuple[str, int], int] = {}
        self.silenced: set = set()               # members whose group requests get no answer
        self.expired: List[Tuple[str, float]] = []
        self.history: List[Tuple[float, int, Dict[str, List[TopicPartition]]]] = []
        self._ids = 0
        for key, fn in ((10, self._find), (11, self._join), (14, self._sync), (12, self._hb),
                        (13, self._leave), (8, self._commit), (9, self._offset_fetch),
                        (2, self._list_offsets), (1, self._fetch)):
            self.handlers[key] = fn
        if session_reaper:
            threading.Thread(target=self._reaper, daemon=True).start()

    # ---------------------------------------------------------------- data
    def append(self, partition: int, values: List[bytes]) -> None:
        with self.cond:
            self.logs[partition].extend(values)

    def _batch(self, partition: int, start: int) -> Optional[bytes]:
        log = self.logs[partition]
        if start >= len(log):
            return None
        b = BatchBuilder(base_offset=start)
        for i in range(start, min(len(log), start + self.batch_records)):
            b.append(log[i], None, TS0 + i * 1000)
        return b.build()

    def _fetch(self, node, req):
        m = req.message
        parts = []
        time.sleep(0.01)
        for t in m.topics:
            out = []
            for p in t.partitions:
                if p.partition in self.raw:
                    data, aborted = self.raw[p.partition]
                    out.append({"partition_index": p.partition, "high_watermark": 1000,
                                "last_stable_offset": 1000,
                                "aborted_transactions": [{"producer_id": a, "first_offset": b}
                                                         for a, b in aborted],
                                "records": data if p.fetch_offset == 0 else b""})
                    continue
                with self.cond:
                    data = self._batch(p.partition, p.fetch_offset)
                    hw = len(self.logs[p.partition])
                out.append({"partition_index": p.partition, "high_watermark": hw,
                            "last_stable_offset": hw, "records": data or b""})
            parts.append({"topic_id": TOPIC_ID, "topic": "t", "partitions": out})
        return P.FetchResponse(responses=parts)

    def _list_offsets(self, node, req):
        topics = []
        for t in req.message.topics:
            ps = []
            for p in t.partitions:
                n = len(self.logs[p.partition_index])
                if p.timestamp == -2:
                    off = 0
                elif p.timestamp == -1:
                    off = n
                else:
                    off = next((i for i in range(n) if TS0 + i * 1000 >= p.timestamp), -1)
                ps.append({"partition_index": p.partition_index, "offset": off,
                           "timestamp": -1 if p.timestamp < 0 or off < 0 else TS0 + off * 1000})
            topics.append({"name": t.name, "partitions": ps})
        return P.ListOffsetsResponse(topics=topics)

    # ---------------------------------------------------------------- group
    def _find(self, node, req):
        c = self.coordinator
        port = self.port(c)
        if req.api_version >= 4:
            return P.FindCoordinatorResponse(coordinators=[{
                "key": k, "node_id": c, "host": "127.0.0.1", "port": port}
                for k in req.message.coordinator_keys])
        return P.FindCoordinatorResponse(node_id=c, host="127.0.0.1", port=port)

    def _not_coordinator(self, node) -> bool:
        return node != self.coordinator

    def _join(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        if self._not_coordinator(node):
            return P.JoinGroupResponse(error_code=16, member_id=m.member_id, members=[])
        with self.cond:
            member = m.member_id
            if not member:
                if m.group_instance_id is not None:
                    member = f"{m.group_instance_id}-{self._ids}"
                    self._ids += 1
                else:
                    self._ids += 1
                    return P.JoinGroupResponse(error_code=79, member_id=f"member-{self._ids}",
                                               members=[])
            elif member not in self.members and m.group_instance_id is None and \
                    member not in self._known_ids():
                return P.JoinGroupResponse(error_code=25, member_id=member, members=[])
            protocols = {p.name: p.metadata for p in m.protocols}
            self.members[member] = {"protocols": protocols, "last_seen": time.monotonic(),
                                    "session": m.session_timeout_ms / 1000.0}
            self._open_round()
            self.joined[member] = b""
            gen = self.generation
            end = time.monotonic() + 5
            while set(self.joined) != set(self.members) and time.monotonic() < end \
                    and self.generation == gen:
                self.cond.wait(0.05)
            if self.generation == gen:
                # every member rejoined (or the stragglers were dropped): close the round
                for late in set(self.members) - set(self.joined):
                    del self.members[late]
                    self.expired.append((late, time.monotonic()))
                self.generation += 1
                self.round_open = False
                self.assignments = None
                self.leader = sorted(self.joined)[0]
                self.cond.notify_all()
            leader = self.leader
            names = [p.name for p in m.protocols]
            chosen = next(n for n in names if all(n in self.members[x]["protocols"]
                                                  for x in self.members))
            members = []
            if member == leader:
                members = [{"member_id": x, "metadata": self.members[x]["protocols"][chosen]}
                           for x in sorted(self.members)]
            return P.JoinGroupResponse(generation_id=self.generation, protocol_name=chosen,
                                       leader=leader, member_id=member, members=members)

    def _known_ids(self):
        return {f"member-{i}" for i in range(self._ids + 1)}

    def _open_round(self) -> None:
        if not self.round_open:
            self.round_open = True
            self.joined = {}
            self.cond.notify_all()

    def _sync(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        if self._not_coordinator(node):
            return P.SyncGroupResponse(error_code=16)
        with self.cond:
            if m.member_id not in self.members:
                return P.SyncGroupResponse(error_code=25)
            if m.generation_id != self.generation or self.round_open:
                return P.SyncGroupResponse(error_code=27)
            self.members[m.member_id]["last_seen"] = time.monotonic()
            if m.assignments:
                self.assignments = {a.member_id: a.assignment for a in m.assignments}
                self.history.append((time.monotonic(), self.generation, {
                    k: decode_assignment(v).partitions for k, v in self.assignments.items()}))
                self.cond.notify_all()
            end = time.monotonic() + 5
            while self.assignments is None and time.monotonic() < end and \
                    m.generation_id == self.generation:
                self.cond.wait(0.05)
            if m.generation_id != self.generation or self.assignments is None:
                return P.SyncGroupResponse(error_code=27)
            return P.SyncGroupResponse(assignment=self.assignments.get(m.member_id, b""))

    def _hb(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        if self._not_coordinator(node):
            return P.HeartbeatResponse(error_code=16)
        with self.cond:
            if m.member_id not in self.members:
                return P.HeartbeatResponse(error_code=25)
            self.members[m.member_id]["last_seen"] = time.monotonic()
            if self.round_open:
                return P.HeartbeatResponse(error_code=27)
            if m.generation_id != self.generation:
                return P.HeartbeatResponse(error_code=22)
            return P.HeartbeatResponse()

    def _leave(self, node, req):
        if self._not_coordinator(node):
            return P.LeaveGroupResponse(error_code=16)
        m = req.message
        ids = [x.member_id for x in m.members] if req.api_version >= 3 else [m.member_id]
        with self.cond:
            for x in ids:
                if self.members.pop(x, None) is not None:
                    self._open_round()
        return P.LeaveGroupResponse()

    def _reaper(self) -> None:
        while not self._stop.is_set():
            time.sleep(0.02)
            with self.cond:
                now = time.monotonic()
                for x, info in list(self.members.items()):
                    if now - info["last_seen"] > info["session"]:
                        del self.members[x]
                        self.expired.append((x, now))
                        self._open_round()

    def _commit(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        code = 0
        if self._not_coordinator(node):
            code = 16
        else:
            with self.cond:
                gen = m.generation_id_or_member_epoch
                if gen >= 0 and m.member_id not in self.members:
                    code = 25
                elif gen >= 0 and gen != self.generation:
                    code = 22
                else:
                    for t in m.topics:
                        for p in t.partitions:
                            self.committed[(t.name, p.partition_index)] = p.committed_offset
        return P.OffsetCommitResponse(topics=[{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]}
            for t in m.topics])

    def _offset_fetch(self, node, req):
        m = req.message
        if req.api_version >= 8:
            g = m.groups[0]
            code = 16 if self._not_coordinator(node) else 0
            topics = [{"name": t.name, "partitions": [
                {"partition_index": p, "committed_offset": self.committed.get((t.name, p), -1),
                 "metadata": ""} for p in t.partition_indexes]} for t in g.topics]
            return P.OffsetFetchResponse(groups=[{"group_id": g.group_id, "topics": topics,
                                                  "error_code": code}])
        code = 16 if self._not_coordinator(node) else 0
        return P.OffsetFetchResponse(error_code=code, topics=[{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": self.committed.get((t.name, p), -1),
             "metadata": ""} for p in t.partition_indexes]} for t in m.topics])


class Member(threading.Thread):
    """A kafkawire group member on its own thread; logs (time, tp, offset) of every delivery."""

    def __init__(self, cluster, name, **kw):
        super().__init__(daemon=True, name=name)
        kw.setdefault("session_timeout_ms", 1500)
        kw.setdefault("heartbeat_interval_ms", 100)
        kw.setdefault("request_timeout_ms", 3000)
        kw.setdefault("retry_backoff_ms", 20)
        self.c = kafkawire.Consumer(cluster.bootstrap, "g", auto_offset_reset="earliest",
                                    enable_auto_commit=False, **kw)
        self.c.subscribe(["t"], on_revoke=self._revoked, on_lost=self._lost)
        self.deliveries: List[Tuple[float, TopicPartition, int]] = []
        self.lost_at: List[float] = []
        self.stop = threading.Event()
        self.error = None

    def _revoked(self, c, tps):
        c.commit({tp: c.position(tp) for tp in tps})

    def _lost(self, c, tps):
        self.lost_at.append(time.monotonic())

    def run(self):
        try:
            while not self.stop.is_set():
                recs = self.c.poll(50)
                now = time.monotonic()
                self.deliveries.extend((now, TopicPartition(r.topic, r.partition), r.offset)
                                       for r in recs)
                if recs:
                    try:
                        self.c.commit(timeout_ms=1000)
                    except Exception:  # noqa: BLE001 - a cut-off member cannot commit
                        pass
            self.c.close()
        except BaseException as exc:
            self.error = exc


def _wait(cond, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _all_offsets(cluster):
    return {(TopicPartition("t", p), o) for p, log in cluster.logs.items() for o in range(len(log))}


@pytest.fixture
def cluster():
    c = FakeGroupCluster()
    yield c
    c.close()


def _delivered(*members):
    return [(tp, o) for m in members for _, tp, o in m.deliveries]


def test_coordinator_moves_without_losing_or_repeating_records(cluster):
    for p in range(4):
        cluster.append(p, [f"{p}-{i}".encode() for i in range(30)])
    a, b = Member(cluster, "a"), Member(cluster, "b")
    a.start()
    b.start()
    try:
        assert _wait(lambda: len(a.c.assignment()) == 2 and len(b.c.assignment()) == 2, 20)
        assert _wait(lambda: len(_delivered(a, b)) >= 120, 20)
        generation = cluster.generation
        cluster.coordinator = 1   # node 0 now answers NOT_COORDINATOR to every group call
        for p in range(4):
            cluster.append(p, [f"{p}-{i}".encode() for i in range(30, 60)])
        assert _wait(lambda: len(_delivered(a, b)) >= 240, 20), len(_delivered(a, b))
        got = _delivered(a, b)
        assert sorted(got) == sorted(_all_offsets(cluster)), "a record was lost or read twice"
        assert a.error is None and b.error is None
        # Both members found the new coordinator; heartbeats and commits went there.
        assert _wait(lambda: any(node == 1 and api == 12 for node, api, _, _ in cluster.requests),
                     5)
        assert cluster.committed[("t", 0)] == 60
        assert cluster.generation == generation   # moving the coordinator needs no rebalance
    finally:
        a.stop.set()
        b.stop.set()
        a.join(10)
        b.join(10)


def test_a_member_cut_off_stops_before_its_partitions_move(cluster):
    for p in range(4):
        cluster.append(p, [f"{p}-{i}".encode() for i in range(10)])
    a = Member(cluster, "a", max_poll_interval_ms=3000, session_timeout_ms=3000)
    b = Member(cluster, "b", max_poll_interval_ms=3000, session_timeout_ms=3000)
    a.start()
    b.start()
    try:
        assert _wait(lambda: len(a.c.assignment()) == 2 and len(b.c.assignment()) == 2, 20)
        assert _wait(lambda: len(_delivered(a, b)) >= 40, 20)
        a_parts = set(a.c.assignment())
        a_id = a.c.member_id
        # Cut a off: its group requests get no answer; the coordinator expires it after its
        # session and gives its partitions to b, while records keep arriving everywhere.
        cluster.silenced.add(a_id)
        cut = time.monotonic()
        stop_feed = threading.Event()

        def feed():
            i = 10
            while not stop_feed.is_set():
                for p in range(4):
                    cluster.append(p, [f"{p}-{i}".encode()])
                i += 1
                time.sleep(0.01)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        assert _wait(lambda: any(x == a_id for x, _ in cluster.expired), 15)
        expired_at = min(t for x, t in cluster.expired if x == a_id)
        assert _wait(lambda: len(b.c.assignment()) == 4, 10), b.c.assignment()
        time.sleep(1.0)
        stop_feed.set()
        feeder.join()
        # a was told its partitions were lost (not revoked: it could not commit) ...
        assert a.lost_at
        # ... it handed out nothing of them once the coordinator expired it, and b read them
        # only after that. (b may have read them before the cut too: whoever joins first owns
        # all four partitions until the other member arrives.)
        a_last = max(t for t, tp, _ in a.deliveries if tp in a_parts)
        b_first = min(t for t, tp, _ in b.deliveries if tp in a_parts and t > cut)
        assert a_last < expired_at <= b_first
        assert a.error is None and b.error is None
    finally:
        a.stop.set()
        b.stop.set()
        a.join(10)
        b.join(10)


def test_static_member_sends_instance_id_and_keeps_its_place_on_close(cluster):
    for p in range(4):
        cluster.append(p, [b"x"] * 5)
    c = kafkawire.Consumer(cluster.bootstrap, "g", group_instance_id="box-1",
                           auto_offset_reset="earliest", heartbeat_interval_ms=100)
    c.subscribe(["t"])
    got = []
    end = time.monotonic() + 10
    while len(got) < 20 and time.monotonic() < end:
        got += c.poll(100)
    assert len(got) == 20
    c.close()
    joins = [m for _, api, _, m in cluster.requests if api == 11]
    assert joins and all(m.group_instance_id == "box-1" for m in joins)
    assert not [1 for _, api, _, _ in cluster.requests if api == 13]  # no LeaveGroup
    assert cluster.committed[("t", 0)] == 5   # auto commit on close


def test_deserializers_and_crc_checks(cluster):
    cluster.append(0, [b"1", b"22", None])
    with kafkawire.Consumer(cluster.bootstrap, auto_offset_reset="earliest", check_crcs=True,
                            value_deserializer=lambda b: b.decode() * 2) as c:
        c.assign([("t", 0)])
        got = []
        end = time.monotonic() + 5
        while len(got) < 3 and time.monotonic() < end:
            got += c.poll(100)
        assert [r.value for r in got] == ["11", "2222", None]
    serve = cluster.handlers[1]

    def damaged(node, req):
        resp = serve(node, req)
        for t in resp.responses:
            for p in t.partitions:
                if p.records:
                    raw = bytearray(p.records)
                    raw[-1] ^= 1
                    p.records = bytes(raw)
        return resp

    cluster.handlers[1] = damaged
    with kafkawire.Consumer(cluster.bootstrap, auto_offset_reset="earliest",
                            check_crcs=True) as c:
        c.assign([("t", 0)])
        with pytest.raises(kafkawire.errors.CorruptRecordError, match="CRC|crc"):
            end = time.monotonic() + 5
            while time.monotonic() < end:
                c.poll(100)
        assert c.position(("t", 0)) == 0


def test_offsets_for_times_and_commit_async(cluster):
    for p in range(4):
        cluster.append(p, [b"v"] * 10)
    with kafkawire.Consumer(cluster.bootstrap, "g", auto_offset_reset="earliest",
                            heartbeat_interval_ms=100) as c:
        c.assign([("t", 0), ("t", 1)])
        found = c.offsets_for_times({("t", 0): TS0 + 3500, ("t", 1): TS0 + 10**9})
        assert found[("t", 0)].offset == 4 and found[("t", 0)].timestamp == TS0 + 4000
        assert found[("t", 1)] is None
        got = []
        end = time.monotonic() + 5
        while len(got) < 20 and time.monotonic() < end:
            got += c.poll(100)
        done = []
        c.commit_async(callback=lambda offsets, err: done.append((offsets, err)))
        end = time.monotonic() + 5
        while not done and time.monotonic() < end:
            c.poll(50)
        assert done and done[0][1] is None
        assert cluster.committed[("t", 0)] == 10 and cluster.committed[("t", 1)] == 10
        assert c.committed([("t", 0)]) == {("t", 0): 10}


def test_read_committed_hides_confluent_aborted_transactions():
    """Batches a confluent-kafka transactional producer wrote (read back from librdkafka's mock)
    served with the aborted-transaction list a Kafka broker sends: none of the aborted records
    reach the read_committed consumer, in the record or the Arrow path."""
    ck = pytest.importorskip("confluent_kafka")
    owner = ck.Producer({"test.mock.num.brokers": 1, "log_level": 0})
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in owner.list_topics(timeout=10)
                         .brokers.values())
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-fake",
                     "log_level": 0})
    p.init_transactions(10)
    plan = (("c", range(5), True), ("a", range(5), False), ("c", range(5, 10), True),
            ("a", range(5, 8), False))
    for label, rng, commit in plan:
        p.begin_transaction()
        for i in rng:
            p.produce("tx", f"{label}{i}".encode(), partition=0)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(10)
    with kafkawire.Client(bootstrap, allow_auto_create_topics=True) as client:
        raw, offset, batches = b"", 0, []
        end = time.monotonic() + 20
        while offset < 22 and time.monotonic() < end:   # 18 records + 4 markers
            res = client.fetch("tx", 0, offset, max_wait_ms=100)
            batches.extend(res.batches)
            raw += b"".join(bytes(b.raw) for b in res.batches)
            offset = res.next_offset
        assert offset == 22
    # What a broker lists: (producer id, first offset) of each aborted transaction.
    aborted, start = [], None
    for b in batches:
        if b.is_control:
            if b.control_type == "abort":
                aborted.append((b.producer_id, start))
            start = None
        elif start is None:
            start = b.base_offset
    assert len(aborted) == 2
    cluster = FakeGroupCluster(partitions=1, session_reaper=False)
    cluster.raw[0] = (raw, aborted)
    try:
        want = [f"c{i}".encode() for i in range(10)]
        with kafkawire.Consumer(cluster.bootstrap, isolation_level="read_committed",
                                auto_offset_reset="earliest") as c:
            c.assign([("t", 0)])
            got = []
            end = time.monotonic() + 5
            while len(got) < 10 and time.monotonic() < end:
                got += c.poll(100)
            assert [r.value for r in got] == want
            assert c.position(("t", 0)) == offset   # past the trailing abort marker
        with kafkawire.Consumer(cluster.bootstrap, isolation_level="read_committed",
                                auto_offset_reset="earliest") as c:
            c.assign([("t", 0)])
            rows = []
            end = time.monotonic() + 5
            while len(rows) < 10 and time.monotonic() < end:
                rows += c.poll_arrow(100).column("value").to_pylist()
            assert rows == want
        with kafkawire.Consumer(cluster.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([("t", 0)])
            got = []
            end = time.monotonic() + 5
            while len(got) < 18 and time.monotonic() < end:
                got += c.poll(100)
            assert len(got) == 18   # read_uncommitted sees the aborted records too
    finally:
        cluster.close()
        owner.flush(1)


# ------------------------------------------------------------------ units
def _subs(**members):
    return {m: Subscription(list(topics)) for m, topics in members.items()}


def test_subscription_and_assignment_round_trip_every_version():
    for v in range(4):
        s = Subscription(["b", "a"], b"ud", [TopicPartition("a", 1), TopicPartition("a", 0)],
                         7, "rack-1", version=v)
        back = decode_subscription(encode_subscription(s))
        assert back.topics == ["a", "b"] and back.user_data == b"ud" and back.version == v
        assert back.owned_partitions == ([("a", 0), ("a", 1)] if v >= 1 else [])
        assert back.generation_id == (7 if v >= 2 else -1)
        assert back.rack_id == ("rack-1" if v >= 3 else None)
    a = Assignment([TopicPartition("t", 2), TopicPartition("t", 0), TopicPartition("u", 1)])
    assert decode_assignment(encode_assignment(a)).partitions == [("t", 0), ("t", 2), ("u", 1)]
    assert decode_assignment(b"").partitions == []
    # A newer version with more fields is read as far as we know it.
    assert decode_subscription(encode_subscription(Subscription(["x"])) + b"\0\0").topics == ["x"]


def test_hostile_member_metadata_is_a_protocol_error():
    good = encode_subscription(Subscription(["topic"], None, [TopicPartition("topic", 1)], 1))
    for cut in range(1, len(good) - 1):
        try:
            decode_subscription(good[:cut])
        except ProtocolError:
            pass
    with pytest.raises(ProtocolError, match="array length"):
        decode_subscription(b"\x00\x00\x7f\xff\xff\xff")
    with pytest.raises(ProtocolError, match="truncated"):
        decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x05ab")


def test_range_and_roundrobin_match_kafka():
    counts = {"t": 5, "u": 2}
    plan = RangeAssignor().assign(counts, _subs(m1=["t", "u"], m2=["t", "u"]))
    assert plan == {"m1": [("t", 0), ("t", 1), ("t", 2), ("u", 0)],
                    "m2": [("t", 3), ("t", 4), ("u", 1)]}
    plan = RoundRobinAssignor().assign(counts, _subs(m1=["t", "u"], m2=["t", "u"]))
    assert plan == {"m1": [("t", 0), ("t", 2), ("t", 4), ("u", 1)],
                    "m2": [("t", 1), ("t", 3), ("u", 0)]}


def test_cooperative_sticky_moves_partitions_in_two_steps():
    a = CooperativeStickyAssignor()
    counts = {"t": 6}
    first = a.assign(counts, _subs(m1=["t"]))
    assert first == {"m1": [("t", p) for p in range(6)]}
    # m2 joins: m1 keeps 3, and the 3 that move are not handed to m2 in this round.
    subs = {"m1": Subscription(["t"], None, first["m1"], 1), "m2": Subscription(["t"])}
    second = a.assign(counts, subs)
    assert len(second["m1"]) == 3 and second["m2"] == []
    # After m1 revoked them, the next round gives them to m2.
    subs = {"m1": Subscription(["t"], None, second["m1"], 2), "m2": Subscription(["t"], None, [], 2)}
    third = a.assign(counts, subs)
    assert third["m1"] == second["m1"] and len(third["m2"]) == 3
    assert set(third["m1"]) | set(third["m2"]) == {("t", p) for p in range(6)}


def test_fetching_follows_a_leader_change(cluster):
    for p in range(4):
        cluster.append(p, [f"{p}-{i}".encode() for i in range(40)])
    serve = cluster.handlers[1]
    moved = []

    def fetch(node, req):
        # After 10 records of partition 0, its leader moves from broker 0 to broker 1;
        # broker 0 then answers NOT_LEADER_OR_FOLLOWER for it.
        for t in req.message.topics:
            for p in t.partitions:
                if p.partition == 0 and p.fetch_offset >= 10 and not moved:
                    moved.append(node)
                    cluster.leaders[("t", 0)] = 1
                if p.partition == 0 and node == 0 and moved:
                    return P.FetchResponse(responses=[{"topic_id": TOPIC_ID, "topic": "t",
                                                       "partitions": [{
                                                           "partition_index": q.partition,
                                                           "error_code": 6}
                                                           for q in t.partitions]}])
        return serve(node, req)

    cluster.handlers[1] = fetch
    cluster.batch_records = 5
    with kafkawire.Consumer(cluster.bootstrap, auto_offset_reset="earliest",
                            max_poll_records=10, retry_backoff_ms=10) as c:
        c.assign([("t", 0), ("t", 2)])
        got = []
        end = time.monotonic() + 10
        while len(got) < 80 and time.monotonic() < end:
            got += c.poll(100)
    assert sorted((r.partition, r.offset) for r in got) == \
        sorted((p, o) for p in (0, 2) for o in range(40))
    assert moved and any(node == 1 and api == 1 and any(
        q.partition == 0 for t in m.topics for q in t.partitions)
        for node, api, _, m in cluster.requests)


def test_a_member_that_stops_polling_leaves_and_rejoins(cluster):
    for p in range(4):
        cluster.append(p, [b"x"] * 5)
    lost = []
    c = kafkawire.Consumer(cluster.bootstrap, "g", auto_offset_reset="earliest",
                           heartbeat_interval_ms=50, max_poll_interval_ms=600,
                           enable_auto_commit=False)
    try:
        c.subscribe(["t"], on_lost=lambda consumer, tps: lost.append(tps))
        got = []
        end = time.monotonic() + 10
        while len(got) < 20 and time.monotonic() < end:
            got += c.poll(100)
        generation = c.generation
        time.sleep(1.2)   # longer than max_poll_interval_ms without a poll
        assert _wait(lambda: any(api == 13 for _, api, _, _ in cluster.requests), 5)
        c.poll(2000)   # finds the membership lost, reports it, rejoins
        assert lost and sorted(lost[0]) == [("t", p) for p in range(4)]
        assert _wait(lambda: c.poll(100) is not None and c.generation > generation, 10)
        assert len(c.assignment()) == 4
    finally:
        c.close()
