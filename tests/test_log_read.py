"""Reading logs built with kafkawire's own builders: compaction gaps and empty batches, mixed
magic, transactions (read_committed, open transactions), LogDir, leftovers."""
from __future__ import annotations

import os

import pytest

from kafkawire import Log, LogDir, LogWriter, Segment
from kafkawire.errors import LogError, OffsetOutOfRangeError
from kafkawire.records import BatchBuilder

TS = 1_700_000_000_000


def _batch(offsets, magic=2, codec="none", ts=TS, last_offset=None, **kw):
    b = BatchBuilder(magic, codec, base_offset=offsets[0] if offsets else (last_offset or 0), **kw)
    for o in offsets:
        b.append(b"v%d" % o, key=b"k%d" % o, timestamp=ts + o, offset=o)
    return b.build(last_offset=last_offset) if magic == 2 else b.build()


def test_compacted_log_with_gaps_and_empty_batches(tmp_path):
    d = tmp_path / "compacted-0"
    with LogWriter(d, segment_bytes=400) as w:
        w.append_batch(_batch([0, 3, 4], last_offset=9), assign_offsets=False)   # gap inside, last past records
        w.append_batch(_batch([], last_offset=14, ts=TS), assign_offsets=False)  # empty batch left by cleaning
        w.append_batch(_batch([20, 22]), assign_offsets=False)                   # gap between batches
        w.append_batch(_batch([23, 30], magic=1), assign_offsets=False)
        w.append_batch(_batch([31, 35], magic=1, codec="gzip"), assign_offsets=False)
    with Log.open(d) as log:
        assert [r.offset for r in log.records()] == [0, 3, 4, 20, 22, 23, 30, 31, 35]
        assert [r.offset for r in log.records(start_offset=5, end_offset=31)] == [20, 22, 23, 30]
        assert log.locate(5)[1] == 0 or log.locate(5) is not None
        seg, pos = log.locate(12)           # inside the empty batch
        assert seg.batch_at(pos).record_count == 0
        seg, pos = log.locate(16)           # in the gap: the next batch
        assert seg.batch_at(pos).base_offset == 20
        with pytest.raises(OffsetOutOfRangeError, match=r"past the end .* offsets 0\.\.35"):
            log.locate(36)
        assert log.next_offset == 36
        assert log.offset_for_timestamp(TS + 21) == 22
        assert log.offset_for_timestamp(TS + 36) is None
        assert log.verify(deep=True).ok


def test_mixed_magic_log(tmp_path):
    d = tmp_path / "grown-0"
    with LogWriter(d, segment_bytes=300) as w:
        for magic in (0, 0, 1, 1, 2, 2):
            b = BatchBuilder(magic, "gzip" if magic == 1 else "none")
            for i in range(5):
                b.append(b"x" * 20, timestamp=-1 if magic == 0 else TS + w.next_offset + i)
            w.append_batch(b.build())
    with Log.open(d) as log:
        recs = list(log.records())
        assert [r.offset for r in recs] == list(range(30))
        assert {s.batch_at(0).magic for s in log.segments} == {0, 1, 2}
        assert log.offset_for_timestamp(0) == 10     # magic 0 has no timestamps
        assert log.offset_for_timestamp(TS + 27) == 27
        assert log.verify().ok


def _txn_log(d):
    with LogWriter(d, segment_bytes=600) as w:
        def txn(pid, n):
            b = BatchBuilder(producer_id=pid, producer_epoch=1, base_sequence=0, is_transactional=True)
            for i in range(n):
                b.append(b"p%d" % pid, timestamp=TS)
            return w.append_batch(b.build())
        w.append_records([b"plain"] * 2)                 # 0-1
        txn(7, 3)                                        # 2-4  aborted
        txn(8, 2)                                        # 5-6  committed
        w.append_control("abort", producer_id=7, producer_epoch=1)    # 7
        txn(7, 2)                                        # 8-9  committed
        w.append_control("commit", producer_id=8, producer_epoch=1)   # 10
        w.append_control("commit", producer_id=7, producer_epoch=1)   # 11
        w.append_records([b"plain"])                     # 12
        txn(9, 2)                                        # 13-14 still open
        w.append_records([b"plain"])                     # 15
    return d


