"""The group coordinator as a state machine: a fake clock, no sockets, no sleeping.

Join/Sync answers that wait for other members are asyncio tasks; moving the
clock and calling ``poll`` fires the timers (initial rebalance delay, session
and rebalance timeouts).  Persistence goes to a :class:`MemoryLog` that a
second coordinator loads, as a restarted broker does.
"""
from __future__ import annotations

import asyncio

import pytest

import kafkawire.protocol as P
from kafkawire.protocol import coordinator_records as R
from kafkawire.server import groups as G
from kafkawire.server.groups_storage import MemoryLog

pytestmark = pytest.mark.one_backend


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(storage=None, **config):
    clock = Clock()
    cfg = G.GroupConfig(offsets_topic_partitions=4, **config)
    coord = G.GroupCoordinator(storage or MemoryLog(), cfg, clock=clock, wall_clock=lambda: 77)
    coord.load()
    return coord, clock


def join_req(member_id="", instance=None, protocols=(("range", b"r"),), session=10000,
             rebalance=30000, group="g"):
    return P.JoinGroupRequest(group_id=group, session_timeout_ms=session,
                              rebalance_timeout_ms=rebalance, member_id=member_id,
                              group_instance_id=instance, protocol_type="consumer",
                              protocols=[{"name": n, "metadata": m} for n, m in protocols])


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


async def join_new(coord, clock, instance=None, version=9, **kw):
    """A dynamic member's first join: MEMBER_ID_REQUIRED, then the join with its id (a task)."""
    if instance is None and version >= 4:
        first = await coord.join_group(join_req(**kw), version, "cli")
        assert first.error_code == G.MEMBER_ID_REQUIRED and first.member_id.startswith("cli-")
        return asyncio.ensure_future(coord.join_group(join_req(first.member_id, **kw), version, "cli"))
    return asyncio.ensure_future(coord.join_group(join_req(instance=instance, **kw), version, "cli"))


async def complete_first_rebalance(coord, clock, n=2, **kw):
    tasks = [await join_new(coord, clock, **kw) for _ in range(n)]
    await settle()
    assert not any(t.done() for t in tasks), "the initial rebalance delay holds the join"
    # a member arriving during the delay extends it once more (Kafka's InitialDelayedJoin)
    for _ in range(2):
        assert not any(t.done() for t in tasks)
        clock.now += 3000
        await coord.poll()
        await settle()
    return [t.result() for t in tasks]


async def sync_all(coord, joins, group="g"):
    leader = next(j for j in joins if j.member_id == j.leader)
    assignments = [{"member_id": m.member_id, "assignment": f"to-{m.member_id}".encode()}
                   for m in leader.members]
    tasks = []
    for j in joins:
        req = P.SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                 assignments=assignments if j is leader else [])
        tasks.append(asyncio.ensure_future(coord.sync_group(req, 5)))
        await settle()
    return [await t for t in tasks]


def hb(coord, j, member_id=None, instance=None, group="g"):
    return coord.heartbeat(P.HeartbeatRequest(group_id=group, generation_id=j.generation_id,
                                              member_id=member_id or j.member_id,
                                              group_instance_id=instance), 4)


def test_two_members_rebalance_then_sync_and_heartbeat():
    async def main():
        coord, clock = make()
        joins = await complete_first_rebalance(coord, clock)
        assert all(j.error_code == 0 for j in joins)
        assert {j.generation_id for j in joins} == {1}
        leaders = [j for j in joins if j.member_id == j.leader]
        assert len(leaders) == 1 and len(leaders[0].members) == 2
        assert all(not j.members for j in joins if j is not leaders[0])
        assert coord.groups["g"].state == G.COMPLETING_REBALANCE
        syncs = await sync_all(coord, joins)
        assert [s.assignment for s in syncs] == [f"to-{j.member_id}".encode() for j in joins]
        assert coord.groups["g"].state == G.STABLE
        assert (await hb(coord, joins[0])).error_code == 0
        stale = P.HeartbeatRequest(group_id="g", generation_id=0, member_id=joins[0].member_id)
        assert (await coord.heartbeat(stale, 4)).error_code == G.ILLEGAL_GENERATION
        assert (await hb(coord, joins[0], member_id="nobody")).error_code == G.UNKNOWN_MEMBER_ID
    asyncio.run(main())


