"""Hostile files and unsafe operations on a log folder: bounded reads, refusals, locks, repair."""
from __future__ import annotations

import os
import signal

import pytest

from kafkawire import Log, LogWriter
from kafkawire.cli import main

TS = 1_700_000_000_000


@pytest.fixture(autouse=True)
def _deadline():
    """Every test here must finish: a hang (a FIFO read) fails instead of blocking the suite."""
    def boom(*_):
        raise TimeoutError("test hung")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def write(folder, n_batches=40, per_batch=20, **kw):
    kw.setdefault("segment_bytes", 16 * 1024)
    kw.setdefault("index_interval_bytes", 1024)
    with LogWriter(folder, **kw) as w:
        for b in range(n_batches):
            w.append_records([{"key": b"k%d" % i, "value": b"v" * 50,
                               "timestamp": TS + b * 100 + i} for i in range(per_batch)])
    return str(folder)


def logs(folder):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".log"))


def run(capsys, *argv):
    code = main(list(argv) + (["--no-progress"] if argv[0] in ("verify", "stats", "recover", "dump")
                              else []))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ hostile index files

@pytest.fixture
def hostile(tmp_path):
    """A partition whose first segment has a sparse 40 GB ``.index`` and a ``.timeindex``
    symlinked to /dev/zero, and whose second has a FIFO named ``.index``."""
    d = write(tmp_path / "t-0")
    first, second = (p[:-4] for p in logs(d)[:2])
    os.truncate(first + ".index", 40 << 30)
    os.remove(first + ".timeindex")
    os.symlink("/dev/zero", first + ".timeindex")
    os.remove(second + ".index")
    os.mkfifo(second + ".index")
    return d, first, second


def test_hostile_indexes_log_reads_bounded(hostile):
    d, first, second = hostile
    with Log.open(d) as log:
        for off in (0, 100, 300, 799):
            seg, pos = log.locate(off)
            assert seg.batch_at(pos).last_offset >= off
        assert [r.offset for r in log.records(start_offset=250, end_offset=270)] == list(range(250, 270))
        assert log.offset_for_timestamp(TS + 100) == 20
        seg0 = log.segments[0]
        assert seg0.disk_offset_index.status == "corrupt"
        assert "40" in seg0.disk_offset_index.problem or "larger" in seg0.disk_offset_index.problem
        assert seg0.disk_time_index.status == "corrupt"
        assert "not a regular file" in seg0.disk_time_index.problem
        assert log.segments[1].disk_offset_index.status == "corrupt"
        assert "FIFO" in log.segments[1].disk_offset_index.problem
        report = log.verify()
        assert not report.ok
        kinds = {(os.path.basename(p.segment), p.kind) for p in report.problems}
        assert (os.path.basename(first) + ".index", "index") in kinds
        assert (os.path.basename(first) + ".timeindex", "timeindex") in kinds
        assert (os.path.basename(second) + ".index", "index") in kinds


def test_hostile_indexes_cli_one_line(capsys, hostile):
    d, first, second = hostile
    code, out, err = run(capsys, "verify", d)
    assert code == 1 and "Traceback" not in err
    assert "larger than any index" in out and "character device" in out and "FIFO" in out
    for path in (first + ".index", first + ".timeindex", second + ".index"):
        code, out, err = run(capsys, "dump", "--files", path)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 1 and len(lines) == 1 and path in lines[0], err
        assert lines[0].count(path) == 1
    code, out, err = run(capsys, "find", d, "--offset", "300")
    assert code == 0 and "offset: 300" in out


def test_preallocated_index_of_small_segment_reads_little(tmp_path, monkeypatch):
    """A 10 MiB preallocated index of a small active segment is trusted after reading only
    what the segment could index."""
    d = write(tmp_path / "t-0", n_batches=3, segment_bytes=1 << 20)
    stem = logs(d)[0][:-4]
    real = os.path.getsize(stem + ".index")
    os.truncate(stem + ".index", 10 << 20)
    from kafkawire.log import storage as S
    sizes = []
    orig = S.LocalStorage.read_bounded

    def spy(self, path, limit=None):
        data, size = orig(self, path, limit)
        sizes.append(len(data))
        return data, size
    monkeypatch.setattr(S.LocalStorage, "read_bounded", spy)
    with Log.open(d) as log:
        seg = log.segments[0]
        assert seg.disk_offset_index.status == "ok"
        assert seg.disk_offset_index.entries == real // 8
        assert log.verify().ok
    assert max(sizes) < 64 * 1024


