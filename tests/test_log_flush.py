"""LogWriter's flush policy (the broker's flush.messages and flush.ms), by counting fsyncs."""
from __future__ import annotations

import os
from collections import Counter

import pytest

from kafkawire import LogWriter


@pytest.fixture
def fsyncs(monkeypatch):
    """Counts fsyncs by file suffix (.log, .index, .timeindex, or the folder)."""
    counts: Counter = Counter()
    real = os.fsync

    def counting(fd):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = "?"
        counts[os.path.splitext(name)[1] or "dir"] += 1
        return real(fd)
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to name fsynced files")
    monkeypatch.setattr(os, "fsync", counting)
    return counts


def test_flush_messages(tmp_path, fsyncs):
    w = LogWriter(tmp_path / "t-0", flush_messages=5)
    fsyncs.clear()
    for i in range(12):
        w.append_records([b"x"])
    assert fsyncs[".log"] == 2 and fsyncs[".index"] == 2 and fsyncs[".timeindex"] == 2
    w.append_records([b"y"] * 3)             # offsets 12..14: 5 unsynced since offset 10
    assert fsyncs[".log"] == 3
    w.close()


def test_flush_ms_by_the_writers_clock(tmp_path, fsyncs):
    now = [1000]
    w = LogWriter(tmp_path / "t-0", flush_ms=100, clock=lambda: now[0])
    fsyncs.clear()
    w.append_records([b"x"])
    assert fsyncs[".log"] == 0
    now[0] += 99
    w.append_records([b"x"])
    assert fsyncs[".log"] == 0
    now[0] += 1
    w.append_records([b"x"])
    assert fsyncs[".log"] == 1
    now[0] += 500
    assert w.maybe_flush() is False          # nothing unsynced: no fsync
    w.append_records([b"x"])                 # 500 ms since the last flush
    assert fsyncs[".log"] == 2
    now[0] += 100
    assert fsyncs[".log"] == 2 and w.maybe_flush() is False    # nothing new since
    w.close()


def test_no_policy_flushes_only_on_roll_and_close(tmp_path, fsyncs):
    w = LogWriter(tmp_path / "t-0")
    fsyncs.clear()
    for _ in range(50):
        w.append_records([b"x"])
    assert fsyncs[".log"] == 0
    w.roll()
    assert fsyncs[".log"] == 1
    w.append_records([b"x"])
    w.close()
    assert fsyncs[".log"] == 2


def test_a_roll_counts_as_a_flush(tmp_path, fsyncs):
    w = LogWriter(tmp_path / "t-0", flush_messages=4)
    fsyncs.clear()
    w.append_records([b"x"] * 3)
    w.roll()                                 # synced offsets 0..2
    w.append_records([b"x"] * 3)             # 3 unsynced: no flush yet
    assert fsyncs[".log"] == 1
    w.append_records([b"x"])
    assert fsyncs[".log"] == 2
    w.close()


def test_bad_settings(tmp_path):
    with pytest.raises(ValueError):
        LogWriter(tmp_path / "a-0", flush_messages=0)
    with pytest.raises(ValueError):
        LogWriter(tmp_path / "b-0", flush_ms=-1)
