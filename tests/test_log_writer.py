"""LogWriter: rolls, indexes, resume, a concurrent reader, and crash safety."""
from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from kafkawire import Log, LogWriter
from kafkawire import _kernels as K
from kafkawire.compression import codec_id, compress
from kafkawire.errors import CorruptRecordError, OffsetOutOfRangeError
from kafkawire.log import files as F
from kafkawire.records import BatchBuilder

TS = 1_700_000_000_000


def test_rolls_by_size_and_keeps_indexes(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d, segment_bytes=10_000, index_interval_bytes=1000) as w:
        for i in range(200):
            w.append_records([{"value": bytes(150), "timestamp": TS + i}])
        big = w.append_records([bytes(30_000)])        # larger than a segment: alone in its own
        w.append_records([b"after"])
    segs = F.list_partition(str(d)).segments
    assert len(segs) > 5
    with Log.open(d) as log:
        sizes = [s.size for s in log.segments]
        assert all(sz <= 10_000 for sz in sizes if sz < 30_000)
        holder = next(s for s in log.segments if s.base_offset == big[0])
        assert len(holder.headers()) == 1
        for s in log.segments:
            assert s.offset_index.status == "ok" and s.time_index.status == "ok"
            assert os.path.getsize(s.files.index) % 8 == 0
        assert log.verify().ok and log.recover().clean
        assert [r.offset for r in log.records()] == list(range(202))


def test_rolls_by_time_and_full_index(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d, segment_ms=1000) as w:
        for i in range(10):
            w.append_records([{"value": b"x", "timestamp": TS + 400 * i}])
    assert len(F.list_partition(str(d)).segments) == 4      # 0-1000 ms, then every 1000 ms
    d2 = tmp_path / "u-0"
    with LogWriter(d2, index_interval_bytes=10, max_index_bytes=24) as w:
        for i in range(20):
            w.append_records([bytes(50)])
    assert len(F.list_partition(str(d2)).segments) > 2      # a full index rolls the segment


def test_preallocated_while_open_trimmed_on_close(tmp_path):
    d = tmp_path / "t-0"
    w = LogWriter(d, index_interval_bytes=100, max_index_bytes=8000)
    for i in range(50):
        w.append_records([{"value": bytes(100), "timestamp": TS + i}])
    w.flush()
    idx = d / "00000000000000000000.index"
    assert os.path.getsize(idx) == 8000
    with Log.open(d) as log:            # a reader of the active segment: zero tail is no entry
        seg = log.segments[0]
        assert seg.offset_index.status == "ok" and 0 < len(seg.offset_index) < 1000
        assert log.offset_for_timestamp(TS + 30) == 30
    w.close()
    assert os.path.getsize(idx) % 8 == 0 and os.path.getsize(idx) < 8000