def test_hostile_txnindex_and_log_fifo(capsys, tmp_path):
    d = write(tmp_path / "t-0")
    first = logs(d)[0][:-4]
    with open(first + ".txnindex", "wb") as f:
        f.truncate(40 << 30)
    with Log.open(d) as log:
        with pytest.raises(Exception) as exc:
            log.segments[0].aborted_transactions()
        assert type(exc.value).__name__ == "IndexCorruptError"
    code, out, err = run(capsys, "dump", "--files", first + ".txnindex")
    assert code == 1 and "Traceback" not in err
    os.remove(first + ".txnindex")
    fifo = os.path.join(d, "00000000000009999999.log")
    os.mkfifo(fifo)
    code, out, err = run(capsys, "verify", d)
    assert code == 1 and "FIFO" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ appending

import struct  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

from kafkawire import _kernels as K  # noqa: E402
from kafkawire.errors import (CorruptRecordError, IndexCorruptError, LogInUseError,  # noqa: E402
                              LogLockedError)
from kafkawire.records import BatchBuilder  # noqa: E402


def _batch(n=3, **kw):
    b = BatchBuilder(**kw)
    for i in range(n):
        b.append(b"value-%d" % i, key=b"k", timestamp=TS + i)
    return bytearray(b.build())


def _fix_crc(raw):
    struct.pack_into(">I", raw, 17, K.crc32c(bytes(raw), 21, len(raw)))
    return bytes(raw)


def _folder_state(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))
            if not n.startswith(".")}


@pytest.mark.parametrize("damage", ["flip", "count", "lastdelta", "attributes", "codec"])
def test_append_batch_validates_like_log_validator(tmp_path, damage):
    d = str(tmp_path / "t-0")
    with LogWriter(d) as w:
        w.append_batch(bytes(_batch()))
        before = (w.next_offset, _folder_state(d))
        raw = _batch()
        if damage == "flip":
            raw[len(raw) - 3] ^= 0x01
            bad = bytes(raw)
        elif damage == "count":
            struct.pack_into(">i", raw, 57, 2)
            bad = _fix_crc(raw)
        elif damage == "lastdelta":
            struct.pack_into(">i", raw, 23, 7)
            bad = _fix_crc(raw)
        elif damage == "attributes":
            struct.pack_into(">h", raw, 21, 0x0100)
            bad = _fix_crc(raw)
        else:
            struct.pack_into(">h", raw, 21, 0x0007)
            bad = _fix_crc(raw)
        with pytest.raises(CorruptRecordError) as exc:
            w.append_batches([bytes(_batch()), bad])
        assert "nothing was written" in str(exc.value)
        assert (w.next_offset, _folder_state(d)) == before
        assert w.append_batch(bytes(_batch())) == (3, 5)
    with Log.open(d) as log:
        assert log.verify().ok
        assert [r.offset for r in log.records()] == list(range(6))


def test_append_keeps_compacted_batches_with_their_offsets(tmp_path):
    d = str(tmp_path / "t-0")
    raw = _batch(3)
    struct.pack_into(">i", raw, 23, 9)          # offsets 0..9, three records left by compaction
    with LogWriter(d) as w:
        w.append_batch(_fix_crc(raw), assign_offsets=False)
        with pytest.raises(CorruptRecordError):
            w.append_batch(_fix_crc(raw))           # as a produce request, it is refused
        assert w.next_offset == 10


# ------------------------------------------------------------------ the folder lock

