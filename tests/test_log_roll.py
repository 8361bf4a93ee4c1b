"""LogWriter rolls a segment as Kafka's ``LogSegment.shouldRoll`` does: by size, by time
(``segment.ms`` minus the segment's jitter, from the first batch's timestamp or, without
one, from the segment's creation by the writer's clock), on a full offset or time index,
and before relative offsets would overflow."""
from __future__ import annotations

import random

import pytest

from kafkawire import Log, LogWriter
from kafkawire.log import files as F
from kafkawire.records import BatchBuilder

TS = 1_700_000_000_000


def _bases(d):
    return [s.base_offset for s in F.list_partition(str(d)).segments]


def test_time_roll_is_strictly_after_segment_ms(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d, segment_ms=1000) as w:
        w.append_records([{"value": b"a", "timestamp": TS}])
        w.append_records([{"value": b"b", "timestamp": TS + 1000}])   # waited == segment.ms: stays
        w.append_records([{"value": b"c", "timestamp": TS + 1001}])   # waited > segment.ms: rolls
        w.append_records([{"value": b"d", "timestamp": TS + 500}])    # older than the new first
        w.append_records([{"value": b"e", "timestamp": TS + 2002}])
    assert _bases(d) == [0, 2, 4]


def test_time_roll_from_the_first_batch_of_a_resumed_segment(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d) as w:
        w.append_records([{"value": b"a", "timestamp": TS}])
    with LogWriter(d, segment_ms=1000) as w:
        w.append_records([{"value": b"b", "timestamp": TS + 900}])
        w.append_records([{"value": b"c", "timestamp": TS + 1001}])
    assert _bases(d) == [0, 2]


def test_jitter_shortens_each_segments_time(tmp_path):
    seed, segment_ms, jitter_ms = 7, 1000, 400
    draws = random.Random(seed)
    d = tmp_path / "t-0"
    expected, ts, base, first_ts = [0], TS, 0, TS
    jitter = draws.randrange(jitter_ms)
    with LogWriter(d, segment_ms=segment_ms, segment_jitter_ms=jitter_ms,
                   rng=random.Random(seed)) as w:
        for i in range(60):
            ts = TS + 50 * i
            if i and ts - first_ts > segment_ms - jitter:
                expected.append(i)
                first_ts, jitter = ts, draws.randrange(jitter_ms)
            w.append_records([{"value": b"x", "timestamp": ts}])
    assert _bases(d) == expected
    assert len(expected) > 3


def test_jitter_is_below_segment_ms(tmp_path):
    with LogWriter(tmp_path / "t-0", segment_ms=10, segment_jitter_ms=10**9) as w:
        assert 0 <= w._seg.roll_jitter_ms < 10


def test_batches_without_timestamps_roll_by_the_clock(tmp_path):
    now = [5_000]
    d = tmp_path / "t-0"
    with LogWriter(d, segment_ms=1000, clock=lambda: now[0]) as w:
        w.append_records([b"a"], magic=0)            # no timestamps: the segment's age counts
        now[0] += 1000
        w.append_records([b"b"], magic=0)
        now[0] += 1
        w.append_records([b"c"], magic=0)            # created 1001 ms ago: rolls
        now[0] += 999
        w.append_records([b"d"], magic=0)
    assert _bases(d) == [0, 2]


def test_a_first_batch_without_timestamp_keeps_the_clock_rule(tmp_path):
    # Kafka takes the first batch's max timestamp once; when it has none the segment's
    # creation time rules, whatever later batches carry.
    now = [0]
    d = tmp_path / "t-0"
    with LogWriter(d, segment_ms=1000, clock=lambda: now[0]) as w:
        w.append_records([b"a"], magic=0)
        w.append_records([{"value": b"b", "timestamp": TS}])
        w.append_records([{"value": b"c", "timestamp": TS + 5000}])   # timestamps ignored
        now[0] = 1001
        w.append_records([{"value": b"d", "timestamp": TS + 5000}])
    assert _bases(d) == [0, 3]


def test_full_time_index_rolls(tmp_path):
    # 36 index bytes: 4 offset entries, 3 time entries; every append after a segment's first
    # adds an entry to each, so rising timestamps fill the time index first.
    d = tmp_path / "t-0"
    with LogWriter(d, index_interval_bytes=1, max_index_bytes=36) as w:
        for i in range(9):
            w.append_records([{"value": bytes(20), "timestamp": TS + i}])
    assert _bases(d) == [0, 4, 8]
    with Log.open(d) as log:
        for s in log.segments:
            assert len(s.time_index) <= 3 and s.offset_index.status == "ok"
        assert [r.offset for r in log.records()] == list(range(9))


def test_full_offset_index_rolls(tmp_path):
    # Equal timestamps add one time entry per segment: the offset index (4 entries) fills first.
    d = tmp_path / "t-0"
    with LogWriter(d, index_interval_bytes=1, max_index_bytes=36) as w:
        for i in range(9):
            w.append_records([{"value": bytes(20), "timestamp": TS}])
    assert _bases(d) == [0, 5]


def _batch(base, count=1):
    b = BatchBuilder(2, "none", base_offset=base)
    for i in range(count):
        b.append(b"v%d" % i, timestamp=TS)
    return b.build()


def test_relative_offset_overflow_rolls(tmp_path):
    d = tmp_path / "t-0"
    limit = 2**31 - 1
    with LogWriter(d) as w:
        w.append_batch(_batch(0), assign_offsets=False)
        w.append_batch(_batch(limit), assign_offsets=False)          # relative offset == Int max: fits
        w.append_batch(_batch(limit + 1, 2), assign_offsets=False)   # would overflow: new segment
    assert _bases(d) == [0, limit + 1]
    with Log.open(d) as log:
        assert [r.offset for r in log.records()] == [0, limit, limit + 1, limit + 2]
        assert log.verify().ok


@pytest.mark.parametrize("kwargs", [{"segment_ms": 0}, {"segment_jitter_ms": -1}])
def test_bad_roll_settings(tmp_path, kwargs):
    with pytest.raises(ValueError):
        LogWriter(tmp_path / "t-0", **kwargs)