def test_new_member_triggers_rebalance_and_old_members_rejoin():
    async def main():
        coord, clock = make()
        joins = await complete_first_rebalance(coord, clock)
        await sync_all(coord, joins)
        late = await join_new(coord, clock)
        await settle()
        assert coord.groups["g"].state == G.PREPARING_REBALANCE
        assert (await hb(coord, joins[0])).error_code == G.REBALANCE_IN_PROGRESS
        again = [asyncio.ensure_future(coord.join_group(join_req(j.member_id), 9, "cli"))
                 for j in joins]
        await settle()
        # everyone known has rejoined: no need to wait for the rebalance timeout
        results = [await t for t in again] + [await late]
        assert {r.generation_id for r in results} == {2}
        assert sum(1 for r in results if r.members) == 1
    asyncio.run(main())


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    async def main():
        coord, clock = make()
        joins = await complete_first_rebalance(coord, clock, rebalance=5000)
        await sync_all(coord, joins)
        t = asyncio.ensure_future(coord.join_group(join_req(joins[0].member_id, protocols=(
            ("range", b"changed"),), rebalance=5000), 9, "cli"))
        await settle()
        assert not t.done()
        clock.now += 5001
        await coord.poll()
        r = await t
        assert r.error_code == 0 and r.generation_id == 2 and len(r.members) == 1
        assert list(coord.groups["g"].members) == [joins[0].member_id]
    asyncio.run(main())


def test_session_timeout_expires_a_silent_member():
    async def main():
        coord, clock = make()
        joins = await complete_first_rebalance(coord, clock, session=6000)
        await sync_all(coord, joins)
        for _ in range(2):
            clock.now += 4000
            assert (await hb(coord, joins[0])).error_code == 0
            await coord.poll()
        assert (await hb(coord, joins[0])).error_code == G.REBALANCE_IN_PROGRESS
        g = coord.groups["g"]
        assert joins[1].member_id not in g.members and g.state == G.PREPARING_REBALANCE
        r = await coord.join_group(join_req(joins[0].member_id), 9, "cli")
        assert r.generation_id == 2 and r.leader == joins[0].member_id
    asyncio.run(main())


def test_leave_group_batched_and_legacy():
    async def main():
        coord, clock = make()
        joins = await complete_first_rebalance(coord, clock)
        await sync_all(coord, joins)
        req = P.LeaveGroupRequest(group_id="g", members=[{"member_id": joins[0].member_id},
                                                         {"member_id": "ghost"}])
        resp = await coord.leave_group(req, 5)
        assert [m.error_code for m in resp.members] == [0, G.UNKNOWN_MEMBER_ID]
        legacy = await coord.leave_group(P.LeaveGroupRequest(group_id="g",
                                                             member_id=joins[1].member_id), 1)
        assert legacy.error_code == 0
        g = coord.groups["g"]
        assert g.state == G.EMPTY and g.generation == 2 and not g.members
    asyncio.run(main())


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced():
    async def main():
        coord, clock = make()
        tasks = [await join_new(coord, clock, instance=f"inst-{i}") for i in range(2)]
        for _ in range(2):
            await settle()
            clock.now += 3000
            await coord.poll()
        joins = [await t for t in tasks]
        await sync_all(coord, joins)
        old = joins[1]
        again = await coord.join_group(join_req(instance="inst-1"), 9, "cli")
        assert again.error_code == 0 and again.member_id != old.member_id
        assert again.generation_id == old.generation_id, "a static rejoin does not rebalance"
        assert coord.groups["g"].state == G.STABLE
        assert (await hb(coord, old, instance="inst-1")).error_code == G.FENCED_INSTANCE_ID
        fenced = await coord.join_group(join_req(old.member_id, instance="inst-1"), 9, "cli")
        assert fenced.error_code == G.FENCED_INSTANCE_ID
        sync = await coord.sync_group(P.SyncGroupRequest(
            group_id="g", generation_id=again.generation_id, member_id=again.member_id,
            group_instance_id="inst-1"), 5)
        assert sync.assignment == f"to-{old.member_id}".encode(), "the assignment is kept"
        leave = await coord.leave_group(P.LeaveGroupRequest(group_id="g", members=[
            {"member_id": "", "group_instance_id": "inst-1"}]), 4)
        assert leave.members[0].error_code == 0
        assert coord.groups["g"].state == G.PREPARING_REBALANCE
    asyncio.run(main())