def test_second_writer_and_recovery_refused_at_once(capsys, tmp_path):
    d = write(tmp_path / "t-0", n_batches=3)
    w = LogWriter(d)
    try:
        with pytest.raises(LogLockedError) as exc:
            LogWriter(d)
        assert d in str(exc.value)
        with Log.open(d) as log:
            with pytest.raises(LogLockedError):
                log.recover(apply=True)
            assert log.recover().clean            # a dry run takes no lock
        code, out, err = run(capsys, "recover", d, "--apply")
        assert code == 1 and d in err and "locked" in err and len(err.strip().splitlines()) == 1
    finally:
        w.close()
    with LogWriter(d) as w2:
        w2.append_records([b"after"])


def test_running_broker_lock_on_log_dirs_refuses(tmp_path):
    root = tmp_path / "data"
    d = write(root / "t-0", n_batches=2)
    lock = root / ".lock"
    lock.write_bytes(b"")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, sys, time
        f = open({str(lock)!r}, "r+")
        fcntl.lockf(f, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"locked"
        with pytest.raises(LogLockedError) as exc:
            LogWriter(d)
        assert str(root) in str(exc.value) and "broker" in str(exc.value)
    finally:
        holder.kill()
        holder.wait()
    with LogWriter(d):
        pass


# ------------------------------------------------------------------ recovering

def _flip(path, pos):
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x55]))


