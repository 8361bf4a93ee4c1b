"""``LogWriter.append_segments``: another folder's segments moved to the end of a log, re-based.

Kafka's own reader (FileRecords + ensureValid, index checks, offset lookups through the
index) accepts the result; a folder it must not take is refused with nothing moved."""
from __future__ import annotations

import os

import pytest

from kafkawire.errors import CorruptRecordError, LogError
from kafkawire.log import Log, LogWriter
from kafkawire.records import BatchBuilder

HELPER = "LogFolderHelper"


def _fill(path, first, batches, per=20, **kw):
    with LogWriter(path, segment_bytes=kw.pop("segment_bytes", 4096), index_interval_bytes=512,
                   **kw) as w:
        for b in range(batches):
            bb = BatchBuilder(2, "lz4" if b % 2 else "none")
            for i in range(per):
                bb.append(b"value %d-%d " % (first, b * per + i) * 3, key=b"k%d" % i,
                          timestamp=1_700_000_000_000 + first * 1000 + b * per + i)
            w.append_batch(bb.build())


def _values(path):
    with Log.open(path) as log:
        assert log.verify().ok
        recs = list(log.records())
    assert [r.offset for r in recs] == list(range(len(recs)))
    return [r.value for r in recs]


def test_segments_move_in_after_the_log_and_kafka_reads_them(tmp_path, java_runner):
    target, a, b = (str(tmp_path / n) for n in ("t-0", "a", "b"))
    _fill(target, 0, 5)                 # the target's active segment has data
    _fill(a, 1, 12)                     # several segments
    _fill(b, 2, 3)
    want = _values(target) + _values(a) + _values(b)
    with LogWriter(target, segment_bytes=4096, index_interval_bytes=512) as w:
        assert w.append_segments(a) == (100, 339)
        w.append_records([b"between"])     # into a new active segment
        assert w.append_segments(b) == (341, 400)
        w.append_records([b"after"])
    want[340:340] = [b"between"]
    want.append(b"after")
    assert _values(target) == want
    assert not [n for n in os.listdir(a) if n.endswith((".log", ".index", ".timeindex"))]
    r = java_runner.run(HELPER, "read", target)
    assert r.stdout.decode().rstrip().endswith("OK"), r
    targets = [0, 99, 100, 101, 250, 339, 340, 341, 400, 401]
    r = java_runner.run(HELPER, "offsetlookup", target, *map(str, targets))
    found = [line.split() for line in r.stdout.decode().splitlines() if line.startswith("O ")]
    assert [int(f[1]) for f in found] == targets and all(f[2] != "-1" for f in found)
    with Log.open(target) as log:          # kafkawire's index lookups agree
        for t in targets:
            assert next(iter(log.records(start_offset=t))).offset == t


def test_an_empty_log_takes_the_segments_at_its_next_offset(tmp_path):
    target, a = str(tmp_path / "t-0"), str(tmp_path / "a")
    _fill(a, 1, 4)
    want = _values(a)
    with LogWriter(target, start_offset=0) as w:
        assert w.append_segments(a) == (0, 79)
        assert w.next_offset == 80
    assert _values(target) == want


def test_a_corrupt_segment_is_refused_and_nothing_moves(tmp_path):
    target, a = str(tmp_path / "t-0"), str(tmp_path / "a")
    _fill(target, 0, 2)
    _fill(a, 1, 12)
    logs = sorted(n for n in os.listdir(a) if n.endswith(".log"))
    with open(os.path.join(a, logs[-1]), "r+b") as f:     # the last segment's first batch
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 1]))
    before = sorted(os.listdir(a))
    with LogWriter(target) as w:
        with pytest.raises(CorruptRecordError, match="CRC_MISMATCH"):
            w.append_segments(a)
        assert w.next_offset == 40
    assert sorted(os.listdir(a)) == before
    assert len(_values(target)) == 40


def test_transactional_batches_are_not_moved(tmp_path):
    target, a = str(tmp_path / "t-0"), str(tmp_path / "a")
    with LogWriter(a) as w:
        bb = BatchBuilder(2, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        bb.append(b"x")
        w.append_batch(bb.build())
    with LogWriter(target) as w:
        with pytest.raises(LogError, match="v2 data batches"):
            w.append_segments(a)
        w.append_records([b"still writable"])
    assert _values(target) == [b"still writable"]