def test_protocol_selection_and_inconsistent_protocols():
    async def main():
        coord, clock = make(initial_rebalance_delay_ms=0)
        a = await join_new(coord, clock, protocols=(("roundrobin", b"1"), ("range", b"2")))
        b = await join_new(coord, clock, protocols=(("range", b"3"), ("sticky", b"4")))
        await settle()
        # member a rejoin is still pending: b's arrival extended nothing; join completes on all joined
        ra, rb = await a, await b
        assert ra.protocol_name == rb.protocol_name == "range"
        leader = ra if ra.members else rb
        assert {m.metadata for m in leader.members} == {b"2", b"3"}
        bad = await coord.join_group(join_req(protocols=(("other", b""),)), 9, "cli")
        assert bad.error_code == G.INCONSISTENT_GROUP_PROTOCOL
        assert (await coord.join_group(join_req(session=10), 9, "cli")).error_code == \
            G.INVALID_SESSION_TIMEOUT
    asyncio.run(main())


def test_join_v3_gets_member_id_at_once():
    async def main():
        coord, clock = make(initial_rebalance_delay_ms=0)
        r = await coord.join_group(join_req(), 3, "old")
        assert r.error_code == 0 and r.member_id.startswith("old-") and r.leader == r.member_id
    asyncio.run(main())


def commit_req(gen, member, offsets, group="g", instance=None):
    return P.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=gen, member_id=member,
                                 group_instance_id=instance,
                                 topics=[{"name": t, "partitions": [
                                     {"partition_index": p, "committed_offset": o,
                                      "committed_metadata": "md"}]} for (t, p), o in offsets.items()])


def codes(resp):
    return [p.error_code for t in resp.topics for p in t.partitions]


async def fetch(coord, group="g", topics=None, version=7, require_stable=False):
    req = P.OffsetFetchRequest(group_id=group, topics=topics, require_stable=require_stable)
    resp = await coord.offset_fetch(req, version)
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in resp.topics for p in t.partitions}


def test_offset_commit_generation_rules_and_fetch():
    async def main():
        coord, clock = make()
        # a consumer managing its own partitions: generation -1, no member
        assert codes(await coord.offset_commit(commit_req(-1, "", {("t", 0): 5}), 8)) == [0]
        assert await fetch(coord) == {("t", 0): (5, 0)}
        assert await fetch(coord, topics=[{"name": "t", "partition_indexes": [0, 1]}]) == \
            {("t", 0): (5, 0), ("t", 1): (-1, 0)}
        joins = await complete_first_rebalance(coord, clock)
        assert codes(await coord.offset_commit(commit_req(1, joins[0].member_id, {("t", 0): 6}), 8)) \
            == [G.REBALANCE_IN_PROGRESS]
        await sync_all(coord, joins)
        assert codes(await coord.offset_commit(commit_req(-1, "", {("t", 0): 6}), 8)) == \
            [G.UNKNOWN_MEMBER_ID]
        assert codes(await coord.offset_commit(commit_req(0, joins[0].member_id, {("t", 0): 6}), 8)) \
            == [G.ILLEGAL_GENERATION]
        assert codes(await coord.offset_commit(commit_req(1, joins[0].member_id, {("t", 0): 7}), 8)) \
            == [0]
        too_big = commit_req(1, joins[0].member_id, {("t", 1): 1})
        too_big.topics[0].partitions[0].committed_metadata = "x" * 5000
        assert codes(await coord.offset_commit(too_big, 8)) == [G.OFFSET_METADATA_TOO_LARGE]
        assert (await fetch(coord))[("t", 0)] == (7, 0)
        v8 = await coord.offset_fetch(P.OffsetFetchRequest(groups=[
            {"group_id": "g", "topics": None}, {"group_id": "none", "topics": [
                {"name": "t", "partition_indexes": [3]}]}]), 8)
        assert [(g.group_id, [(p.partition_index, p.committed_offset) for t in g.topics
                              for p in t.partitions]) for g in v8.groups] == \
            [("g", [(0, 7)]), ("none", [(3, -1)])]
    asyncio.run(main())


