"""Partition reads of the active segment's tail (served from the positions appends recorded)
answer exactly what reads through the partition's log view answer: same region, offsets and
aborted transactions, for every offset, size limit and isolation level, across rolls,
transactions, a reopened partition and a compaction's segment swap."""
from __future__ import annotations

import random

import pytest

from kafkawire.records import BatchBuilder
from kafkawire.server.config import BrokerConfig
from kafkawire.server.partitions import PartitionManager

pytestmark = pytest.mark.one_backend


def _batch(rng, n, *, pid=-1, txn=False):
    b = BatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                     base_sequence=0 if pid >= 0 else -1, is_transactional=txn)
    for i in range(n):
        b.append(b"v" * rng.randrange(1, 300), key=b"k%d" % rng.randrange(5))
    return b.build()


def _through_view(part, offset, max_bytes, committed, min_one):
    tail, stale = part._tail, part._stale
    part._tail, part._stale = None, True
    try:
        return part.read(offset, max_bytes, committed=committed, min_one=min_one)
    finally:
        part._tail, part._stale = tail, stale


def _same(part):
    """Every offset, a few limits, both isolation levels: the tail path equals the view's."""
    served = 0
    for offset in range(part.log_start_offset, part.high_watermark + 1):
        for max_bytes in (0, 1, 100, 700, 5000, 1 << 20):
            for committed in (False, True):
                for min_one in (True, False):
                    got = part.read(offset, max_bytes, committed=committed, min_one=min_one)
                    want = _through_view(part, offset, max_bytes, committed, min_one)
                    key = lambda r: (None if r.records is None else
                                     (r.records.file.name, r.records.offset, r.records.size),
                                     r.high_watermark, r.last_stable_offset,
                                     r.log_start_offset, r.aborted)
                    assert key(got) == key(want), (offset, max_bytes, committed, min_one)
                    served += got.records is not None
    return served


def test_tail_reads_match_view_reads(tmp_path):
    rng = random.Random(7)
    pm = PartitionManager([str(tmp_path)], BrokerConfig())
    pm.create_topic("t", 1, {"segment.bytes": "6000"})
    part = pm.partition("t", 0)
    for _ in range(12):
        pm.append("t", 0, _batch(rng, rng.randrange(1, 6)))
    assert part._tail is not None and len(part.log_view().segments) > 1   # rolled
    assert _same(part) > 0
    # a transaction: open (the last stable offset holds), aborted, then plain batches again
    pm.append("t", 0, _batch(rng, 2, pid=5, txn=True))
    pm.append("t", 0, _batch(rng, 3))
    assert part.last_stable_offset < part.high_watermark
    _same(part)
    pm.write_marker("t", 0, "abort", producer_id=5, producer_epoch=0)
    for _ in range(3):
        pm.append("t", 0, _batch(rng, 2))
    _same(part)
    pm.close()
    # reopened: the tail starts with the first new append
    pm = PartitionManager([str(tmp_path)], BrokerConfig())
    pm.load()
    part = pm.partition("t", 0)
    assert part._tail is None
    _same(part)
    for _ in range(4):
        pm.append("t", 0, _batch(rng, 2))
    assert part._tail is not None and part._tail.first_offset > part.log_view().segments[-1].base_offset
    _same(part)
    # a tail keeping only its newest batches
    import kafkawire.server.partitions as P
    held = P._TAIL_BATCHES
    P._TAIL_BATCHES = 4
    try:
        for _ in range(7):
            pm.append("t", 0, _batch(rng, 2))
    finally:
        P._TAIL_BATCHES = held
    assert 0 < len(part._tail.lasts) <= 4
    _same(part)
    part.segments_changed(part.log_start_offset)      # what a compaction's swap calls
    assert part._tail is None
    pm.append("t", 0, _batch(rng, 1))
    assert part._tail is not None
    _same(part)
    pm.close()


def test_new_partitions_are_fsynced_off_the_callers_thread(tmp_path, monkeypatch):
    """Creating a topic writes its folders and files at once and leaves the fsyncs (each
    partition.metadata, each folder, the log dir) to a thread of their own; closing the
    manager waits for them; the topic reopens with one id."""
    import os
    import threading

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("names what was fsynced through /proc")
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append((threading.current_thread() is threading.main_thread(),
                       os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)

    pm = PartitionManager([str(tmp_path)], BrokerConfig())
    monkeypatch.setattr(os, "fsync", fsync)
    pm.create_topic("many", 20)
    pm.add_partitions("many", 25)
    pm.wait_synced(60)
    monkeypatch.setattr(os, "fsync", real)
    assert not [p for main, p in synced if main]
    paths = {p for _, p in synced}
    for i in range(25):
        folder = str(tmp_path / f"many-{i}")
        assert folder in paths and os.path.join(folder, "partition.metadata") in paths
    assert str(tmp_path) in paths
    ids = {pm.partition("many", i).topic.topic_id for i in range(25)}
    pm.close()
    pm = PartitionManager([str(tmp_path)], BrokerConfig())
    pm.load()
    assert len(pm.topics["many"].partitions) == 25 and {pm.topics["many"].topic_id} == ids
    pm.close()


def test_a_read_cut_by_its_limit_ends_with_a_whole_batch(tmp_path):
    rng = random.Random(11)
    pm = PartitionManager([str(tmp_path)], BrokerConfig())
    pm.create_topic("t", 1, {})
    part = pm.partition("t", 0)
    sizes = []
    for _ in range(20):
        data = _batch(rng, rng.randrange(1, 8))
        sizes.append(len(data))
        pm.append("t", 0, data)
    for tail in (True, False):      # the active segment's recorded positions, and the log view
        for max_bytes in (1, sizes[0], sizes[0] + 1, sum(sizes[:3]) + 5, sum(sizes) - 1):
            got = part.read(0, max_bytes) if tail else _through_view(part, 0, max_bytes,
                                                                      False, True)
            whole = 0
            for n in sizes:          # the most whole batches within the limit, at least one
                if whole + n > max_bytes and whole:
                    break
                whole += n
            assert (got.records.offset, got.records.size) == (0, whole), (tail, max_bytes)