def test_read_committed(tmp_path):
    d = _txn_log(tmp_path / "txn-0")
    with Log.open(d) as log:
        assert [r.offset for r in log.records()] == [0, 1, 2, 3, 4, 5, 6, 8, 9, 12, 13, 14, 15]
        assert [r.offset for r in log.records(include_control=True)] == list(range(16))
        # aborted 2-4 left out, open transaction at 13 ends the committed view (last stable offset)
        assert [r.offset for r in log.records(isolation="read_committed")] == [0, 1, 5, 6, 8, 9, 12]
        assert [r.offset for r in log.records(start_offset=3, end_offset=9, isolation="read_committed")] == [5, 6, 8]
        ranges = log.aborted_transactions()
        assert ranges.last_stable_offset == 13
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in ranges] == [(7, 2, 7)]
        # the writer recorded the abort in .txnindex
        assert [(t.producer_id, t.first_offset, t.last_offset)
                for s in log.segments for t in s.aborted_transactions()] == [(7, 2, 7)]
        with pytest.raises(ValueError):
            list(log.records(isolation="serializable"))


def test_logdir_many_partitions_and_leftovers(tmp_path):
    root1, root2 = tmp_path / "d1", tmp_path / "d2"
    for root, topic, parts in ((root1, "orders", 2), (root2, "events", 1), (root2, "orders-x", 1)):
        for p in range(parts):
            with LogWriter(root / f"{topic}-{p}") as w:
                w.append_records([b"%s-%d" % (topic.encode(), p)] * 3)
    (root1 / "cleaner-offset-checkpoint").write_text("0\n0\n")
    os.makedirs(root1 / "orders-0.abcdef-delete")
    open(root1 / "orders-0" / "00000000000000000000.log.deleted", "wb").write(b"junk")
    open(root1 / "orders-0" / "00000000000000000003.log.swap", "wb").write(b"junk")
    open(root1 / "orders-0" / "00000000000000000003.index.cleaned", "wb").write(b"junk")
    with LogDir.open([root1, root2]) as ld:
        assert ld.partitions() == [("events", 0), ("orders", 0), ("orders", 1), ("orders-x", 0)]
        assert ld.topics == ["events", "orders", "orders-x"]
        assert ld["orders", 1].topic == "orders" and ld.log("orders", 1).partition == 1
        got = [(t, p, r.value) for t, p, r in ld.records(topics="orders")]
        assert got == [("orders", 0, b"orders-0")] * 3 + [("orders", 1, b"orders-1")] * 3
        assert len(ld) == 4 and len(list(ld)) == 4
        # Readers ignore leftovers; verify names the .swap (an interrupted swap) only.
        assert [p.kind for p in ld.verify().problems] == ["interrupted swap"]
        assert ld.offsets_for_timestamp(0) == {k: 0 for k in ld.partitions()}
        log = ld["orders", 0]
        assert len(log.files.leftovers) == 3 and len(log.segments) == 1
        with pytest.raises(LogError):
            ld.log("nope", 0)
    with LogDir.open(str(root1 / "orders-1")) as one:      # a partition folder itself
        assert one.partitions() == [("orders", 1)]


def test_segment_open_and_errors(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d) as w:
        w.append_records([b"a", b"b"])
    seg = Segment.open(str(d / "00000000000000000000.index"))
    assert seg.base_offset == 0 and seg.next_offset == 2
    assert [r.value for b in seg.batches() for r in b] == [b"a", b"b"]
    seg.close()
    with pytest.raises(LogError):
        Segment.open(str(d / "nonsense.log"))
    with pytest.raises(LogError):
        Log.open(tmp_path / "missing")


def test_timestamp_ranges(tmp_path):
    d = tmp_path / "ts-0"
    with LogWriter(d, segment_bytes=500) as w:
        for i in range(40):
            w.append_records([{"value": b"x", "timestamp": TS + 10 * i}])
    with Log.open(d) as log:
        assert [r.offset for r in log.records(start_timestamp=TS + 95, end_timestamp=TS + 200)] == list(range(10, 20))
        assert list(log.records(start_timestamp=TS + 10**6)) == []
        assert log.find_timestamp(TS + 391) is None
        assert log.find_timestamp(TS + 390) == (39, TS + 390)