def test_unknown_topics_are_refused_when_the_broker_says_so():
    async def main():
        storage = MemoryLog()
        coord = G.GroupCoordinator(storage, G.GroupConfig(offsets_topic_partitions=2),
                                   topic_partitions={"t": 2}.get)
        coord.load()
        resp = await coord.offset_commit(commit_req(-1, "", {("t", 1): 1, ("t", 2): 1,
                                                             ("u", 0): 1}), 8)
        assert codes(resp) == [0, G.UNKNOWN_TOPIC_OR_PARTITION, G.UNKNOWN_TOPIC_OR_PARTITION]
    asyncio.run(main())


def test_offsets_and_groups_survive_a_restart():
    async def main():
        storage = MemoryLog()
        coord, clock = make(storage)
        joins = await complete_first_rebalance(coord, clock)
        await sync_all(coord, joins)
        await coord.offset_commit(commit_req(1, joins[0].member_id, {("t", 0): 42, ("t", 1): 7}), 8)
        await coord.offset_commit(commit_req(-1, "", {("u", 0): 3}, group="simple"), 8)
        part = coord.partition_for("g")
        assert storage.configs[G.OFFSETS_TOPIC]["cleanup.policy"] == "compact"
        assert all(len(storage.topics[G.OFFSETS_TOPIC]) == 4 for _ in range(1))
        assert any(b.records for b in storage.read(G.OFFSETS_TOPIC, part))
        again, clock2 = make(storage)
        assert await fetch(again) == {("t", 0): (42, 0), ("t", 1): (7, 0)}
        assert await fetch(again, group="simple") == {("u", 0): (3, 0)}
        g = again.groups["g"]
        assert g.state == G.STABLE and g.generation == 1 and set(g.members) == \
            {j.member_id for j in joins}
        # members carry on with their generation after the restart
        assert (await hb(again, joins[0])).error_code == 0
        s = await again.sync_group(P.SyncGroupRequest(group_id="g", generation_id=1,
                                                      member_id=joins[1].member_id), 5)
        assert s.assignment == f"to-{joins[1].member_id}".encode()
    asyncio.run(main())


def test_written_records_are_kafkas_format():
    async def main():
        storage = MemoryLog()
        coord, clock = make(storage)
        await coord.offset_commit(commit_req(-1, "", {("t", 0): 9}), 8)
        batch = storage.read(G.OFFSETS_TOPIC, coord.partition_for("g"))[0]
        rec = batch.records[0]
        assert rec.key == R.encode(R.OffsetCommitKey(group="g", topic="t", partition=0))
        value = R.decode_offsets_value(R.decode_offsets_key(rec.key), rec.value)
        assert (value.offset, value.metadata, value.commit_timestamp) == (9, "md", 77)
    asyncio.run(main())


def test_delete_groups():
    async def main():
        storage = MemoryLog()
        coord, clock = make(storage)
        await coord.offset_commit(commit_req(-1, "", {("t", 0): 9}, group="old"), 8)
        joins = await complete_first_rebalance(coord, clock)
        resp = await coord.delete_groups(P.DeleteGroupsRequest(groups_names=["old", "g", "nope"]), 2)
        assert [r.error_code for r in resp.results] == [0, G.NON_EMPTY_GROUP, G.GROUP_ID_NOT_FOUND]
        assert await fetch(coord, group="old") == {}
        again, _ = make(storage)
        assert "old" not in again.groups
        del joins
    asyncio.run(main())


def test_describe_and_list_groups():
    async def main():
        coord, clock = make()
        await coord.offset_commit(commit_req(-1, "", {("t", 0): 9}, group="simple"), 8)
        joins = await complete_first_rebalance(coord, clock)
        await sync_all(coord, joins)
        d = await coord.describe_groups(P.DescribeGroupsRequest(groups=["g", "simple", "x"]), 5)
        g, simple, x = d.groups
        assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
        assert {m.member_assignment for m in g.members} == {f"to-{j.member_id}".encode()
                                                             for j in joins}
        assert simple.group_state == "Empty" and x.group_state == "Dead"
        listed = await coord.list_groups(P.ListGroupsRequest(states_filter=["stable"]), 5)
        assert [(lg.group_id, lg.group_state, lg.group_type) for lg in listed.groups] == \
            [("g", "Stable", "classic")]
        every = await coord.list_groups(P.ListGroupsRequest(), 0)
        assert sorted(lg.group_id for lg in every.groups) == ["g", "simple"]
    asyncio.run(main())


