"""Index kernels (both backends) and untrusted index loading."""
from __future__ import annotations

import random
import struct

import pytest

from kafkawire import _kernels as K
from kafkawire.log.index import IndexBuilder, load_offset_index, load_time_index


def _offset_index(entries):
    return b"".join(struct.pack(">ii", r, p) for r, p in entries)


def _time_index(entries):
    return b"".join(struct.pack(">qi", t, r) for t, r in entries)


def test_offset_lookup_matches_bisect():
    rnd = random.Random(1)
    rels = sorted(rnd.sample(range(1, 10**6), 2000))
    buf = _offset_index([(r, i * 100 + 50) for i, r in enumerate(rels)])
    for _ in range(2000):
        t = rnd.randint(-5, 10**6 + 5)
        want = max((i for i, r in enumerate(rels) if r <= t), default=-1)
        assert K.offset_index_lookup(buf, len(rels), t) == want
    assert K.offset_index_lookup(b"", 0, 5) == -1
    assert K.offset_index_lookup(buf, 10**9, 10**7) == len(rels) - 1  # n clamped to the buffer


def test_time_lookup_matches_bisect():
    rnd = random.Random(2)
    ts = sorted(rnd.sample(range(10**12, 10**12 + 10**6), 1000))
    buf = _time_index([(t, i) for i, t in enumerate(ts)])
    for _ in range(1000):
        t = rnd.randint(10**12 - 5, 10**12 + 10**6 + 5)
        want = max((i for i, x in enumerate(ts) if x <= t), default=-1)
        assert K.time_index_lookup(buf, len(ts), t) == want


def test_real_entries_in_preallocated_index():
    buf = _offset_index([(5, 4100), (9, 8300), (20, 12000)]) + bytes(8 * 100)
    assert K.offset_index_real_entries(buf, len(buf) // 8) == 3
    assert K.offset_index_real_entries(bytes(800), 100) == 0
    tbuf = _time_index([(1000, 3), (1005, 9)]) + bytes(12 * 50)
    assert K.time_index_real_entries(tbuf, len(tbuf) // 12) == 2
    assert K.buffer_is_zero(buf, 24, len(buf)) and not K.buffer_is_zero(buf, 0, 24)


def test_order_checks():
    good = _offset_index([(5, 4100), (9, 8300)])
    assert K.offset_index_first_unordered(good, 2, 9000) == -1
    assert K.offset_index_first_unordered(good, 2, 8000) == 1          # position past the log
    assert K.offset_index_first_unordered(_offset_index([(5, 4100), (5, 8300)]), 2, 9000) == 1
    assert K.time_index_first_unordered(_time_index([(10, 1), (9, 2)]), 2) == 1
    assert K.time_index_first_unordered(_time_index([(10, 1), (11, 2)]), 2) == -1


def test_load_index_sanity(tmp_path):
    p = tmp_path / "00000000000000000100.index"
    p.write_bytes(_offset_index([(5, 4100), (9, 8300)]) + bytes(80))
    idx = load_offset_index(str(p), 100, 10000)
    assert idx.status == "ok" and len(idx) == 2 and idx.lookup(107) == (105, 4100)
    assert idx.lookup(100) == (100, 0) and idx.lookup(99) == (100, 0)
    p.write_bytes(_offset_index([(5, 4100), (9, 8300)]) + b"\x01")
    assert load_offset_index(str(p), 100, 10000).status == "corrupt"       # not whole entries
    p.write_bytes(_offset_index([(5, 4100), (3, 8300), (9, 9000)]))
    assert load_offset_index(str(p), 100, 10000).status == "corrupt"       # not increasing, not zeros
    p.write_bytes(_offset_index([(5, 4100), (9, 8300)]))
    assert load_offset_index(str(p), 100, 5000).status == "corrupt"        # position past the log
    assert load_offset_index(str(tmp_path / "none.index"), 100, 5000).status == "absent"
    t = tmp_path / "00000000000000000100.timeindex"
    t.write_bytes(_time_index([(1000, 5), (1010, 9)]) + bytes(24))
    tim = load_time_index(str(t), 100)
    assert tim.status == "ok" and tim.lookup(1005) == (1000, 105) and tim.lookup(10) == (-1, 100)
    assert tim.last_entry == (1010, 109)


def test_index_builder_follows_interval_rule():
    b = IndexBuilder(0, 4096)
    pos = 0
    for i in range(10):
        b.append(pos, 3000, i, 1000 + i, i)
        pos += 3000
    # no entry for the first append; then one whenever more than 4096 bytes were written since
    assert b.offset_entries[0] == (2, 6000)
    assert all(p > 0 for _, p in b.offset_entries)
    assert b.finish() == (1009, 9)


@pytest.mark.parametrize("log_append", [False, True])
def test_records_find_timestamp_matches_decoding(log_append):
    from kafkawire import iter_batches
    from kafkawire.records import BatchBuilder
    rnd = random.Random(4)
    b = BatchBuilder(base_offset=1000, timestamp_type="LogAppendTime" if log_append else "CreateTime",
                     log_append_time=5000 if log_append else None)
    off = 1000
    for i in range(200):
        b.append(rnd.randbytes(rnd.randint(0, 300)), key=b"k", timestamp=1000 + rnd.randint(-50, 500),
                 headers=[("h", b"x")] if i % 3 else (), offset=off)
        off += rnd.randint(1, 3)
    raw = b.build()
    batch = next(iter(iter_batches(raw)))
    recs = [(r.offset, r.timestamp) for r in batch]
    for _ in range(300):
        target, min_off = rnd.randint(900, 1600), rnd.randint(990, off + 2)
        want = next(((o, t) for o, t in recs if t >= target and o >= min_off), None)
        status, o, t = K.records_find_timestamp(raw, 61, len(raw), batch.record_count, batch.base_offset,
                                                batch.first_timestamp,
                                                -(1 << 63) if log_append else target, min_off)
        if log_append:
            want = next(((o2, 5000) for o2, _ in recs if o2 >= min_off), None) if 5000 >= target else want
            got = (o, 5000) if status == 0 else None
            if 5000 >= target:
                assert got == want
        else:
            assert (None if status == 1 else (o, t)) == want
    assert K.records_find_timestamp(raw, 61, len(raw) - 5, batch.record_count, 1000, 0, 1 << 62, 0)[0] == 2


def test_entries_past_the_mapped_log_are_trimmed_for_readers(tmp_path):
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(_offset_index([(5, 4100), (9, 8300), (15, 12000)]))
    assert load_offset_index(str(p), 0, 9000).status == "corrupt"        # verify's view
    idx = load_offset_index(str(p), 0, 9000, trim_past_end=True)         # a reader's view
    assert idx.status == "ok" and len(idx) == 2