def test_recover_reports_everything_it_removes(capsys, tmp_path):
    d = write(tmp_path / "t-0")
    first = logs(d)[0]
    with Log.open(d) as log:
        total = sum(1 for _ in log.records())
        seg0_batches = log.segments[0].headers()
        later = [s.path for s in log.segments[1:]]
    mid = int(seg0_batches[len(seg0_batches) // 2, 0]) + 70
    _flip(first, mid)
    with Log.open(d) as log:
        plan = log.recover()
    cut_from = int(seg0_batches[len(seg0_batches) // 2, 2])
    assert plan.removed[0].path == first and plan.removed[0].first_offset == cut_from
    assert [r.path for r in plan.removed[1:]] == later
    assert plan.removed_offsets == [(cut_from, total - 1)]
    assert plan.kept_records == cut_from and plan.removed_records == total - cut_from
    assert plan.removed_bytes == sum(r.bytes for r in plan.removed) > plan.truncated_bytes
    text = str(plan)
    assert f"offsets {cut_from}..{total - 1}" in text and f"{plan.removed_records} records" in text
    assert "%" in text
    code, out, err = run(capsys, "recover", d)
    assert code == 1 and f"offsets {cut_from}..{total - 1}" in out
    for p in later:
        assert p in out
    code, out, err = run(capsys, "recover", d, "--apply")
    assert code == 0, out + err                    # repaired: success, `recover --apply && ...`
    assert "removed:" in out and f"offsets {cut_from}..{total - 1}" in out
    code, out, err = run(capsys, "verify", d)
    assert code == 0, out
    with Log.open(d) as log:
        assert log.next_offset == cut_from
        assert sum(1 for _ in log.records()) == cut_from


def test_recover_refuses_under_a_live_map(tmp_path):
    d = write(tmp_path / "t-0")
    _flip(logs(d)[1], 200)
    with Log.open(d) as log:
        it = log.records()
        first = next(it)
        state = _folder_state(d)
        with pytest.raises(LogInUseError):
            log.recover(apply=True)
        assert _folder_state(d) == state             # nothing changed
        assert first.offset == 0
        n = 1
        try:
            for _ in it:
                n += 1
        except CorruptRecordError:
            pass
        assert n > 1
        del it, first
        rep = log.recover(apply=True)
        assert rep.applied and rep.saved_files
        assert log.verify().ok


def _txn_log(folder):
    """Segment 0: committed txn, aborted txn of producer 7, then plain records; rolls."""
    with LogWriter(folder, segment_bytes=4096, index_interval_bytes=256) as w:
        w.append_records([b"c1", b"c2"], producer_id=5, producer_epoch=0, is_transactional=True)
        w.append_control("commit", producer_id=5, producer_epoch=0)
        w.append_records([b"a1", b"a2"], producer_id=7, producer_epoch=0, is_transactional=True)
        w.append_control("abort", producer_id=7, producer_epoch=0)
        for i in range(60):
            w.append_records([{"value": b"p" * 80, "timestamp": TS + i}])
    return str(folder)


def test_damaged_txnindex_rebuilt_by_a_whole_recovery(capsys, tmp_path):
    d = _txn_log(tmp_path / "t-0")
    with Log.open(d) as log:
        want = [r.value for r in log.records(isolation="read_committed")]
        assert b"a1" not in want and b"c1" in want
        txn_path = log.segments[0].files.txnindex
        assert txn_path and len(log.segments) >= 3
    with open(txn_path, "ab") as f:
        f.write(b"\x07" * 5)
    _flip(logs(d)[1], 100)
    code, out, err = run(capsys, "verify", d)
    assert code == 1 and "txnindex" in out and txn_path in out
    with Log.open(d) as log:
        rep = log.recover(apply=True)
        assert rep.segments[0].txnindex_rebuilt and rep.removed_segments
        assert log.verify().ok
        got = [r.value for r in log.records(isolation="read_committed")]
        assert b"a1" not in got and got == want[:len(got)]
        assert [(t.producer_id, t.first_offset) for t in log.segments[0].aborted_transactions()] == [(7, 3)]
    code, out, err = run(capsys, "recover", d)
    assert code == 0, out


def test_cut_files_never_replaced(tmp_path, monkeypatch):
    import time as _time
    monkeypatch.setattr(_time, "strftime", lambda *a: "20260101T000000")
    d = write(tmp_path / "t-0", n_batches=3, segment_bytes=1 << 20)
    seg = logs(d)[0]
    saved = []
    for garbage in (b"\x01" * 40, b"\x02" * 50):
        with open(seg, "ab") as f:
            f.write(garbage)
        with Log.open(d) as log:
            saved += log.recover(apply=True).saved_files
    assert len(saved) == 2 and saved[0] != saved[1]
    assert open(saved[0], "rb").read() == b"\x01" * 40
    assert open(saved[1], "rb").read() == b"\x02" * 50


def test_recover_trims_preallocated_indexes(capsys, tmp_path):
    d = write(tmp_path / "t-0", n_batches=10, segment_bytes=1 << 20)
    stem = logs(d)[0][:-4]
    sizes = (os.path.getsize(stem + ".index"), os.path.getsize(stem + ".timeindex"))
    assert sizes[0] > 0
    for suffix, width in ((".index", 8), (".timeindex", 12)):   # as a crashed broker leaves them
        os.truncate(stem + suffix, (10 << 20) // width * width)
    with Log.open(d) as log:
        assert log.verify().ok
        plan = log.recover()
        assert plan.clean and len(plan.segments[0].indexes_trimmed) == 2
    code, out, err = run(capsys, "recover", d, "--apply")
    assert code == 0 and "trim" in out
    assert (os.path.getsize(stem + ".index"), os.path.getsize(stem + ".timeindex")) == sizes


def test_reopened_writer_remembers_open_transactions(tmp_path):
    d = str(tmp_path / "t-0")
    with LogWriter(d) as w:
        w.append_records([b"x"])
        w.append_records([b"a1", b"a2"], producer_id=7, producer_epoch=0, is_transactional=True)
    with LogWriter(d) as w:
        w.append_records([b"a3"], producer_id=7, producer_epoch=0, is_transactional=True)
        w.append_control("abort", producer_id=7, producer_epoch=0)
        w.append_records([b"y"])
    with Log.open(d) as log:
        txns = [(t.producer_id, t.first_offset, t.last_offset)
                for s in log.segments for t in s.aborted_transactions()]
        assert txns == [(7, 1, 4)]
        assert [r.value for r in log.records(isolation="read_committed")] == [b"x", b"y"]


# ------------------------------------------------------------------ command line consistency

from kafkawire.errors import OffsetOutOfRangeError, PathError  # noqa: E402


@pytest.fixture
def tails(tmp_path):
    """One segment with a batch cut short at the end, one with a zero-filled tail."""
    good = write(tmp_path / "good-0", segment_bytes=1 << 20)
    seg = logs(good)[0]
    size = os.path.getsize(seg)
    out = {}
    for name in ("trunc-0", "zero-0"):
        import shutil
        d = str(tmp_path / name)
        shutil.copytree(good, d)
        out[name] = d
    os.truncate(os.path.join(out["trunc-0"], os.path.basename(seg)), size - 904)
    with open(os.path.join(out["zero-0"], os.path.basename(seg)), "ab") as f:
        f.write(b"\0" * 4096)
    return out, size


def test_tails_one_exit_rule_and_true_positions(capsys, tails):
    folders, size = tails
    for name, d in folders.items():
        seg = logs(d)[0]
        for argv in (["stats", d], ["dump", "--files", seg], ["verify", d]):
            code, out, err = run(capsys, *argv)
            assert code == 1, (name, argv, out, err)      # invalid bytes at the end: damage
            assert "Traceback" not in err
        code, out, err = run(capsys, "dump", "--files", seg)
        assert len(err.strip().splitlines()) == 1 and seg in err
        assert "offset 0:" not in err and "offset 0 " not in err
    d = folders["zero-0"]
    code, out, err = run(capsys, "verify", d)
    line = next(ln for ln in out.splitlines() if "zero-filled" in ln)
    assert f"position {size}" in line and "after offset 799" in line and "offset 0" not in line
    code, out, err = run(capsys, "dump", "--files", logs(d)[0])
    assert f"position {size}" in err and "after offset 799" in err
    code, out, err = run(capsys, "stats", d)
    assert "after offset 799" in out


def test_dump_unknown_file_is_an_error(capsys, tmp_path):
    other = tmp_path / "passwd"
    other.write_text("root:x:0:0:root:/root:/bin/bash\n")
    code, out, err = run(capsys, "dump", "--files", str(other))
    assert code == 1 and str(other) in err and len(err.strip().splitlines()) == 1


def test_find_on_a_corrupt_batch_names_the_file(capsys, tmp_path):
    d = write(tmp_path / "t-0", segment_bytes=1 << 20)
    seg = logs(d)[0]
    with Log.open(d) as log:
        s, pos = log.locate(300)
        rec_start = pos + 61
    with open(seg, "r+b") as f:        # a record length that runs past the batch
        f.seek(rec_start)
        f.write(b"\x7f\x7f\x7f")
    code, out, err = run(capsys, "find", d, "--offset", "300")
    assert code == 1 and seg in err and "Traceback" not in err


class _Bar:
    def __init__(self):
        self.steps = []

    def advance(self, n):
        self.steps.append(n)

    def set_label(self, label):
        pass


def test_verify_and_stats_progress_by_bytes(tmp_path):
    from kafkawire.cli import commands
    from kafkawire.cli.paths import resolve
    from kafkawire.log.verify import VerifyReport, verify_segment
    d = str(tmp_path / "t-0")
    with LogWriter(d, segment_bytes=64 << 20) as w:
        for b in range(3000):
            w.append_records([{"value": b"x" * 3000, "timestamp": TS + b}])
    with Log.open(d) as log:
        seg = log.segments[0]
        bar = _Bar()
        verify_segment(seg, VerifyReport(), progress=bar.advance)
        assert sum(bar.steps) == seg.size and len(bar.steps) > 1
        assert max(bar.steps) < seg.size
    bar = _Bar()
    commands.partition_stats(resolve([d])[0], bar)
    assert sum(bar.steps) == os.path.getsize(logs(d)[0]) and len(bar.steps) > 1


def test_log_open_on_log_dirs_and_locate_out_of_range(tmp_path):
    root = tmp_path / "data"
    d = write(root / "orders-0", n_batches=3)
    write(root / "events-1", n_batches=2)
    with pytest.raises(PathError) as exc:
        Log.open(root)
    assert "LogDir.open" in str(exc.value) and "orders-0" in str(exc.value)
    with Log.open(d) as log:
        with pytest.raises(OffsetOutOfRangeError) as exc:
            log.locate(60)
        assert "0..59" in str(exc.value)
        with pytest.raises(OffsetOutOfRangeError):
            log.locate(-1)
    empty = tmp_path / "empty-0"
    empty.mkdir()
    with Log.open(empty) as log:
        assert log.segments == ()
        with pytest.raises(OffsetOutOfRangeError, match="no batches"):
            log.locate(0)