def test_transactional_offsets_visible_after_commit_only():
    async def main():
        storage = MemoryLog()
        coord, clock = make(storage)
        req = P.TxnOffsetCommitRequest(transactional_id="tx", group_id="g", producer_id=5,
                                       producer_epoch=0, topics=[{"name": "t", "partitions": [
                                           {"partition_index": 0, "committed_offset": 10,
                                            "committed_metadata": ""}]}])
        resp = await coord.txn_offset_commit(req, 3)
        assert resp.topics[0].partitions[0].error_code == 0
        assert await fetch(coord, topics=[{"name": "t", "partition_indexes": [0]}]) == \
            {("t", 0): (-1, 0)}
        assert await fetch(coord, topics=[{"name": "t", "partition_indexes": [0]}],
                           require_stable=True) == {("t", 0): (-1, G.UNSTABLE_OFFSET_COMMIT)}
        # a restart while the transaction is open keeps it pending
        part = coord.partition_for("g")
        again, _ = make(storage)
        assert await fetch(again) == {}
        await storage.append_marker(G.OFFSETS_TOPIC, part, True, producer_id=5, producer_epoch=0,
                                    coordinator_epoch=0)
        coord.complete_txn(5, part, True)
        assert await fetch(coord) == {("t", 0): (10, 0)}
        reloaded, _ = make(storage)
        assert await fetch(reloaded) == {("t", 0): (10, 0)}
        # an aborted one never shows
        req.topics[0].partitions[0].committed_offset = 99
        await coord.txn_offset_commit(req, 3)
        await storage.append_marker(G.OFFSETS_TOPIC, part, False, producer_id=5, producer_epoch=0,
                                    coordinator_epoch=0)
        coord.complete_txn(5, part, False)
        assert await fetch(coord) == {("t", 0): (10, 0)}
        assert await fetch(make(storage)[0]) == {("t", 0): (10, 0)}
    asyncio.run(main())


def test_write_failure_is_reported_not_acknowledged():
    async def main():
        storage = MemoryLog()
        coord, clock = make(storage)
        storage.fail = OSError("disk full")
        assert codes(await coord.offset_commit(commit_req(-1, "", {("t", 0): 5}), 8)) == \
            [G.COORDINATOR_NOT_AVAILABLE]
        assert await fetch(coord) == {}
    asyncio.run(main())


def test_a_stopping_broker_answers_waiting_joins():
    async def main():
        coord, clock = make()
        task = await join_new(coord, clock)
        await settle()
        assert not task.done()
        coord.is_stopping = lambda: True
        await coord.poll()
        assert (await task).error_code == G.COORDINATOR_NOT_AVAILABLE
    asyncio.run(main())


def test_offsets_of_empty_groups_expire_after_retention():
    async def main():
        storage = MemoryLog()
        wall = [1_000_000]
        coord = G.GroupCoordinator(storage, G.GroupConfig(offsets_topic_partitions=4,
                                                          offsets_retention_ms=1000),
                                   clock=Clock(), wall_clock=lambda: wall[0])
        coord.load()
        await coord.offset_commit(commit_req(-1, "", {("t", 0): 1}, group="old"), 8)
        wall[0] += 500
        await coord.offset_commit(commit_req(-1, "", {("t", 1): 2}, group="old"), 8)
        await coord.expire_offsets(wall[0] + 600)
        assert await fetch(coord, group="old") == {("t", 1): (2, 0)}, "only the older one expired"
        await coord.expire_offsets(wall[0] + 1000)
        assert "old" not in coord.groups
        again = G.GroupCoordinator(storage, G.GroupConfig(offsets_topic_partitions=4))
        again.load()
        assert "old" not in again.groups
    asyncio.run(main())


def test_offsets_of_a_group_with_members_do_not_expire():
    async def main():
        coord, clock = make()
        joins = await complete_first_rebalance(coord, clock)
        await sync_all(coord, joins)
        await coord.offset_commit(commit_req(1, joins[0].member_id, {("t", 0): 3}), 8)
        await coord.expire_offsets(10 ** 13)
        assert await fetch(coord) == {("t", 0): (3, 0)}
    asyncio.run(main())