def test_resume_recovers_and_continues(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d) as w:
        for i in range(10):
            w.append_records([b"a%d" % i])
    log_path = d / "00000000000000000000.log"
    size = os.path.getsize(log_path)
    with open(log_path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x01\x00partial")   # torn final write
    with LogWriter(d) as w:
        assert w.recovery.truncated_bytes == 19 and w.recovery.saved_files
        assert w.next_offset == 10
        w.append_records([b"b"])
    assert os.path.getsize(log_path) > size
    with Log.open(d) as log:
        assert [r.offset for r in log.records()] == list(range(11))
        assert log.verify().ok


def test_explicit_offsets_must_increase(tmp_path):
    from kafkawire.errors import LogError
    from kafkawire.records import BatchBuilder
    with LogWriter(tmp_path / "t-0") as w:
        b = BatchBuilder(base_offset=100)
        b.append(b"x")
        w.append_batch(b.build(), assign_offsets=False)
        assert w.next_offset == 101
        with pytest.raises(LogError):
            w.append_batch(b.build(), assign_offsets=False)
        with pytest.raises(LogError):
            w.append_batch(b"\x00" * 30)


def test_concurrent_reader_sees_consistent_prefix(tmp_path):
    d = tmp_path / "t-0"
    w = LogWriter(d, segment_bytes=20_000, index_interval_bytes=500)
    done = threading.Event()
    errors = []

    def write():
        try:
            for i in range(600):
                n = w.next_offset
                w.append_records([{"value": b"v%d" % (n + j), "timestamp": TS + n + j} for j in range(3)])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=write)
    t.start()
    log = None
    checks = 0
    while not done.is_set() or checks < 3:
        if log is None:
            log = Log.open(d)
        else:
            log.refresh()
        recs = [(r.offset, r.value) for r in log.records()]
        assert recs == [(i, b"v%d" % i) for i in range(len(recs))]
        if recs:
            assert log.offset_for_timestamp(TS + len(recs) // 2) == len(recs) // 2
        checks += 1
    t.join()
    w.close()
    log.close()
    assert not errors and checks >= 3


WRITER_SCRIPT = textwrap.dedent("""
    import sys
    from kafkawire import _kernels
    _kernels.use(sys.argv[2])
    from kafkawire import LogWriter
    w = LogWriter(sys.argv[1], segment_bytes=40000, index_interval_bytes=1000, max_index_bytes=4096)
    print("START", flush=True)
    i = 0
    while True:
        n = w.next_offset
        w.append_records([{"value": b"v%d" % (n + j) * 5, "timestamp": 1700000000000 + n + j}
                          for j in range(1 + i % 9)], compression=("none", "lz4", "gzip")[i % 3])
        i += 1
        if i % 5 == 0:
            w.flush()
            print("FLUSHED", w.next_offset, flush=True)
""")


def _backend_for(run: int) -> str:
    from kafkawire import _kernels
    return "fast" if run % 2 and _kernels.fast_available() else "pure"


def _crash_once(tmp_path, rnd, run, backend):
    d = tmp_path / f"crash{run}-0"
    script = tmp_path / "writer.py"
    script.write_text(WRITER_SCRIPT)
    import kafkawire
    # the subprocess imports the same kafkawire as this test (installed wheel or source tree)
    home = os.path.dirname(os.path.dirname(os.path.abspath(kafkawire.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([home] + sys.path))
    proc = subprocess.Popen([sys.executable, str(script), str(d), backend], stdout=subprocess.PIPE,
                            env=env)
    assert proc.stdout.readline().strip() == b"START"
    time.sleep(rnd.uniform(0.0, 0.6))
    proc.send_signal(signal.SIGKILL)
    out = proc.communicate()[0].decode()
    proc.wait()
    done = [ln.split() for ln in out.split("\n")[:-1]]    # complete lines only
    flushed = int(done[-1][1]) if done and done[-1][0] == "FLUSHED" else 0
    if rnd.random() < 0.5:
        # Also lose unflushed bytes (a power cut): cut the active segment at a random point
        # past its flushed size and maybe zero-fill a tail, as a crashed filesystem can.
        segs = F.list_partition(str(d)).segments
        last = segs[-1].log
        size = os.path.getsize(last)
        with Log.open(d) as log:
            try:
                loc = log.locate(flushed)
            except OffsetOutOfRangeError:
                loc = None
            keep = loc[1] if loc is not None and loc[0].path == last else size
        cut = rnd.randint(min(keep, size), size)
        with open(last, "r+b") as f:
            f.truncate(cut)
            if rnd.random() < 0.5:
                f.seek(cut)
                f.write(bytes(rnd.randint(1, 5000)))
    with Log.open(d) as log:
        log.recover(apply=True)
        assert log.verify().ok, str(log.verify())
        recs = [(r.offset, r.value) for r in log.records()]
    assert len(recs) >= flushed, f"run {run}: flushed {flushed}, recovered {len(recs)}"
    assert recs == [(i, b"v%d" % i * 5) for i in range(len(recs))]
    with LogWriter(d) as w:          # and appending continues where the log ends
        assert w.next_offset == len(recs)
    return flushed


@pytest.mark.one_backend
@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_crash_safety_kill_writer(tmp_path):
    rnd = random.Random(11)
    flushed = [_crash_once(tmp_path, rnd, run, _backend_for(run)) for run in range(20)]
    assert sum(flushed) > 0


@pytest.mark.slow
@pytest.mark.one_backend
@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_crash_safety_kill_writer_soak(tmp_path):
    rnd = random.Random()
    for run in range(200):
        _crash_once(tmp_path, rnd, run, _backend_for(run))


def test_explicit_roll_leaves_empty_active_segment(tmp_path):
    d = tmp_path / "t-0"
    with LogWriter(d) as w:
        w.append_records([b"a", b"b", b"c"])
        w.roll()
        assert w.next_offset == 3
        with Log.open(d) as log:
            assert [s.base_offset for s in log.segments] == [0, 3]
            assert log.next_offset == 3
            with pytest.raises(OffsetOutOfRangeError):
                log.locate(3)
    with LogWriter(d) as w:            # reopening continues in the empty segment
        assert w.next_offset == 3
        w.append_records([b"d"])
    with Log.open(d) as log:
        assert [r.value for r in log.records()] == [b"a", b"b", b"c", b"d"]
        assert log.verify().ok


# ------------------------------------------------- produced batches: one walk, every check
def _sealed(raw):
    """``raw`` with its batch length and CRC made right again."""
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">I", raw, 17, K.crc32c(bytes(raw), 21, len(raw)))
    return bytes(raw)


def _spliced(deltas, codec="none", values=None):
    """A v2 batch whose records carry ``deltas`` as offset deltas."""
    n = len(deltas)
    b = BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, key=b"k", timestamp=TS + i)
    head = bytearray(b.build()[:61])
    region = K.encode_records_v2(list(deltas), list(range(n)), [b"k"] * n,
                                 values or [b"v%d" % i for i in range(n)], [None] * n)
    cid = codec_id(codec)
    struct.pack_into(">h", head, 21, cid)
    return _sealed(head + (compress(cid, region) if cid else region))


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_produced_batch_offsets_must_be_consecutive(tmp_path, codec):
    d = tmp_path / "t-0"
    with LogWriter(d) as w:
        assert w.append_batch(_spliced([0, 1, 2], codec)) == (0, 2)
        for deltas, what in (([0, 2, 1], "not consecutive"), ([0, 1, 1], "not consecutive"),
                             ([0, 1, 5], "outside the batch's range")):
            with pytest.raises(CorruptRecordError) as ei:
                w.append_batch(_spliced(deltas, codec))
            assert what in str(ei.value) and "nothing was written" in str(ei.value)
            assert ei.value.reason == "offset" and ei.value.offset == 0
        assert w.next_offset == 3
        # copied with its offsets (not produced), records in any order inside the range
        raw = bytearray(_spliced([0, 2, 1], codec))
        struct.pack_into(">q", raw, 0, 3)
        assert w.append_batch(bytes(raw), assign_offsets=False) == (3, 5)
    with Log.open(d) as log:
        assert [r.value for r in log.records()][:3] == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_produced_batch_damaged_records_refused_with_the_append(tmp_path, codec):
    good = _spliced([0, 1, 2], codec)
    if codec == "none":
        bad = bytearray(_spliced([0, 1, 2], codec, values=[b"a", b"b", b"c"]))
        bad[-3] = 0x10                     # the last value's length: past the record's end
        bad = _sealed(bad)
    else:
        bad = _sealed(bytearray(good[:61]) + b"\x1f\x8b not gzip at all")
    d = tmp_path / "t-0"
    with LogWriter(d) as w:
        w.append_batch(good)
        with pytest.raises(CorruptRecordError) as ei:
            w.append_batches([memoryview(good), bad])
        msg = ei.value.message
        assert msg.startswith("batch at offset 0: ") and "nothing was written" in msg
        assert ei.value.position == 0
        assert w.next_offset == 3
        assert w.append_batch(memoryview(good)) == (3, 5)    # a view is written in place
    with Log.open(d) as log:
        assert [r.offset for r in log.records()] == list(range(6))
        assert log.verify().ok


def test_validate_records_consecutive_twins_agree():
    if not K.fast_available():
        pytest.skip("compiled backend not built")
    fast, pure = K._load("fast")["records"], K._load("pure")["records"]
    rnd = random.Random(5)
    for _ in range(200):
        n = rnd.randrange(1, 6)
        deltas = [i if rnd.random() < 0.7 else rnd.randrange(-2, 8) for i in range(n)]
        region = K.encode_records_v2(deltas, [0] * n, [None] * n, [b"x"] * n, [None] * n)
        for flag in (False, True):
            got = [m.validate_records_v2(region, 0, len(region), n, 10, 10 + n - 1, None, flag)
                   for m in (fast, pure)]
            assert got[0] == got[1], (deltas, flag)
            bad = [10 + d for i, d in enumerate(deltas)
                   if not 0 <= d < n or (flag and d != i)]
            assert got[0] == (bad[0] if bad else None)
