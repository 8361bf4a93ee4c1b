"""kafkawire.Consumer against scripted brokers: group faults a real peer won't show on demand.

A small group coordinator is scripted on top of the fake brokers
(``fake_brokers.FakeGroupCluster``): JoinGroup rounds that wait for every member,
SyncGroup, heartbeats that expire members whose session ran out, offsets, and
partitions served from in-memory logs.  The tests move the coordinator, cut a
member off until its session expires, and check that no record is handed to
two live members (and, where every commit succeeds, that each is read once).
"""
from __future__ import annotations

import threading
import time

import pytest

import kafkawire
from kafkawire import protocol as P
from kafkawire.client.assignors import (CooperativeStickyAssignor, RangeAssignor,
                                        RoundRobinAssignor)
from kafkawire.client.group_metadata import (Assignment, Subscription, TopicPartition,
                                             decode_assignment, decode_subscription,
                                             encode_assignment, encode_subscription)
from kafkawire.errors import ProtocolError

from fake_brokers import TOPIC_ID, TS0, FakeGroupCluster, Member, wait_for

pytestmark = pytest.mark.one_backend

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
        assert wait_for(lambda: len(a.c.assignment()) == 2 and len(b.c.assignment()) == 2, 20)
        assert wait_for(lambda: len(_delivered(a, b)) >= 120, 20)
        generation = cluster.generation
        cluster.coordinator = 1   # node 0 now answers NOT_COORDINATOR to every group call
        for p in range(4):
            cluster.append(p, [f"{p}-{i}".encode() for i in range(30, 60)])
        assert wait_for(lambda: len(_delivered(a, b)) >= 240, 20), len(_delivered(a, b))
        got = _delivered(a, b)
        assert sorted(got) == sorted(_all_offsets(cluster)), "a record was lost or read twice"
        assert a.error is None and b.error is None
        # Both members found the new coordinator; heartbeats and commits went there.
        assert wait_for(lambda: any(node == 1 and api == 12 for node, api, _, _ in cluster.requests),
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
        assert wait_for(lambda: len(a.c.assignment()) == 2 and len(b.c.assignment()) == 2, 20)
        assert wait_for(lambda: len(_delivered(a, b)) >= 40, 20)
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
        assert wait_for(lambda: any(x == a_id for x, _ in cluster.expired), 15)
        expired_at = min(t for x, t in cluster.expired if x == a_id)
        assert wait_for(lambda: len(b.c.assignment()) == 4, 10), b.c.assignment()
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
        assert wait_for(lambda: any(api == 13 for _, api, _, _ in cluster.requests), 5)
        c.poll(2000)   # finds the membership lost, reports it, rejoins
        assert lost and sorted(lost[0]) == [("t", p) for p in range(4)]
        assert wait_for(lambda: c.poll(100) is not None and c.generation > generation, 10)
        assert len(c.assignment()) == 4
    finally:
        c.close()
