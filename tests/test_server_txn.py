"""The transaction coordinator as a state machine over an in-memory log.

Producer ids and epochs, fencing, the partitions of a transaction, markers
written to each on EndTxn, timeouts aborting, and state read back from
``__transaction_state`` by a second coordinator as a restarted broker does.
"""
from __future__ import annotations

import asyncio
import json

import pytest

import kafkawire.protocol as P
from kafkawire.cli import txn_decoder as td
from kafkawire.server import groups as G
from kafkawire.server import txn as T
from kafkawire.server.groups_storage import MemoryLog

pytestmark = pytest.mark.one_backend


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def make(storage=None, clock=None, groups=None):
    storage = storage or MemoryLog()
    clock = clock or Clock()
    markers = []

    def on_marker(pid, topic, partition, committed):
        markers.append((pid, topic, partition, committed))
        if groups is not None and topic == G.OFFSETS_TOPIC:
            groups.complete_txn(pid, partition, committed)

    coord = T.TransactionCoordinator(
        storage, T.TxnConfig(state_log_partitions=3), clock=clock, on_marker=on_marker,
        topic_partitions={"t": 2, G.OFFSETS_TOPIC: 4}.get,
        offsets_partition=(lambda g: (G.OFFSETS_TOPIC, groups.partition_for(g))) if groups else None)
    return coord, storage, clock, markers


async def init(coord, tid="tx", timeout=60000, version=4, pid=-1, epoch=-1):
    return await coord.init_producer_id(P.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=timeout, producer_id=pid,
        producer_epoch=epoch), version)