def test_column_chunks_match_records(tmp_path):
    d = tmp_path / "cols-0"
    with LogWriter(d, segment_bytes=3000) as w:
        for i in range(60):
            w.append_records([{"value": b"v%d" % (w.next_offset + j), "key": b"k",
                               "timestamp": TS + w.next_offset + j} for j in range(4)],
                             compression=("none", "gzip")[i % 2])
    with Log.open(d) as log:
        assert len(log.segments) >= 3
        offs = [int(o) for c in log.column_chunks(start_offset=17, end_offset=201) for o in c.offset]
        assert offs == list(range(17, 201)) == [r.offset for r in log.records(start_offset=17, end_offset=201)]
        total = sum(len(c) for c in log.column_chunks())
        assert total == 240


def test_partition_metadata_files(tmp_path):
    import struct
    from kafkawire import _kernels as K
    from kafkawire.errors import IndexCorruptError
    from kafkawire.log import files as F
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 1500\n")
    (d / "partition.metadata").write_text("version: 0\ntopic_id: Yp5ydw0pSJ2nJ3sxjbNLdA\n")
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 42, 3, 99, 1234, 4, TS, 7, -1)
    snap = struct.pack(">h", 1) + struct.pack(">I", K.crc32c(body)) + body
    (d / "00000000000000001235.snapshot").write_bytes(snap)
    listing = F.list_partition(str(d))
    assert F.read_leader_epoch_checkpoint(listing.leader_epoch_checkpoint) == [(0, 0), (3, 1500)]
    assert F.read_partition_metadata(listing.partition_metadata)["topic_id"] == "Yp5ydw0pSJ2nJ3sxjbNLdA"
    [entry] = F.read_producer_snapshot(listing.snapshots[1235])
    assert (entry.producer_id, entry.producer_epoch, entry.last_offset, entry.current_txn_first_offset) == (42, 3, 1234, -1)
    with pytest.raises(IndexCorruptError):
        F.parse_producer_snapshot(snap[:-1] + b"\x01")


def test_recover_drops_txnindex_entries_past_the_cut(tmp_path):
    d = _txn_log(tmp_path / "txn-0")
    with Log.open(d) as log:
        seg, pos = log.locate(7)             # the abort marker
        seg_path, cut = seg.path, pos + 10
        later = [s.path for s in log.segments if s.base_offset > seg.base_offset]
    with open(seg_path, "r+b") as f:
        f.truncate(cut)                       # the marker is cut mid-write
    with Log.open(d) as log:
        rep = log.recover(apply=True)
        assert rep.removed_segments == later
        assert log.next_offset == 7
        assert [t for s in log.segments for t in s.aborted_transactions()] == []
        assert log.verify().ok
        # the transaction now has no marker: read_committed stops before it
        assert [r.offset for r in log.records(isolation="read_committed")] == [0, 1]


def test_pre_0_11_index_entries_name_the_first_offset(tmp_path):
    """Brokers before 0.11 indexed an append's first offset; inside a compressed wrapper."""
    import struct
    d = tmp_path / "old-0"
    positions = []
    with LogWriter(d, index_interval_bytes=10**9) as w:     # no entries: written below
        for i in range(6):
            b = BatchBuilder(1, "gzip")
            for j in range(10):
                b.append(b"x" * 50, timestamp=TS + 10 * i + j)
            positions.append((w.next_offset, w._seg.size))
            w.append_batch(b.build())
    entries = [(first, pos) for first, pos in positions[1:]]
    with open(d / "00000000000000000000.index", "wb") as f:
        f.write(b"".join(struct.pack(">ii", o, p) for o, p in entries))
    with Log.open(d) as log:
        assert log.segments[0].offset_index.status == "ok"
        for target in range(60):
            seg, pos = log.locate(target)
            assert pos == positions[target // 10][1]
        assert log.segments[0].offset_index.status == "ok"   # not judged stale
        assert log.verify().ok
