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