async def add(coord, r, parts, tid="tx", version=3):
    req = P.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=r.producer_id,
        v3_and_below_producer_epoch=r.producer_epoch,
        v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in parts.items()])
    resp = await coord.add_partitions_to_txn(req, version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


async def end(coord, r, committed, tid="tx"):
    return (await coord.end_txn(P.EndTxnRequest(transactional_id=tid, producer_id=r.producer_id,
                                                producer_epoch=r.producer_epoch,
                                                committed=committed), 3)).error_code


def test_idempotent_producers_get_fresh_ids():
    async def main():
        coord, *_ = make()
        await coord.load()
        a = await init(coord, tid=None)
        b = await init(coord, tid=None)
        assert a.error_code == b.error_code == 0
        assert a.producer_id != b.producer_id and a.producer_epoch == 0
    asyncio.run(main())


def test_commit_writes_markers_and_state():
    async def main():
        coord, storage, clock, markers = make()
        await coord.load()
        r = await init(coord)
        assert r.error_code == 0 and r.producer_epoch == 0
        assert await add(coord, r, {"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
        assert coord.txns["tx"].state == T.ONGOING
        assert coord.check_produce("tx", "t", 0, r.producer_id, r.producer_epoch) == 0
        assert coord.check_produce("tx", "t", 0, r.producer_id, r.producer_epoch - 1) == \
            T.INVALID_PRODUCER_EPOCH
        assert coord.check_produce("tx", "u", 0, r.producer_id, r.producer_epoch) == \
            T.INVALID_TXN_STATE
        assert coord.check_produce("other", "t", 0, r.producer_id, r.producer_epoch) == \
            T.INVALID_PRODUCER_ID_MAPPING
        assert await end(coord, r, True) == 0
        assert coord.check_produce("tx", "t", 0, r.producer_id, r.producer_epoch) == \
            T.INVALID_TXN_STATE
        assert markers == [(r.producer_id, "t", 0, True), (r.producer_id, "t", 1, True)]
        assert [b.control_type for b in storage.read("t", 0)] == ["commit"]
        assert coord.txns["tx"].state == T.COMPLETE_COMMIT and not coord.txns["tx"].partitions
        assert await end(coord, r, True) == 0, "a retried commit succeeds"
        assert await end(coord, r, False) == T.INVALID_TXN_STATE
        # the state log reads as Kafka's tool prints it
        states = [json.loads(td.parse_record(rec.key, rec.value, 0)[1])["data"]["transactionStatus"]
                  for b in storage.read(T.TRANSACTION_STATE_TOPIC, coord.partition_for("tx"))
                  for rec in b]
        assert states == [T.EMPTY, T.ONGOING, T.PREPARE_COMMIT, T.COMPLETE_COMMIT]
    asyncio.run(main())


def test_abort_and_unknown_partitions():
    async def main():
        coord, storage, clock, markers = make()
        await coord.load()
        r = await init(coord)
        assert await add(coord, r, {"t": [0, 5]}) == {("t", 0): T.OPERATION_NOT_ATTEMPTED,
                                                     ("t", 5): T.UNKNOWN_TOPIC_OR_PARTITION}
        assert await end(coord, r, False) == T.INVALID_TXN_STATE, "nothing was added"
        await add(coord, r, {"t": [1]})
        assert await end(coord, r, False) == 0
        assert [b.control_type for b in storage.read("t", 1)] == ["abort"]
    asyncio.run(main())


def test_new_producer_fences_the_old_one_and_aborts_its_transaction():
    async def main():
        coord, storage, clock, markers = make()
        await coord.load()
        old = await init(coord)
        await add(coord, old, {"t": [0]})
        new = await init(coord)
        assert new.producer_id == old.producer_id and new.producer_epoch == old.producer_epoch + 2
        # the open transaction was aborted with a bumped epoch before the new producer got its own
        assert [(b.control_type, b.producer_epoch) for b in storage.read("t", 0)] == \
            [("abort", old.producer_epoch + 1)]
        assert await end(coord, old, True) == T.PRODUCER_FENCED
        assert (await add(coord, old, {"t": [1]})) == {("t", 1): T.PRODUCER_FENCED}
        # v3+ InitProducerId with a stale id/epoch is fenced too
        stale = await init(coord, version=4, pid=old.producer_id, epoch=old.producer_epoch)
        assert stale.error_code == T.PRODUCER_FENCED
        again = await init(coord, version=4, pid=new.producer_id, epoch=new.producer_epoch)
        assert again.error_code == 0 and again.producer_epoch == new.producer_epoch + 1
        bad = await init(coord, timeout=10 ** 7)
        assert bad.error_code == T.INVALID_TRANSACTION_TIMEOUT
    asyncio.run(main())


def test_timeout_aborts_and_fences():
    async def main():
        coord, storage, clock, markers = make()
        await coord.load()
        r = await init(coord, timeout=1000)
        await add(coord, r, {"t": [0]})
        clock.now += 500
        await coord.poll()
        assert coord.txns["tx"].state == T.ONGOING
        clock.now += 600
        await coord.poll()
        assert coord.txns["tx"].state == T.COMPLETE_ABORT
        assert [b.control_type for b in storage.read("t", 0)] == ["abort"]
        assert await end(coord, r, True) == T.PRODUCER_FENCED
    asyncio.run(main())


def test_state_survives_a_restart_and_half_ended_transactions_finish():
    async def main():
        storage = MemoryLog()
        clock = Clock()
        coord, *_ = make(storage, clock)
        await coord.load()
        r = await init(coord)
        await add(coord, r, {"t": [0, 1]})
        again, _, _, markers = make(storage, clock)
        await again.load()
        m = again.txns["tx"]
        assert (m.producer_id, m.producer_epoch, m.state, m.partitions) == \
            (r.producer_id, r.producer_epoch, T.ONGOING, {("t", 0), ("t", 1)})
        assert again.next_producer_id > r.producer_id
        assert await end(again, r, True) == 0
        # a crash between PrepareCommit and the markers: the next start writes them
        r2 = await init(again)
        await add(again, r2, {"t": [1]})
        storage.fail = None
        m = again.txns["tx"]
        await again._store(m, T.PREPARE_COMMIT)
        third, _, _, markers3 = make(storage, clock)
        await third.load()
        assert markers3 == [(r2.producer_id, "t", 1, True)]
        assert third.txns["tx"].state == T.COMPLETE_COMMIT
    asyncio.run(main())


def test_failed_marker_write_is_finished_by_poll():
    async def main():
        coord, storage, clock, markers = make()
        await coord.load()
        r = await init(coord)
        await add(coord, r, {"t": [0]})
        real = storage.append_marker

        async def broken(*a, **kw):
            raise OSError("disk full")
        storage.append_marker = broken
        assert await end(coord, r, True) == T.COORDINATOR_NOT_AVAILABLE
        assert await end(coord, r, True) == T.CONCURRENT_TRANSACTIONS
        storage.append_marker = real
        await coord.poll()
        assert await end(coord, r, True) == 0
        assert [b.control_type for b in storage.read("t", 0)] == ["commit"]
    asyncio.run(main())


def test_send_offsets_to_transaction_with_the_group_coordinator():
    async def main():
        storage = MemoryLog()
        groups = G.GroupCoordinator(storage, G.GroupConfig(offsets_topic_partitions=4))
        groups.load()
        coord, _, _, markers = make(storage, groups=groups)
        await coord.load()
        r = await init(coord)
        add_off = await coord.add_offsets_to_txn(P.AddOffsetsToTxnRequest(
            transactional_id="tx", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
            group_id="g"), 3)
        assert add_off.error_code == 0
        assert (G.OFFSETS_TOPIC, groups.partition_for("g")) in coord.txns["tx"].partitions
        assert coord.check_offsets("tx", r.producer_id, r.producer_epoch) == 0
        assert coord.check_offsets("tx", r.producer_id, r.producer_epoch - 1) == \
            T.INVALID_PRODUCER_EPOCH
        await groups.txn_offset_commit(P.TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=r.producer_id,
            producer_epoch=r.producer_epoch, topics=[{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 17, "committed_metadata": ""}]}]), 3)
        fetch = P.OffsetFetchRequest(group_id="g", topics=None)
        assert (await groups.offset_fetch(fetch, 7)).topics == []
        assert await end(coord, r, True) == 0
        got = (await groups.offset_fetch(fetch, 7)).topics
        assert [(t.name, p.partition_index, p.committed_offset) for t in got
                for p in t.partitions] == [("t", 0, 17)]
    asyncio.run(main())
